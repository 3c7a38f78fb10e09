// A runtime's version (CPython's, CRuby's...), header-only C++: parsed from
// the text a runtime reports and compared component-wise. offsets.hpp picks
// an offsets entry by it; a plugin reads it from the runtime's file.
#ifndef OMNIPROF_RUNTIME_VERSION_HPP
#define OMNIPROF_RUNTIME_VERSION_HPP

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>

namespace omniprof::sdk {

// A runtime's version as reported by the process (e.g. from Py_Version or
// ruby_version), compared component-wise.
struct RuntimeVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;

  // "3.11" (patch 0), "3.11.4", and versions with a suffix after the last
  // number: "2.7.18+", "3.13.0rc1", "3.12.0a7". Needs at least MAJOR.MINOR.
  static std::optional<RuntimeVersion> parse(std::string_view text) {
    RuntimeVersion version;
    const char* cursor = text.data();
    const char* const end = text.data() + text.size();
    if (!parse_component(cursor, end, version.major)) return std::nullopt;
    if (cursor == end || *cursor != '.') return std::nullopt;
    ++cursor;
    if (!parse_component(cursor, end, version.minor)) return std::nullopt;
    // A third number only if a digit follows the dot: in "3.11.x" or "3.11."
    // the rest is a suffix like any other.
    if (end - cursor >= 2 && cursor[0] == '.' && cursor[1] >= '0' && cursor[1] <= '9') {
      ++cursor;
      if (!parse_component(cursor, end, version.patch)) return std::nullopt;
    }
    return version;
  }

  std::string to_string() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }

  // Spelled out rather than `= default` / `<=>`: the SDK's headers compile
  // as C++17 (tests/sdk/check_headers.sh).
  friend bool operator==(const RuntimeVersion& a, const RuntimeVersion& b) { return a.key() == b.key(); }
  friend bool operator!=(const RuntimeVersion& a, const RuntimeVersion& b) { return a.key() != b.key(); }
  friend bool operator<(const RuntimeVersion& a, const RuntimeVersion& b) { return a.key() < b.key(); }
  friend bool operator>(const RuntimeVersion& a, const RuntimeVersion& b) { return a.key() > b.key(); }
  friend bool operator<=(const RuntimeVersion& a, const RuntimeVersion& b) { return a.key() <= b.key(); }
  friend bool operator>=(const RuntimeVersion& a, const RuntimeVersion& b) { return a.key() >= b.key(); }

 private:
  std::tuple<int, int, int> key() const { return {major, minor, patch}; }

  // A run of decimal digits at `cursor` that fits in an int; advances past it.
  static bool parse_component(const char*& cursor, const char* end, int& value) {
    if (cursor == end || *cursor < '0' || *cursor > '9') return false;
    auto [next, ec] = std::from_chars(cursor, end, value);
    if (ec != std::errc()) return false;
    cursor = next;
    return true;
  }
};

}  // namespace omniprof::sdk

#endif  // OMNIPROF_RUNTIME_VERSION_HPP
