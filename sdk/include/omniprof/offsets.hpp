// Version-specific struct offsets for runtime plugins (header-only, yaml-cpp).
//
// A plugin that walks an interpreter's memory (CPython, CRuby...) needs the
// offsets of that interpreter's internal struct fields, which change between
// releases. It ships them as one YAML file per runtime in its data_dir:
//
//   runtime: python
//   versions:
//     - version: "3.11"        # matches every 3.11.x without a more specific entry
//       offsets:
//         PyThreadState.frame: 72
//         PyFrameObject.f_back: 24
//     - version: "3.11.4"      # matches 3.11.4 only, and wins over "3.11" there
//       offsets:
//         PyThreadState.frame: 80
//         PyFrameObject.f_back: -1   # -1 by convention: absent in this version
//
// Versions are MAJOR.MINOR or MAJOR.MINOR.PATCH; quote them so that a YAML
// tool never turns "3.10" into the float 3.1 (yaml-cpp itself keeps the text).
// Offsets are decimal or 0x-hexadecimal integers, possibly negative. Listing
// the same version twice, or the same field twice in one version, is an error.
//
// Errors throw omniprof::sdk::OffsetError, whose message names the file, line
// and key ("python.yaml:7: versions[1].offsets.PyFrameObject.f_back: expected
// an integer, got \"abc\""). Exceptions are fine here because they never
// cross the C plugin boundary: a plugin loads its tables inside its own
// `create` hook, catches OffsetError there, copies what() into the host's
// `error` buffer and returns OMNIPROF_ERR_PARSE (or OMNIPROF_ERR_IO for a file
// it cannot read). Lookups of a version with no entry return nullptr rather
// than throwing, since that is the expected OMNIPROF_ERR_UNSUPPORTED case.
//
// A plugin using this header links yaml-cpp (target `yaml-cpp`).
#ifndef OMNIPROF_OFFSETS_HPP
#define OMNIPROF_OFFSETS_HPP

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace omniprof::sdk {

class OffsetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

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

  friend bool operator==(const RuntimeVersion&, const RuntimeVersion&) = default;
  friend auto operator<=>(const RuntimeVersion&, const RuntimeVersion&) = default;

 private:
  // A run of decimal digits at `cursor` that fits in an int; advances past it.
  static bool parse_component(const char*& cursor, const char* end, int& value) {
    if (cursor == end || *cursor < '0' || *cursor > '9') return false;
    auto [next, ec] = std::from_chars(cursor, end, value);
    if (ec != std::errc()) return false;
    cursor = next;
    return true;
  }
};

// The offsets of one `versions` entry.
class Offsets {
 public:
  // The offset of `field`; throws OffsetError naming the field and this
  // entry's version if the entry does not list it.
  int64_t get(const std::string& field) const {
    if (auto offset = find(field)) return *offset;
    throw OffsetError(location_ + ": " + runtime_ + " " + version_ + " has no offset for \"" +
                      field + "\"");
  }

  std::optional<int64_t> find(const std::string& field) const {
    auto it = fields_.find(field);
    if (it == fields_.end()) return std::nullopt;
    return it->second;
  }

  // The version as written in the file: "3.11" or "3.11.4".
  const std::string& version() const { return version_; }

  // Every field of this entry, for logging what a plugin was configured with.
  const std::map<std::string, int64_t>& fields() const { return fields_; }

 private:
  friend class OffsetTable;

  std::string runtime_;
  std::string version_;
  std::string location_;  // "python.yaml:12", where the entry starts
  int major_ = 0;
  int minor_ = 0;
  std::optional<int> patch_;  // unset: the entry covers every patch release
  std::map<std::string, int64_t> fields_;
};

// All the `versions` entries of one offsets file.
class OffsetTable {
 public:
  // Reads and parses `path`; errors are prefixed with `path`.
  static OffsetTable load_file(const std::string& path) { return parse(read_file(path), path); }

  // Parses a whole offsets document; `source_name` prefixes error messages.
  static OffsetTable parse(const std::string& yaml_text, const std::string& source_name) {
    Parser parser{source_name};
    try {
      return parser.parse_document(yaml_text);
    } catch (const YAML::Exception& e) {
      // Syntax errors land here. The parser only reads nodes whose type it
      // has checked, so anything else from yaml-cpp would be a bug; it is
      // still reported as an OffsetError so the plugin's catch sees it.
      if (e.mark.is_null()) throw OffsetError(source_name + ": invalid YAML: " + e.msg);
      throw OffsetError(source_name + ":" + std::to_string(e.mark.line + 1) +
                        ": invalid YAML: " + e.msg);
    }
  }

  // The entry for `version`: the MAJOR.MINOR.PATCH entry if there is one,
  // else the MAJOR.MINOR entry, else nullptr. The pointer lives as long as
  // this table.
  const Offsets* find(const RuntimeVersion& version) const {
    const Offsets* minor_match = nullptr;
    for (const Offsets& entry : entries_) {
      if (entry.major_ != version.major || entry.minor_ != version.minor) continue;
      if (!entry.patch_) {
        minor_match = &entry;
      } else if (*entry.patch_ == version.patch) {
        return &entry;
      }
    }
    return minor_match;
  }

  // The file's `runtime`, e.g. "python".
  const std::string& runtime() const { return runtime_; }

  // The versions as written in the file, in file order (for messages such as
  // "no offsets for python 3.14.0; known: 3.11, 3.12").
  std::vector<std::string> versions() const {
    std::vector<std::string> names;
    names.reserve(entries_.size());
    for (const Offsets& entry : entries_) names.push_back(entry.version_);
    return names;
  }

 private:
  // A value in the document and where it came from, for error messages.
  struct Located {
    YAML::Node node;
    std::string key;   // the mapping key it is the value of; empty for list elements
    std::string path;  // "versions[1].offsets.PyFrameObject.f_back"
    int line;          // 0-based as in YAML::Mark, -1 if unknown
  };

  class Parser {
   public:
    explicit Parser(const std::string& source_name) : source_name_(source_name) {}

    OffsetTable parse_document(const std::string& yaml_text) {
      std::vector<YAML::Node> documents = YAML::LoadAll(yaml_text);
      if (documents.size() > 1) {
        // A second document would otherwise be silently ignored.
        fail(Located{documents[1], "", "", documents[1].Mark().line},
             "expected one YAML document, found " + std::to_string(documents.size()));
      }
      if (documents.empty() || documents.front().IsNull()) {
        throw OffsetError(source_name_ + ": empty offsets file, expected `runtime` and `versions`");
      }
      const YAML::Node& root = documents.front();
      Located top{root, "", "", line_of(root, YAML::Mark::null_mark())};
      if (!root.IsMap())
        fail(top, "expected a mapping with `runtime` and `versions`, got " + describe(root));

      OffsetTable table;
      std::vector<Located> keys = mapping_entries(top, {"runtime", "versions"});
      table.runtime_ = required_name(top, keys, "runtime");
      const Located& versions = required(top, keys, "versions");
      if (!versions.node.IsSequence() || versions.node.size() == 0) {
        fail(versions, "expected a non-empty list of {version, offsets} entries, got " +
                           describe(versions.node));
      }
      for (std::size_t i = 0; i < versions.node.size(); ++i) {
        YAML::Node element = versions.node[i];
        Located entry{element, "", versions.path + "[" + std::to_string(i) + "]",
                      line_of(element, versions.node.Mark())};
        parse_entry(entry, table);
      }
      return table;
    }

   private:
    // Appends the `versions` entry at `entry` to table.entries_.
    void parse_entry(const Located& entry, OffsetTable& table) {
      if (!entry.node.IsMap()) {
        fail(entry, "expected a mapping with `version` and `offsets`, got " + describe(entry.node));
      }
      std::vector<Located> keys = mapping_entries(entry, {"version", "offsets"});
      Offsets offsets;
      offsets.runtime_ = table.runtime_;
      offsets.location_ = source_name_ + ":" + std::to_string(entry.line + 1);

      const Located& version = required(entry, keys, "version");
      if (!version.node.IsScalar() || !parse_version_pattern(version.node.Scalar(), offsets)) {
        fail(version, "expected a version \"MAJOR.MINOR\" or \"MAJOR.MINOR.PATCH\", got " +
                          describe(version.node));
      }
      offsets.version_ = version.node.Scalar();
      for (const Offsets& earlier : table.entries_) {
        if (earlier.major_ == offsets.major_ && earlier.minor_ == offsets.minor_ &&
            earlier.patch_ == offsets.patch_) {
          fail(version,
               "duplicate version " + offsets.version_ + " (first at " + earlier.location_ + ")");
        }
      }

      const Located& fields = required(entry, keys, "offsets");
      if (!fields.node.IsMap()) {
        fail(fields, "expected a mapping of field: offset, got " + describe(fields.node));
      }
      for (const Located& field : mapping_entries(fields, {})) {
        offsets.fields_[field.key] = parse_offset(field);
      }
      table.entries_.push_back(std::move(offsets));
    }

    // Strict, unlike RuntimeVersion::parse: a suffix here ("3.11+") is a typo
    // that would otherwise make the entry match something unintended.
    static bool parse_version_pattern(const std::string& text, Offsets& offsets) {
      std::optional<RuntimeVersion> version = RuntimeVersion::parse(text);
      if (!version) return false;
      std::size_t dots = 0;
      for (char c : text) {
        if (c == '.') {
          ++dots;
        } else if (c < '0' || c > '9') {
          return false;
        }
      }
      if (text.back() == '.' || dots > 2) return false;
      offsets.major_ = version->major;
      offsets.minor_ = version->minor;
      if (dots == 2) offsets.patch_ = version->patch;
      return true;
    }

    // Decimal or 0x-hexadecimal, optionally signed. Hand-rolled rather than
    // yaml-cpp's as<int64_t>(), which reads "072" as octal.
    int64_t parse_offset(const Located& value) {
      const std::string expected = "expected an integer offset, got ";
      if (!value.node.IsScalar()) fail(value, expected + describe(value.node));
      std::string_view text = value.node.Scalar();
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
      uint64_t magnitude = 0;
      const char* const end = text.data() + text.size();
      auto [next, ec] = std::from_chars(text.data(), end, magnitude, base);
      if (text.empty() || text.front() == '-' || text.front() == '+' || next != end ||
          (ec != std::errc() && ec != std::errc::result_out_of_range)) {
        fail(value, expected + describe(value.node));
      }
      constexpr uint64_t kMaxMagnitude = std::numeric_limits<int64_t>::max();
      if (ec == std::errc::result_out_of_range || magnitude > kMaxMagnitude + (negative ? 1 : 0)) {
        fail(value, value.node.Scalar() + " does not fit in 64 bits");
      }
      return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    }

    // The entries of a mapping in document order, checking that keys are
    // plain, known (unless `known` is empty) and not repeated: yaml-cpp keeps
    // duplicate keys without a word.
    std::vector<Located> mapping_entries(const Located& mapping,
                                         std::initializer_list<std::string_view> known) {
      std::vector<Located> entries;
      std::map<std::string, int> first_line_of_key;
      // Copies, not references: yaml-cpp's iterator hands out a temporary
      // pair, so `it->first` dangles at the end of the statement.
      for (const auto& key_and_value : mapping.node) {
        const YAML::Node key = key_and_value.first;
        const YAML::Node value = key_and_value.second;
        const YAML::Mark key_mark = key.Mark();
        const int key_line = key_mark.is_null() ? mapping.line : key_mark.line;
        if (!key.IsScalar() || key.Scalar().empty()) {
          fail(Located{key, "", mapping.path, key_line},
               "keys must be non-empty names, got " + describe(key));
        }
        const std::string& name = key.Scalar();
        Located entry{value, name, child_path(mapping.path, name), line_of(value, key_mark)};
        Located at_key{key, name, entry.path, key_line};
        if (known.size() != 0 && std::find(known.begin(), known.end(), name) == known.end()) {
          std::string names;
          for (std::string_view known_name : known) {
            names += names.empty() ? "" : ", ";
            names += known_name;
          }
          fail(at_key, "unknown key (known: " + names + ")");
        }
        auto [previous, inserted] = first_line_of_key.emplace(name, key_line);
        if (!inserted) {
          fail(at_key,
               "duplicate key (first on line " + std::to_string(previous->second + 1) + ")");
        }
        entries.push_back(std::move(entry));
      }
      return entries;
    }

    static const Located* find_key(const std::vector<Located>& entries, const std::string& name) {
      for (const Located& entry : entries) {
        if (entry.key == name) return &entry;
      }
      return nullptr;
    }

    const Located& required(const Located& mapping, const std::vector<Located>& keys,
                            const std::string& name) {
      const Located* value = find_key(keys, name);
      if (!value) fail(mapping, "missing required key `" + name + "`");
      return *value;
    }

    std::string required_name(const Located& mapping, const std::vector<Located>& keys,
                              const std::string& name) {
      const Located& value = required(mapping, keys, name);
      if (!value.node.IsScalar() || value.node.Scalar().empty()) {
        fail(value, "expected a name, got " + describe(value.node));
      }
      return value.node.Scalar();
    }

    // A null value (`key:` with nothing after it) carries the mark of
    // whatever follows it in yaml-cpp, so the key's line is used then.
    static int line_of(const YAML::Node& node, const YAML::Mark& fallback) {
      const YAML::Mark mark = node.Mark();
      if (node.IsNull() || mark.is_null()) return fallback.is_null() ? -1 : fallback.line;
      return mark.line;
    }

    static std::string child_path(const std::string& parent, const std::string& key) {
      return parent.empty() ? key : parent + "." + key;
    }

    static std::string describe(const YAML::Node& node) {
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

    [[noreturn]] void fail(const Located& where, const std::string& message) const {
      std::string text = source_name_;
      if (where.line >= 0) text += ":" + std::to_string(where.line + 1);
      if (!where.path.empty()) text += ": " + where.path;
      throw OffsetError(text + ": " + message);
    }

    const std::string& source_name_;
  };

  static std::string read_file(const std::string& path) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rbe"),
                                                         &std::fclose);
    if (!file) throw OffsetError("cannot open " + path + ": " + std::strerror(errno));
    std::string contents;
    char buffer[16384];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) contents.append(buffer, n);
    if (std::ferror(file.get()))
      throw OffsetError("cannot read " + path + ": " + std::strerror(errno));
    return contents;
  }

  std::string runtime_;
  std::vector<Offsets> entries_;
};

}  // namespace omniprof::sdk

#endif  // OMNIPROF_OFFSETS_HPP
