// OpenExecutables: one open descriptor per executable file (by FileID),
// kept while anything refers to it: the snapshots of the processes mapping
// it (also the exited ones, until the round that used them is written) and
// the ExecutableInfoManager entry that builds its unwind table (also on a
// deferred retry or a reload after eviction). The file stays readable as
// /proc/self/fd/N after its process exited, its map_files entry vanished
// with it, or the file was deleted or replaced on disk.
//
// Descriptors are bounded (kDefaultMaxOpen, or what the agent derives from
// RLIMIT_NOFILE): past the bound a file is identified but not kept, and
// readers get the path it was opened from (map_files, valid while the
// process lives); not_kept counts those. The last reference going closes
// the descriptor. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "omniprof/support/regular_file.h"
#include "omniprof/support/result.h"
#include "executables/file_id.h"

namespace omniprof {

struct OpenExecutable {
  uint64_t file_id = 0;
  UniqueFd fd;
  std::string path;  // "/proc/self/fd/N": opens this very file while fd is open
};

struct OpenExecutableStats {
  uint64_t open = 0;      // descriptors held now
  uint64_t opened = 0;    // files kept so far
  uint64_t reused = 0;    // files found already open under their FileID
  uint64_t not_kept = 0;  // identified while max_open were held: not kept
};

class OpenExecutables {
 public:
  static constexpr size_t kDefaultMaxOpen = 1024;
  explicit OpenExecutables(FileIdCache& ids, size_t max_open = kDefaultMaxOpen) : ids_(ids), max_open_(max_open) {}

  struct Identified {
    uint64_t file_id = 0;
    std::shared_ptr<const OpenExecutable> file;  // null when not kept
  };
  // The FileID of an open file (`path` names it in errors), and the one
  // descriptor kept for that FileID: `file` if none was, else the one held.
  Result<Identified> identify(RegularFile file, const std::string& path);

  OpenExecutableStats stats() const;

 private:
  // Forgets entries whose last reference went. Caller holds mutex_.
  void sweep();

  FileIdCache& ids_;
  const size_t max_open_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::weak_ptr<const OpenExecutable>> open_;
  mutable OpenExecutableStats stats_;
};

}  // namespace omniprof
