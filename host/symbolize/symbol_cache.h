// SymbolCache: names of native frames by (FileID, ELF address), kept across
// rounds and processes. A long-running agent sees the same libc addresses in
// every process every round; without this each round would look each one
// up and demangle it again (and, with another path per container, read the
// file again). Keyed by FileID, a file's content identity, so an entry is
// never stale: the same FileID is the same file wherever it is mapped.
//
// Bounded in memory (an LRU over entries, counting the strings they hold).
// forget() drops a file's entries when no process maps it any more, with
// the symbolizer's parsed copy of the file; if the file is mapped again, it
// is read again. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "omniprof/support/result.h"
#include "symbolize/elf_symbolizer.h"

namespace omniprof {

struct SymbolCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;     // looked up in the file
  uint64_t evicted = 0;    // entries dropped for room
  uint64_t forgotten = 0;  // entries dropped with their file
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

class SymbolCache {
 public:
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;
  explicit SymbolCache(ElfSymbolizer& symbolizer, size_t max_bytes = kDefaultMaxBytes)
      : symbolizer_(symbolizer), max_bytes_(max_bytes) {}

  // The function at `elf_vaddr` in file `file_id`, read from `path` on a
  // miss; nullopt when no symbol covers it (cached too). Errors (the file is
  // unreadable) are not cached here.
  // `debug`: where a miss looks for the file's debug file.
  Result<std::optional<ElfSymbolizer::Symbol>> lookup(uint64_t file_id, const std::string& path, uint64_t elf_vaddr,
                                                      const ElfSymbolizer::DebugLookup& debug = {});
  // The file's build ID ("" when it has none or it is unreadable).
  std::string build_id(uint64_t file_id, const std::string& path, const ElfSymbolizer::DebugLookup& debug = {});

  // Drops everything cached for the file.
  void forget(uint64_t file_id);
  // forget() for each cached file for which `gone` is true.
  void forget_if(const std::function<bool(uint64_t file_id)>& gone);

  SymbolCacheStats stats() const;

 private:
  struct Entry {
    uint64_t file_id = 0;
    uint64_t elf_vaddr = 0;
    std::optional<ElfSymbolizer::Symbol> symbol;
    size_t bytes = 0;
  };
  using Lru = std::list<Entry>;  // most recently used first
  struct File {
    std::unordered_map<uint64_t, Lru::iterator> by_address;
    std::optional<std::string> build_id;
  };
  // Caller holds mutex_.
  void erase(Lru::iterator entry);
  void forget_locked(uint64_t file_id);

  ElfSymbolizer& symbolizer_;
  const size_t max_bytes_;
  mutable std::mutex mutex_;
  Lru lru_;
  std::unordered_map<uint64_t, File> files_;
  SymbolCacheStats stats_;
};

}  // namespace omniprof
