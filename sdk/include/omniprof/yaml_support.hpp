// Strict YAML reading helpers on top of yaml-cpp (header-only).
//
// Shared by the host's configuration parser and the plugin SDK's offsets
// tables (omniprof/offsets.hpp), so both report errors the same way: the
// source name, the line and the dotted key path of the offending value
// ("python.yaml:7: versions[0].offsets.a.b: ...").
//
// They exist because yaml-cpp is lenient in two ways that turn typos into
// silently wrong settings: as<int64_t>() reads a leading zero as octal
// ("010240" is 4256), and a mapping keeps a repeated key without a word.
// parse_integer() and mapping_entries() close those gaps.
//
// Depends on yaml-cpp and the standard library only: the SDK is installed
// header-only for third-party plugin authors.
#ifndef OMNIPROF_YAML_SUPPORT_HPP
#define OMNIPROF_YAML_SUPPORT_HPP

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace omniprof::sdk::yaml {

// A value in the document and where it came from, for error messages.
struct Located {
  YAML::Node node;
  std::string key;   // the mapping key it is the value of; empty for list elements
  std::string path;  // "sampling.frequency_hz", "versions[1].offsets.PyFrameObject.f_back"
  int line;          // 0-based as in YAML::Mark, -1 if unknown
};

// The line to blame for `node`. A null value (`key:` with nothing after it)
// carries the mark of whatever follows it in yaml-cpp, so `fallback` (the
// key's mark) is used then.
inline int line_of(const YAML::Node& node, const YAML::Mark& fallback) {
  const YAML::Mark mark = node.Mark();
  if (node.IsNull() || mark.is_null()) return fallback.is_null() ? -1 : fallback.line;
  return mark.line;
}

// What a node is, for "expected ..., got <this>" messages.
inline std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      break;
  }
  return "\"" + node.Scalar() + "\"";
}

// The path of `key` in the mapping at `parent`: "sampling.frequency_hz".
inline std::string child_path(std::string_view parent, std::string_view key) {
  std::string path(parent);
  if (!path.empty()) path += '.';
  path += key;
  return path;
}

// The path of element `index` of the list at `parent`: "pids[2]".
inline std::string element_path(std::string_view parent, std::size_t index) {
  std::string path(parent);
  path += '[';
  path += std::to_string(index);
  path += ']';
  return path;
}

// "a, b, c", for listing the known keys.
inline std::string join(std::initializer_list<std::string_view> words) {
  std::string joined;
  for (std::string_view word : words) {
    if (!joined.empty()) joined += ", ";
    joined += word;
  }
  return joined;
}

// "source:line: path: message", leaving out the line if unknown and the path
// if empty.
inline std::string format_error(std::string_view source_name, const Located& where,
                                std::string_view message) {
  std::string text(source_name);
  if (where.line >= 0) text += ":" + std::to_string(where.line + 1);
  if (!where.path.empty()) {
    text += ": ";
    text += where.path;
  }
  text += ": ";
  text += message;
  return text;
}

// "source:line: invalid YAML: ..." for a yaml-cpp parse error.
inline std::string invalid_yaml_message(std::string_view source_name, const YAML::Exception& e) {
  std::string text(source_name);
  if (!e.mark.is_null()) text += ":" + std::to_string(e.mark.line + 1);
  return text + ": invalid YAML: " + e.msg;
}

enum class ParsedInteger { kOk, kNotAnInteger, kOutOfRange };

// Decimal or 0x-hexadecimal, optionally signed, into `value`. Hand-rolled
// rather than yaml-cpp's as<int64_t>(), which reads "010240" as octal and
// would silently shrink a number written with a leading zero. `value` is
// only written on kOk.
inline ParsedInteger parse_integer(std::string_view text, int64_t& value) {
  bool negative = false;
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty() || text.front() == '-' || text.front() == '+')
    return ParsedInteger::kNotAnInteger;
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
  if (end != text.data() + text.size()) return ParsedInteger::kNotAnInteger;
  if (ec == std::errc::result_out_of_range) return ParsedInteger::kOutOfRange;
  if (ec != std::errc()) return ParsedInteger::kNotAnInteger;
  constexpr uint64_t kMaxMagnitude = std::numeric_limits<int64_t>::max();
  if (magnitude > kMaxMagnitude + (negative ? 1 : 0)) return ParsedInteger::kOutOfRange;
  value = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return ParsedInteger::kOk;
}

// The first thing wrong with the keys of a mapping; the caller words the
// message.
struct KeyError {
  enum class Kind {
    kNotAName,   // not a scalar, or an empty one where empty keys are rejected
    kUnknown,    // not among the known keys
    kDuplicate,  // repeated
  };
  Kind kind;
  Located key;          // the offending key, with the path it would have
  int first_line = -1;  // kDuplicate: the 0-based line it was first set on
};

enum class EmptyKeys { kAllow, kReject };

struct MappingEntries {
  std::vector<Located> entries;   // the values, in document order, keyed and with their paths
  std::optional<KeyError> error;  // if set, `entries` stops before the offending key
};

// The key/value pairs of the mapping at `mapping`, checking that keys are
// plain names, known (an empty `known` accepts any key; the caller validates
// it) and not repeated.
inline MappingEntries mapping_entries(const Located& mapping,
                                      std::initializer_list<std::string_view> known,
                                      EmptyKeys empty_keys = EmptyKeys::kAllow) {
  MappingEntries result;
  std::map<std::string, int> first_line_of_key;
  // Copies, not references: yaml-cpp's iterator hands out a temporary
  // pair, so `it->first` dangles at the end of the statement.
  for (const auto& key_and_value : mapping.node) {
    const YAML::Node key = key_and_value.first;
    const YAML::Node value = key_and_value.second;
    const YAML::Mark key_mark = key.Mark();
    const int key_line = key_mark.is_null() ? mapping.line : key_mark.line;
    if (!key.IsScalar() || (empty_keys == EmptyKeys::kReject && key.Scalar().empty())) {
      result.error = KeyError{KeyError::Kind::kNotAName, Located{key, "", mapping.path, key_line}};
      return result;
    }
    const std::string& name = key.Scalar();
    Located entry{value, name, child_path(mapping.path, name), line_of(value, key_mark)};
    Located at_key{key, name, entry.path, key_line};
    if (known.size() != 0 &&
        std::find(known.begin(), known.end(), std::string_view(name)) == known.end()) {
      result.error = KeyError{KeyError::Kind::kUnknown, std::move(at_key)};
      return result;
    }
    auto [previous, inserted] = first_line_of_key.emplace(name, key_line);
    if (!inserted) {
      result.error = KeyError{KeyError::Kind::kDuplicate, std::move(at_key), previous->second};
      return result;
    }
    result.entries.push_back(std::move(entry));
  }
  return result;
}

}  // namespace omniprof::sdk::yaml

#endif  // OMNIPROF_YAML_SUPPORT_HPP
