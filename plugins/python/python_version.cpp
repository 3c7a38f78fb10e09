#include "python_version.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

namespace omniprof::python {
namespace {

// MAJOR.MINOR as the file name says it: "python3.9", "libpython3.9.so.1.0",
// "libpython3.7m.so", "python2.7"; nullopt for "python3" or "python".
std::optional<std::pair<int, int>> version_from_file_name(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  std::size_t at = name.find("python");
  if (at == std::string::npos) return std::nullopt;
  const char* cursor = name.c_str() + at + 6;
  int major = 0;
  int minor = 0;
  int consumed = 0;
  if (std::sscanf(cursor, "%d.%d%n", &major, &minor, &consumed) != 2) return std::nullopt;
  return std::make_pair(major, minor);
}

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

// Every NUL-terminated text in `data` that reads
// MAJOR.MINOR.MICRO with MAJOR 2 or 3, then NUL or a suffix of letters, digits
// and '+' ("3.9.18", "2.7.18+", "3.13.0rc1"), as version -> count.
std::map<std::tuple<int, int, int>, int> version_strings(const std::vector<uint8_t>& data) {
  std::map<std::tuple<int, int, int>, int> found;
  for (std::size_t i = 0; i + 5 < data.size(); ++i) {
    // The linker merges a string into the tail of a longer one that ends
    // the same ("3.9.18" into the install prefix "/root/.pyenv/versions/3.9.18"),
    // so a version may start mid-string: only not right after a digit or dot.
    if (i > 0 && (is_digit(data[i - 1]) || data[i - 1] == '.')) continue;
    if (data[i] != '2' && data[i] != '3') continue;
    std::size_t end = i;
    while (end < data.size() && data[end] != 0 && end - i < 24) ++end;
    if (end == data.size() || data[end] != 0) continue;
    std::string text(reinterpret_cast<const char*>(data.data() + i), end - i);
    int major = 0, minor = 0, micro = 0, consumed = 0;
    if (std::sscanf(text.c_str(), "%d.%d.%d%n", &major, &minor, &micro, &consumed) != 3) continue;
    if (!is_digit(static_cast<uint8_t>(text[consumed - 1]))) continue;
    bool suffix_ok = true;
    for (std::size_t k = static_cast<std::size_t>(consumed); k < text.size(); ++k) {
      char c = text[k];
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+')) suffix_ok = false;
    }
    // "3.9.18 (main, ...)" is Py_GetVersion's buffer format, built at run
    // time; a bare PY_VERSION has at most a short suffix.
    if (!suffix_ok || minor > 99 || micro > 99) continue;
    ++found[{major, minor, micro}];
  }
  return found;
}

// Whether a defined symbol's name starts with `prefix`.
Result<bool> has_symbol_with_prefix(const ElfFile& elf, std::string_view prefix) {
  bool found = false;
  auto visited = elf.for_each_symbol(SymbolKinds::kFunctionsAndObjects, [&](const ElfSymbol& symbol) {
    found = symbol.name.starts_with(prefix);
    return !found;
  });
  if (!visited) return visited.error();
  return found;
}

}  // namespace

Result<PythonVersion> read_python_version(const std::string& path) {
  auto opened = ElfFile::open(path);
  if (!opened) return opened.error();
  return read_python_version(*opened);
}

Result<PythonVersion> read_python_version(const ElfFile& elf) {
  const std::string& path = elf.path();
  auto py_version = elf.find_symbol("Py_Version");
  if (!py_version) return py_version.error();
  if (const auto& symbol = *py_version) {
    if (symbol->size != 8) {
      return make_error(path + ": Py_Version is " + std::to_string(symbol->size) +
                        " bytes, expected an 8-byte unsigned long");
    }
    auto bytes = elf.read_at_vaddr(symbol->value, 8);
    if (!bytes) return make_error(bytes.error().message + " (reading Py_Version)");
    uint64_t hex = 0;
    std::memcpy(&hex, bytes->data(), 8);  // little-endian host and file (x86-64, aarch64)
    PythonVersion version{{static_cast<int>((hex >> 24) & 0xff), static_cast<int>((hex >> 16) & 0xff),
                           static_cast<int>((hex >> 8) & 0xff)},
                          "Py_Version"};
    if (version.major != 3 || (hex >> 32) != 0) {
      char text[32];
      std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(hex));
      return make_error(path + ": Py_Version holds " + text + ", not a Python 3 version");
    }
    return version;
  }

  // Before 3.11: which major does the ABI say?
  std::optional<int> abi_major;
  auto python2 = has_symbol_with_prefix(elf, "PyString_FromString");
  if (!python2) return python2.error();
  if (*python2) {
    abi_major = 2;
  } else {
    auto python3 = has_symbol_with_prefix(elf, "PyUnicode_FromString");
    if (!python3) return python3.error();
    if (*python3) abi_major = 3;
  }
  if (!abi_major) return make_error(path + ": no Python C API symbols (PyString_* / PyUnicode_*)");

  auto rodata = elf.section_bytes(".rodata");
  if (!rodata) return make_error(rodata.error().message + " (looking for PY_VERSION)");
  auto candidates = version_strings(*rodata);
  std::optional<std::pair<int, int>> wanted = version_from_file_name(path);
  std::set<std::tuple<int, int, int>> matches;
  for (const auto& [version, count] : candidates) {
    auto [major, minor, micro] = version;
    if (major != *abi_major) continue;
    if (wanted && (major != wanted->first || minor != wanted->second)) continue;
    matches.insert(version);
  }
  std::string expected = wanted
                             ? std::to_string(wanted->first) + "." + std::to_string(wanted->second)
                             : std::to_string(*abi_major) + ".x";
  if (matches.empty()) {
    return make_error(path + ": no PY_VERSION string for " + expected + " in .rodata");
  }
  if (matches.size() > 1) {
    std::string list;
    for (const auto& [major, minor, micro] : matches) {
      list += (list.empty() ? "" : ", ") + std::to_string(major) + "." + std::to_string(minor) +
              "." + std::to_string(micro);
    }
    return make_error(path + ": ambiguous PY_VERSION strings for " + expected +
                      " in .rodata: " + list);
  }
  auto [major, minor, micro] = *matches.begin();
  return PythonVersion{{major, minor, micro}, "PY_VERSION string"};
}

}  // namespace omniprof::python
