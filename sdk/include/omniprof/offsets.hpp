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
// A plugin binds a file's keys to the fields of its own per-version structs
// (the BPF map's and its reader's, side by side: VersionOffsets) with an
// OffsetSchema, and reads the file as a BoundOffsetTable of those structs:
// every key required in every entry, no other accepted, each value checked
// against the width of its field (see OffsetField and the end of this file).
//
// A plugin using this header links yaml-cpp (target `yaml-cpp`).
#ifndef OMNIPROF_OFFSETS_HPP
#define OMNIPROF_OFFSETS_HPP

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstddef>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "omniprof/plugin.hpp"
#include "omniprof/yaml_support.hpp"

namespace omniprof::sdk {

class OffsetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// For a plugin's `create` hook: `make()` builds the instance, reading its
// offsets file(s) (e.g. `new Plugin(host, Table::load_file(data_dir + "/x.yaml"))`),
// stored in `*instance`. An OffsetError is OMNIPROF_ERR_PARSE with its
// message (file, line, key), any other exception OMNIPROF_ERR_INTERNAL.
template <typename Make>
omniprof_status create_with_offsets(void** instance, char* error, Make&& make) {
  return guarded(error, [&] {
    try {
      *instance = make();
    } catch (const OffsetError& e) {
      set_error(error, e.what());
      return OMNIPROF_ERR_PARSE;
    }
    return OMNIPROF_OK;
  });
}

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

  int major() const { return major_; }
  int minor() const { return minor_; }
  // Unset for a MAJOR.MINOR entry, which covers every patch release.
  std::optional<int> patch() const { return patch_; }

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
      throw OffsetError(yaml::invalid_yaml_message(source_name, e));
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

  // The entries in file order.
  const std::vector<Offsets>& entries() const { return entries_; }

  // The versions as written in the file, in file order (for messages such as
  // "no offsets for python 3.14.0; known: 3.11, 3.12").
  std::vector<std::string> versions() const {
    std::vector<std::string> names;
    names.reserve(entries_.size());
    for (const Offsets& entry : entries_) names.push_back(entry.version_);
    return names;
  }

 private:
  using Located = yaml::Located;

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
      Located top{root, "", "", yaml::line_of(root, YAML::Mark::null_mark())};
      if (!root.IsMap())
        fail(top, "expected a mapping with `runtime` and `versions`, got " + yaml::describe(root));

      OffsetTable table;
      std::vector<Located> keys = mapping_entries(top, {"runtime", "versions"});
      table.runtime_ = required_name(top, keys, "runtime");
      const Located& versions = required(top, keys, "versions");
      if (!versions.node.IsSequence() || versions.node.size() == 0) {
        fail(versions, "expected a non-empty list of {version, offsets} entries, got " +
                           yaml::describe(versions.node));
      }
      for (std::size_t i = 0; i < versions.node.size(); ++i) {
        YAML::Node element = versions.node[i];
        Located entry{element, "", yaml::element_path(versions.path, i),
                      yaml::line_of(element, versions.node.Mark())};
        parse_entry(entry, table);
      }
      return table;
    }

   private:
    // Appends the `versions` entry at `entry` to table.entries_.
    void parse_entry(const Located& entry, OffsetTable& table) {
      if (!entry.node.IsMap()) {
        fail(entry, "expected a mapping with `version` and `offsets`, got " +
                        yaml::describe(entry.node));
      }
      std::vector<Located> keys = mapping_entries(entry, {"version", "offsets"});
      Offsets offsets;
      offsets.runtime_ = table.runtime_;
      offsets.location_ = source_name_ + ":" + std::to_string(entry.line + 1);

      const Located& version = required(entry, keys, "version");
      if (!version.node.IsScalar() || !parse_version_pattern(version.node.Scalar(), offsets)) {
        fail(version, "expected a version \"MAJOR.MINOR\" or \"MAJOR.MINOR.PATCH\", got " +
                          yaml::describe(version.node));
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
        fail(fields, "expected a mapping of field: offset, got " + yaml::describe(fields.node));
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

    // Decimal or 0x-hexadecimal, optionally signed (see yaml::parse_integer).
    int64_t parse_offset(const Located& value) {
      if (value.node.IsScalar()) {
        int64_t offset = 0;
        switch (yaml::parse_integer(value.node.Scalar(), offset)) {
          case yaml::ParsedInteger::kOk:
            return offset;
          case yaml::ParsedInteger::kOutOfRange:
            fail(value, value.node.Scalar() + " does not fit in 64 bits");
          case yaml::ParsedInteger::kNotAnInteger:
            break;
        }
      }
      fail(value, "expected an integer offset, got " + yaml::describe(value.node));
    }

    // The entries of a mapping in document order, checking that keys are
    // non-empty names, known (unless `known` is empty) and not repeated:
    // yaml-cpp keeps duplicate keys without a word.
    std::vector<Located> mapping_entries(const Located& mapping,
                                         std::initializer_list<std::string_view> known) {
      yaml::MappingEntries read = yaml::mapping_entries(mapping, known, yaml::EmptyKeys::kReject);
      if (!read.error) return std::move(read.entries);
      const yaml::KeyError& error = *read.error;
      switch (error.kind) {
        case yaml::KeyError::Kind::kNotAName:
          fail(error.key, "keys must be non-empty names, got " + yaml::describe(error.key.node));
        case yaml::KeyError::Kind::kUnknown:
          fail(error.key, "unknown key (known: " + yaml::join(known) + ")");
        case yaml::KeyError::Kind::kDuplicate:
          break;
      }
      fail(error.key, "duplicate key (first on line " + std::to_string(error.first_line + 1) + ")");
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
        fail(value, "expected a name, got " + yaml::describe(value.node));
      }
      return value.node.Scalar();
    }

    [[noreturn]] void fail(const Located& where, const std::string& message) const {
      throw OffsetError(yaml::format_error(source_name_, where, message));
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

// One key of a plugin's offsets file bound to a field of the struct the
// plugin keeps per version (its BPF map's struct and its reader's offsets
// side by side), by the field's position and width:
//   1 byte:  an unsigned value 0 to 255 (a model, an enum)
//   2 bytes: an offset 0 to none-1, or -1 (absent) stored as `none`
//            (the BPF side's OFFSET_NONE, 0xffff)
//   4 bytes: an unsigned value 0 to 2^32-1
//   8 bytes: an int64_t, -1 for absent
struct OffsetField {
  std::string_view key;
  std::size_t offset;  // from the start of the bound struct
  std::size_t size;
};

// The field `member` of the struct member `part` of `Struct`, under the key
// "member": OMNIPROF_OFFSET_FIELD(PythonVersionOffsets, bpf, frame_back).
#define OMNIPROF_OFFSET_FIELD(Struct, part, member)                                                          \
  ::omniprof::sdk::OffsetField {                                                                             \
    #member, offsetof(Struct, part) + offsetof(decltype(Struct::part), member),                              \
        sizeof(std::declval<Struct&>().part.member)                                                          \
  }

// What a plugin keeps per version entry: its BPF map's struct and its
// reader's offsets side by side, and which version the entry is for.
template <typename Bpf, typename Reader>
struct VersionOffsets {
  int major = 0;
  int minor = 0;
  int patch = -1;  // -1: a MAJOR.MINOR entry, for every patch release without its own
  Bpf bpf{};
  Reader reader;
};

template <typename Entry>
class OffsetSchema;

// A plugin's offsets file as its own per-version structs, read through
// `Schema`, the plugin's OffsetSchema:
//   extern const OffsetSchema<PythonVersionOffsets> kPythonOffsetSchema;
//   using PythonOffsetsTable = BoundOffsetTable<PythonVersionOffsets, kPythonOffsetSchema>;
template <typename EntryType, const OffsetSchema<EntryType>& Schema>
class BoundOffsetTable {
 public:
  using Entry = EntryType;

  // Errors: OffsetError naming the file, the version and the key.
  static BoundOffsetTable load_file(const std::string& path) {
    return BoundOffsetTable(Schema.bind(OffsetTable::load_file(path), path));
  }
  static BoundOffsetTable parse(const std::string& yaml_text, const std::string& source_name) {
    return BoundOffsetTable(Schema.bind(OffsetTable::parse(yaml_text, source_name), source_name));
  }

  // The MAJOR.MINOR entry; nullptr if there is none.
  const Entry* find(int major, int minor) const { return find(major, minor, -1); }
  // The MAJOR.MINOR.PATCH entry if there is one, else the MAJOR.MINOR one;
  // nullptr if neither.
  const Entry* find(int major, int minor, int patch) const {
    const Entry* minor_entry = nullptr;
    for (const Entry& entry : versions_) {
      if (entry.major != major || entry.minor != minor) continue;
      if (entry.patch == patch) return &entry;
      if (entry.patch < 0) minor_entry = &entry;
    }
    return minor_entry;
  }
  const std::vector<Entry>& versions() const { return versions_; }

 private:
  explicit BoundOffsetTable(std::vector<Entry> versions) : versions_(std::move(versions)) {}
  std::vector<Entry> versions_;
};

// The keys of one runtime's offsets file, each bound to a field of `Entry`
// (a VersionOffsets), every one required in every version entry and no
// other accepted; and what the binding cannot see, in `check`. A plugin
// defines one, at namespace scope:
//   const OffsetSchema<PythonVersionOffsets> kPythonOffsetSchema("python", kFields, PYTHON_OFFSET_NONE, check);
template <typename Entry>
class OffsetSchema {
 public:
  // Fields that go together, which entries the plugin takes: throws
  // OffsetError naming `where` ("python.yaml: python 3.11").
  using Check = void (*)(Entry& entry, const std::string& where);

  template <std::size_t N>
  constexpr OffsetSchema(const char* runtime, const OffsetField (&fields)[N], uint16_t none, Check check)
      : runtime_(runtime), fields_(fields), count_(N), none_(none), check_(check) {}

  // The file's `runtime`, and the file's name in a plugin's data_dir
  // (<runtime>.yaml).
  const char* runtime() const { return runtime_; }

  // Each entry of `table` as an Entry; `source_name` prefixes errors.
  std::vector<Entry> bind(const OffsetTable& table, const std::string& source_name) const {
    if (table.runtime() != runtime_) {
      throw OffsetError(source_name + ": runtime is \"" + table.runtime() + "\", expected \"" + runtime_ + "\"");
    }
    std::vector<Entry> entries;
    for (const Offsets& source : table.entries()) {
      std::string where = source_name + ": " + runtime_ + " " + source.version();
      Entry entry;
      entry.major = source.major();
      entry.minor = source.minor();
      entry.patch = source.patch() ? *source.patch() : -1;
      read(source, entry, where);
      check_(entry, where);
      entries.push_back(entry);
    }
    return entries;
  }

  // The keys in binding order.
  std::vector<std::string_view> keys() const {
    std::vector<std::string_view> keys;
    for (std::size_t i = 0; i < count_; ++i) keys.push_back(fields_[i].key);
    return keys;
  }

  // The value of `key` as the file writes it (-1 for absent); throws
  // std::out_of_range for a key not bound.
  int64_t value(const Entry& entry, std::string_view key) const {
    const OffsetField* field = find(key);
    if (!field) throw std::out_of_range("no " + std::string(runtime_) + " offset named " + std::string(key));
    const unsigned char* at = reinterpret_cast<const unsigned char*>(&entry) + field->offset;
    switch (field->size) {
      case 1:
        return load<uint8_t>(at);
      case 2: {
        uint16_t value = load<uint16_t>(at);
        return value == none_ ? -1 : value;
      }
      case 4:
        return load<uint32_t>(at);
      default:
        return load<int64_t>(at);
    }
  }

  // Sets `key`; false for a key not bound or a value the field cannot hold.
  bool set(Entry& entry, std::string_view key, int64_t value) const {
    const OffsetField* field = find(key);
    if (!field) return false;
    unsigned char* at = reinterpret_cast<unsigned char*>(&entry) + field->offset;
    switch (field->size) {
      case 1:
        if (value < 0 || value > 0xff) return false;
        return store(at, static_cast<uint8_t>(value));
      case 2:
        // `none` itself is not an offset: it means absent.
        if (value < -1 || value >= none_) return false;
        return store(at, static_cast<uint16_t>(value < 0 ? none_ : value));
      case 4:
        if (value < 0 || value > 0xffffffffLL) return false;
        return store(at, static_cast<uint32_t>(value));
      default:
        if (value < -1) return false;
        return store(at, value);
    }
  }

 private:
  const OffsetField* find(std::string_view key) const {
    for (std::size_t i = 0; i < count_; ++i) {
      if (fields_[i].key == key) return &fields_[i];
    }
    return nullptr;
  }

  // Every bound field of `entry` from `source`, which must list each of
  // them and no other key.
  void read(const Offsets& source, Entry& entry, const std::string& where) const {
    for (const auto& field : source.fields()) {
      if (!find(field.first)) throw OffsetError(where + ": unknown key \"" + field.first + "\"");
    }
    for (std::size_t i = 0; i < count_; ++i) {
      std::string key(fields_[i].key);
      std::optional<int64_t> value = source.find(key);
      if (!value) throw OffsetError(where + ": missing required key \"" + key + "\"");
      if (!set(entry, key, *value)) {
        throw OffsetError(where + ": " + key + ": " + std::to_string(*value) + " does not fit the field");
      }
    }
  }

  template <typename T>
  static T load(const unsigned char* at) {
    T value;
    std::memcpy(&value, at, sizeof(value));
    return value;
  }
  template <typename T>
  static bool store(unsigned char* at, T value) {
    std::memcpy(at, &value, sizeof(value));
    return true;
  }

  const char* runtime_;
  const OffsetField* fields_;
  std::size_t count_;
  uint16_t none_;
  Check check_;
};

}  // namespace omniprof::sdk

#endif  // OMNIPROF_OFFSETS_HPP
