// /proc/PID/maps: the memory mappings of a process, used to find which file
// (and where in it) an instruction address belongs to (the host), or where a
// JIT keeps its code (the perfmap plugin).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/support/result.h"

namespace omniprof {

struct ProcMapping {
  uint64_t start = 0;  // first address
  uint64_t end = 0;    // one past the last address
  uint64_t offset = 0; // file offset mapped at `start`
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  std::string perms;  // e.g. "r-xp"
  // The file path, "[heap]"/"[stack]"/"[vdso]"-style pseudo paths, or "" for
  // anonymous memory. The kernel's " (deleted)" suffix is removed and
  // recorded in `deleted` instead.
  std::string path;
  bool deleted = false;  // the file was unlinked (or replaced) after mapping

  bool executable() const { return perms.size() >= 3 && perms[2] == 'x'; }
  // Backed by a file we can (in principle) open: an absolute path, not a
  // pseudo path. A deleted file is still file-backed: it stays readable
  // through /proc/PID/map_files while mapped.
  bool is_file_backed() const { return !path.empty() && path.front() == '/'; }
  bool contains(uint64_t address) const { return address >= start && address < end; }
};

// Parses the text of a maps file. A malformed line is an error naming its
// line number and content.
Result<std::vector<ProcMapping>> parse_proc_maps(std::string_view text);

// Reads /proc/PID/maps. A process that has exited gives an error saying so.
Result<std::vector<ProcMapping>> read_proc_maps(int pid);

// The mapping containing `address` in a list sorted by start address (as the
// kernel lists them), or nullptr.
const ProcMapping* find_mapping(const std::vector<ProcMapping>& mappings, uint64_t address);

}  // namespace omniprof
