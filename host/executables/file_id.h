// FileID: one id per executable file content, so the same libc mapped by a
// hundred processes, or present in several containers under other paths,
// gets one unwind table. Computed from the first and last 4 KiB and the
// length (reading whole files would cost far more; a changed file changes
// its ELF headers or tail, where section tables and notes live).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "omniprof/support/regular_file.h"
#include "omniprof/support/result.h"

namespace omniprof {

// 0 is reserved for "not a file" in process_info mappings. The path is
// opened with open_regular_file (never blocks, refuses non-regular files).
Result<uint64_t> compute_file_id(const std::string& path);
// The id of an open file; `path` only names it in errors.
Result<uint64_t> compute_file_id(const RegularFile& file, const std::string& path);

// compute_file_id with a cache keyed by the (device, inode, size, mtime) of
// the file actually read: fstat of the open descriptor, so that a path
// swapped between a stat() and the open cannot give one file's id to
// another, and a mapping opened through /proc/PID/map_files is keyed by what
// the process mapped. A file already seen is not read again. Thread-safe.
class FileIdCache {
 public:
  Result<uint64_t> file_id(const std::string& path);
  Result<uint64_t> file_id(const RegularFile& file, const std::string& path);
  size_t size() const;

 private:
  struct Key {
    uint64_t dev, ino, size;
    int64_t mtime_ns;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  mutable std::mutex mutex_;
  std::unordered_map<Key, uint64_t, KeyHash> ids_;
};

}  // namespace omniprof
