// The extents of a file's functions as its call-frame information gives
// them: one [start, end) per FDE of .eh_frame and .debug_frame (its own, or
// its separate debug file's, read as the unwind table builder reads them).
// It names the function around an address no symbol covers (a stripped
// python3.11, libruby's static functions): every FDE starts a function (or
// one of its cold parts, which the compiler gives an FDE of its own), so
// all addresses of one unnamed function share its FDE's start.
//
// 16 bytes per FDE, sorted by start and disjoint: an FDE wholly inside
// another one (the same function in both .eh_frame and .debug_frame, or a
// nested description) adds nothing, and `find` is one binary search.
// Malformed FDEs are skipped, as the table builder skips them (it logs and
// counts them when the file's table is built).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/support/cfi/elf_cfi.h"

namespace omniprof::unwind {

struct FunctionRange {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive
  bool operator==(const FunctionRange&) const = default;
};

class FunctionRanges {
 public:
  // The FDEs of the CFI sections of the ELF file at `path`
  // (read_elf_cfi). A file without CFI gives an empty set, not an error.
  static Result<FunctionRanges> read(const std::string& path, const CfiReadOptions& options = {});
  // The same from sections in memory; `code_ranges` as for the table
  // builder (empty: no limit).
  static FunctionRanges from_sections(std::span<const CfiSectionView> sections,
                                      std::span<const CodeRange> code_ranges = {});

  // The function whose FDE covers ELF virtual address `address`, or nullopt.
  std::optional<FunctionRange> find(uint64_t address) const;

  size_t size() const { return ranges_.size(); }
  size_t bytes() const { return ranges_.capacity() * sizeof(FunctionRange); }

 private:
  std::vector<FunctionRange> ranges_;  // by start, disjoint
};

}  // namespace omniprof::unwind
