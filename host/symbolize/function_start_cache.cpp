#include "symbolize/function_start_cache.h"

namespace omniprof {

Result<std::optional<FunctionBounds>> FunctionStartCache::lookup(uint64_t file_id, uint64_t elf_address,
                                                                 const Ask& ask) {
  if (auto known = files_.find(file_id); known != files_.end()) {
    const File& file = known->second;
    auto after = file.functions.upper_bound(elf_address);
    if (after != file.functions.begin()) {
      auto function = std::prev(after);
      if (elf_address < function->second) {
        return std::optional<FunctionBounds>(FunctionBounds{function->first, function->second});
      }
    }
    if (file.uncovered.count(elf_address)) return std::optional<FunctionBounds>();
  }
  ++stats_.asked;
  auto answer = ask(elf_address);
  if (!answer) return answer;
  if (entries_ >= max_entries_) {
    ++stats_.cleared;
    files_.clear();
    entries_ = 0;
  }
  File& file = files_[file_id];
  if (*answer) {
    // The plugin's ranges do not overlap (it keeps one per address); one
    // that would is not kept, and is simply asked again.
    const FunctionBounds& bounds = **answer;
    auto next = file.functions.lower_bound(bounds.start);
    const bool overlaps_next = next != file.functions.end() && next->first < bounds.end;
    const bool overlaps_previous = next != file.functions.begin() && std::prev(next)->second > bounds.start;
    if (!overlaps_next && !overlaps_previous) {
      file.functions.emplace(bounds.start, bounds.end);
      ++entries_;
    }
  } else if (file.uncovered.insert(elf_address).second) {
    ++entries_;
  }
  return answer;
}

}  // namespace omniprof
