// KernelSymbols: kernel text symbols from /proc/kallsyms, for naming kernel
// stack frames. kallsyms has no symbol sizes, so a symbol covers addresses up
// to the next one, within a bound (see lookup).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/support/result.h"

namespace omniprof {

struct KernelSymbol {
  std::string name;
  std::string module;  // "" for vmlinux, else the name inside [brackets]
  uint64_t start = 0;
};

class KernelSymbols {
 public:
  // Reads a kallsyms-format file. Errors: the file is unreadable, a line is
  // malformed, there are no text symbols, or every address reads as 0
  // (kernel.kptr_restrict hides them from this process).
  static Result<KernelSymbols> load(const std::string& path = "/proc/kallsyms");
  // Same, from text already read; `source` names it in error messages.
  static Result<KernelSymbols> parse(std::string_view text, const std::string& source);

  // The text symbol containing `addr`: the closest one at or below it, unless
  // `addr` is more than kMaxSymbolSpan past that symbol's start.
  std::optional<KernelSymbol> lookup(uint64_t addr) const;

  size_t size() const { return symbols_.size(); }

  // No kernel function comes close to this size; a bigger distance from the
  // closest symbol means the address is in no known text (past the last
  // symbol, or in a gap such as unloaded module space).
  static constexpr uint64_t kMaxSymbolSpan = 1 << 20;

 private:
  class Builder;
  struct Entry {
    uint64_t start = 0;
    uint32_t name_offset = 0;
    uint32_t name_length = 0;
    uint32_t module_index = 0;  // into modules_; 0 is vmlinux ("")
    uint8_t rank = 0;           // alias preference, lower wins
  };

  std::string names_;
  std::vector<std::string> modules_;
  std::vector<Entry> symbols_;  // sorted by start, one per address
};

}  // namespace omniprof
