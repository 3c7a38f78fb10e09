#include "symbolize/symbol_cache.h"

#include <vector>

namespace omniprof {
namespace {

// What one entry costs besides its strings: the list node, the index node
// and bucket, roughly.
constexpr size_t kEntryOverhead = 128;

size_t entry_bytes(const std::optional<ElfSymbolizer::Symbol>& symbol) {
  if (!symbol) return kEntryOverhead;
  return kEntryOverhead + symbol->name.capacity() + symbol->system_name.capacity();
}

}  // namespace

Result<std::optional<ElfSymbolizer::Symbol>> SymbolCache::lookup(uint64_t file_id, const std::string& path,
                                                                uint64_t elf_vaddr,
                                                                const ElfSymbolizer::DebugLookup& debug) {
  {
    std::lock_guard lock(mutex_);
    if (auto file = files_.find(file_id); file != files_.end()) {
      if (auto found = file->second.by_address.find(elf_vaddr); found != file->second.by_address.end()) {
        lru_.splice(lru_.begin(), lru_, found->second);
        stats_.hits++;
        return found->second->symbol;
      }
    }
  }
  // The symbolizer has its own lock; reading a file happens outside ours.
  auto symbol = symbolizer_.symbolize(file_id, path, elf_vaddr, debug);
  if (!symbol) return symbol;
  std::lock_guard lock(mutex_);
  stats_.misses++;
  File& file = files_[file_id];
  if (file.by_address.count(elf_vaddr)) return symbol;  // another thread was first
  Entry entry{file_id, elf_vaddr, *symbol, entry_bytes(*symbol)};
  stats_.bytes += entry.bytes;
  stats_.entries++;
  lru_.push_front(std::move(entry));
  file.by_address.emplace(elf_vaddr, lru_.begin());
  while (stats_.bytes > max_bytes_ && lru_.size() > 1) {
    erase(std::prev(lru_.end()));
    stats_.evicted++;
  }
  return symbol;
}

std::string SymbolCache::build_id(uint64_t file_id, const std::string& path,
                                  const ElfSymbolizer::DebugLookup& debug) {
  {
    std::lock_guard lock(mutex_);
    if (auto file = files_.find(file_id); file != files_.end() && file->second.build_id) {
      return *file->second.build_id;
    }
  }
  auto id = symbolizer_.build_id(file_id, path, debug);
  if (!id) return "";
  std::lock_guard lock(mutex_);
  files_[file_id].build_id = *id;
  return *id;
}

void SymbolCache::erase(Lru::iterator entry) {
  auto file = files_.find(entry->file_id);
  if (file != files_.end()) {
    file->second.by_address.erase(entry->elf_vaddr);
    if (file->second.by_address.empty() && !file->second.build_id) files_.erase(file);
  }
  stats_.bytes -= entry->bytes;
  stats_.entries--;
  lru_.erase(entry);
}

void SymbolCache::forget_locked(uint64_t file_id) {
  auto file = files_.find(file_id);
  if (file == files_.end()) return;
  std::vector<Lru::iterator> entries;
  entries.reserve(file->second.by_address.size());
  for (const auto& [address, entry] : file->second.by_address) entries.push_back(entry);
  for (Lru::iterator entry : entries) {
    stats_.bytes -= entry->bytes;
    stats_.entries--;
    stats_.forgotten++;
    lru_.erase(entry);
  }
  files_.erase(file);
}

void SymbolCache::forget(uint64_t file_id) {
  {
    std::lock_guard lock(mutex_);
    forget_locked(file_id);
  }
  symbolizer_.forget(file_id);
}

void SymbolCache::forget_if(const std::function<bool(uint64_t file_id)>& gone) {
  {
    std::lock_guard lock(mutex_);
    std::vector<uint64_t> ids;
    for (const auto& [id, file] : files_) {
      if (gone(id)) ids.push_back(id);
    }
    for (uint64_t id : ids) forget_locked(id);
  }
  // Also the files parsed for their load bias only, never sampled.
  symbolizer_.forget_if(gone);
}

SymbolCacheStats SymbolCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace omniprof
