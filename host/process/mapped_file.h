// Opening the file a process maps, as the process maps it: not whatever its
// path names now. A package upgrade writes a new library and renames it over
// the old one; the process keeps running the old, now deleted, file, and
// reading the path would unwind and name its samples from the new one.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "omniprof/support/regular_file.h"
#include "omniprof/support/result.h"
#include "process/proc_maps.h"

namespace omniprof {

// /proc/PID/map_files/START-END: the very file of the mapping, deleted,
// replaced, a memfd or in another mount namespace alike, for as long as the
// mapping exists. Opening it needs CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE).
std::string map_files_path(int32_t pid, const ProcMapping& mapping);

// Where the file of a file-backed mapping may be opened from, best first:
// map_files, then /proc/PID/root/PATH (the path as the process sees it, in
// its mount namespace), then PATH in the agent's own namespace (a process
// that has exited since the kernel reported the mapping); the last two
// unless the file was deleted, where the path names another file or none.
// Empty for a mapping that is not file-backed.
std::vector<std::string> mapped_file_candidates(int32_t pid, const ProcMapping& mapping);

// Whether the open file `st` is the one /proc/PID/maps names: same inode,
// and same device unless it came through map_files (which is that file by
// construction; only a remap between reading maps and the open changes it,
// and that changes the inode). Devices are not compared there because
// btrfs subvolumes report another st_dev than the one maps prints.
bool is_mapped_file(const struct stat& st, const ProcMapping& mapping, bool through_map_files);

struct OpenedMapping {
  RegularFile file;
  std::string path;  // the candidate it was opened from
};

// Opens the mapping's file from the first candidate that works and is the
// mapped file (open_regular_file: never blocks, regular files only). The
// error names the mapping and why each candidate was refused.
Result<OpenedMapping> open_mapped_file(int32_t pid, const ProcMapping& mapping);

}  // namespace omniprof
