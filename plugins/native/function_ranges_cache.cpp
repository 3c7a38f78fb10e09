#include "function_ranges_cache.h"

#include <utility>

namespace omniprof::native {

FunctionRangesCache::FunctionRangesCache(size_t max_ranges, Reader read)
    : max_ranges_(max_ranges), read_(std::move(read)) {
  // As load_executable's table builder reads the file: its own .eh_frame and
  // .debug_frame, else its separate debug file's .debug_frame.
  if (!read_) read_ = [](const std::string& path) { return unwind::FunctionRanges::read(path); };
}

Result<std::optional<unwind::FunctionRange>> FunctionRangesCache::find(uint64_t file_id, const std::string& path,
                                                                       uint64_t address) {
  auto known = files_.find(file_id);
  if (known != files_.end() && !known->second->ranges && known->second->path != path) {
    erase(known->second);
    known = files_.end();
  }
  if (known != files_.end()) {
    lru_.splice(lru_.begin(), lru_, known->second);
  } else {
    ++stats_.files_read;
    lru_.push_front(File{file_id, path, read_(path)});
    files_.emplace(file_id, lru_.begin());
    ranges_ += ranges_of(lru_.front());
    // Room for the file just read, made from the least recently asked; the
    // file itself stays even alone over the bound, for this question.
    while (ranges_ > max_ranges_ && lru_.size() > 1) {
      ++stats_.files_evicted;
      erase(std::prev(lru_.end()));
    }
  }
  const File& file = lru_.front();
  if (!file.ranges) return file.ranges.error();
  return file.ranges->find(address);
}

void FunctionRangesCache::forget(uint64_t file_id) {
  if (auto known = files_.find(file_id); known != files_.end()) erase(known->second);
}

void FunctionRangesCache::erase(Lru::iterator file) {
  ranges_ -= ranges_of(*file);
  files_.erase(file->file_id);
  lru_.erase(file);
}

FunctionRangesCacheStats FunctionRangesCache::stats() const {
  FunctionRangesCacheStats stats = stats_;
  stats.ranges = ranges_;
  return stats;
}

}  // namespace omniprof::native
