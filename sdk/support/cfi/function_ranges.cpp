#include "omniprof/support/cfi/function_ranges.h"

#include <algorithm>

namespace omniprof::unwind {

FunctionRanges FunctionRanges::from_sections(std::span<const CfiSectionView> sections,
                                             std::span<const CodeRange> code_ranges) {
  FunctionRanges result;
  std::vector<FunctionRange>& ranges = result.ranges_;
  for (const CfiSectionView& view : sections) {
    CfiSectionWalker walker(view);
    walker.read_cies();
    ranges.reserve(ranges.size() + walker.fde_entries());
    Fde fde;
    while (walker.next_fde(fde)) {
      if (fde_in_code(fde, code_ranges)) ranges.push_back(FunctionRange{fde.pc_begin, fde.pc_end});
    }
  }
  // By start, the longer first where two start together: the one that
  // follows is then inside it and dropped below.
  std::sort(ranges.begin(), ranges.end(), [](const FunctionRange& a, const FunctionRange& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  // Keep only ranges that reach past every earlier one: what is dropped lies
  // wholly inside a kept range, which names its addresses.
  // Where two overlap without nesting (not seen in compiler output), the
  // earlier one ends where the later starts: ranges stay disjoint, so every
  // address has one function, whichever address is asked first.
  size_t kept = 0;
  for (const FunctionRange& range : ranges) {
    if (kept > 0 && range.end <= ranges[kept - 1].end) continue;
    if (kept > 0 && ranges[kept - 1].end > range.start) ranges[kept - 1].end = range.start;
    ranges[kept++] = range;
  }
  ranges.resize(kept);
  ranges.shrink_to_fit();
  return result;
}

Result<FunctionRanges> FunctionRanges::read(const std::string& path, const CfiReadOptions& options) {
  auto cfi = read_elf_cfi(path, options);
  if (!cfi) return cfi.error();
  std::vector<CfiSectionView> views;
  views.reserve(cfi->sections.size());
  for (const CfiSection& section : cfi->sections) views.push_back(section.view());
  return from_sections(views, cfi->code_ranges);
}

std::optional<FunctionRange> FunctionRanges::find(uint64_t address) const {
  // The last range starting at or before the address: ranges are disjoint,
  // so if any holds the address, this one does.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                             [](uint64_t value, const FunctionRange& range) { return value < range.start; });
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (address >= it->end) return std::nullopt;
  return *it;
}

}  // namespace omniprof::unwind
