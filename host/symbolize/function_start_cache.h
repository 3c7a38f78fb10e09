// FunctionStartCache: for native frames no symbol names, the function that
// holds each address, as the native plugin found it from the file's unwind
// information (PluginHost::function_bounds), by FileID. One question per
// function: an address inside a function already found is answered here, so
// a round asks once per unnamed function, not once per address, and later
// rounds not at all. Keyed by FileID, a file's content identity, so an entry
// is never stale.
//
// Bounded (max_entries functions and addresses without one, over all files):
// past it, everything is dropped and asked again. Errors are not kept (the
// plugin keeps what it could not read). Not thread-safe: the assembler runs
// on the main thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "omniprof/support/result.h"
#include "plugins/plugin_host.h"

namespace omniprof {

struct FunctionStartCacheStats {
  uint64_t asked = 0;    // questions to the plugin
  uint64_t cleared = 0;  // times the bound dropped everything
};

class FunctionStartCache {
 public:
  static constexpr size_t kDefaultMaxEntries = size_t{1} << 18;
  using Ask = std::function<Result<std::optional<FunctionBounds>>(uint64_t elf_address)>;

  explicit FunctionStartCache(size_t max_entries = kDefaultMaxEntries) : max_entries_(max_entries) {}

  // The function around `elf_address` of file `file_id`: known, else `ask`ed
  // and kept. nullopt when no FDE covers the address.
  Result<std::optional<FunctionBounds>> lookup(uint64_t file_id, uint64_t elf_address, const Ask& ask);

  const FunctionStartCacheStats& stats() const { return stats_; }

 private:
  struct File {
    std::map<uint64_t, uint64_t> functions;  // start -> end, disjoint
    std::unordered_set<uint64_t> uncovered;  // addresses no FDE covers
  };
  const size_t max_entries_;
  std::unordered_map<uint64_t, File> files_;
  size_t entries_ = 0;
  FunctionStartCacheStats stats_;
};

}  // namespace omniprof
