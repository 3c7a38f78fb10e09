// Splitting kernel-generated text (/proc/PID/maps, kallsyms) into lines and
// a line into fields.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace omniprof {

// Splits off the next field of `rest`: skips any leading `separators`, then
// returns the run of characters up to the next separator (or the end) and
// leaves `rest` starting at that separator. Returns an empty field, and
// empties `rest`, once only separators are left.
inline std::string_view next_field(std::string_view& rest, std::string_view separators) {
  const size_t begin = rest.find_first_not_of(separators);
  if (begin == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(begin);
  const size_t end = std::min(rest.find_first_of(separators), rest.size());
  std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end);
  return field;
}

// Splits off the next line of `text`, without its '\n', and leaves `text`
// starting after it. The last line need not end in '\n'.
inline std::string_view next_line(std::string_view& text) {
  const size_t newline = std::min(text.find('\n'), text.size());
  const std::string_view line = text.substr(0, newline);
  text.remove_prefix(std::min(newline + 1, text.size()));
  return line;
}

}  // namespace omniprof
