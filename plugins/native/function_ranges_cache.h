// FunctionRangesCache: the native plugin's answer to function_bounds
// (plugin.h): per executable file, the extents of its functions from its
// unwind information (unwind/function_ranges.h), read on the first question
// about that file (the host asks only for frames no symbol names, so most
// files are never read) and kept until the file is unloaded.
//
// Bounded: past `max_ranges` ranges over all files, the files asked about
// least recently are dropped (read again if asked again). A file that cannot
// be read keeps its error, so a round with many unnamed frames of it does
// not read it again for each (asked through another path, it is tried
// again: the first may have been a process's map_files entry that is gone
// now). Not thread-safe: the host calls the plugin's
// hooks one at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>

#include "omniprof/support/result.h"
#include "omniprof/support/cfi/function_ranges.h"

namespace omniprof::native {

struct FunctionRangesCacheStats {
  uint64_t files_read = 0;
  uint64_t files_evicted = 0;
  uint64_t ranges = 0;  // held now
};

class FunctionRangesCache {
 public:
  // 16 bytes a range: 64 MiB, about 40 libLLVMs.
  static constexpr size_t kDefaultMaxRanges = size_t{4} << 20;
  using Reader = std::function<Result<unwind::FunctionRanges>(const std::string& path)>;

  // `read` reads a file's ranges (default: FunctionRanges::read with the
  // table builder's options).
  explicit FunctionRangesCache(size_t max_ranges = kDefaultMaxRanges, Reader read = {});

  // The function around ELF address `address` of file `file_id`, read from
  // `path` if this file is not cached; nullopt when no FDE covers it; the
  // file's error if it cannot be read.
  Result<std::optional<unwind::FunctionRange>> find(uint64_t file_id, const std::string& path, uint64_t address);
  // Drops what is kept for the file (unload_executable).
  void forget(uint64_t file_id);

  FunctionRangesCacheStats stats() const;

 private:
  struct File {
    uint64_t file_id = 0;
    std::string path;  // read from
    Result<unwind::FunctionRanges> ranges;
  };
  using Lru = std::list<File>;  // most recently asked first
  size_t ranges_of(const File& file) const { return file.ranges ? file.ranges->size() : 0; }
  void erase(Lru::iterator file);

  const size_t max_ranges_;
  Reader read_;
  Lru lru_;
  std::unordered_map<uint64_t, Lru::iterator> files_;
  size_t ranges_ = 0;
  FunctionRangesCacheStats stats_;
};

}  // namespace omniprof::native
