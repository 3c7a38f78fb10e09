#include "python_offsets_table.h"

#include <cstddef>
#include <cstring>
#include <omniprof/offsets.hpp>
#include <stdexcept>

namespace omniprof::python {
namespace {

// One YAML key: where it lives in PythonVersionOffsets and how wide it is.
struct Field {
  std::string_view key;
  bool in_bpf;         // a member of struct python_offsets, else of PythonReaderOffsets
  std::size_t offset;  // offsetof in that struct
  std::size_t
      size;  // bytes: 1 and 2 (u8, u16 with -1 as PYTHON_OFFSET_NONE), 4 (version_hex), 8 (int64_t)
};

#define BPF_FIELD(name) \
  Field { #name, true, offsetof(python_offsets, name), sizeof(python_offsets::name) }
#define READER_FIELD(name) \
  Field { #name, false, offsetof(PythonReaderOffsets, name), sizeof(int64_t) }

constexpr Field kFields[] = {
    BPF_FIELD(version_hex),
    BPF_FIELD(frame_model),
    BPF_FIELD(gil_model),
    BPF_FIELD(interp_tstate_head),
    BPF_FIELD(interp_ceval_gil),
    BPF_FIELD(tstate_next),
    BPF_FIELD(tstate_thread_id),
    BPF_FIELD(tstate_frame),
    BPF_FIELD(cframe_current_frame),
    BPF_FIELD(frame_back),
    BPF_FIELD(frame_code),
    BPF_FIELD(frame_lasti),
    BPF_FIELD(frame_owner),
    BPF_FIELD(frame_is_entry),
    BPF_FIELD(code_adaptive),
    BPF_FIELD(gil_locked),
    BPF_FIELD(gil_last_holder),
    READER_FIELD(co_filename),
    READER_FIELD(co_name),
    READER_FIELD(co_qualname),
    READER_FIELD(co_firstlineno),
    READER_FIELD(co_lnotab),
    READER_FIELD(co_linetable),
    READER_FIELD(co_code),
    READER_FIELD(unicode_state),
    READER_FIELD(unicode_length),
    READER_FIELD(unicode_ascii_data),
    READER_FIELD(unicode_compact_data),
    READER_FIELD(unicode_kind_bit),
    READER_FIELD(unicode_compact_bit),
    READER_FIELD(unicode_ascii_bit),
    READER_FIELD(bytes_size),
    READER_FIELD(bytes_data),
    READER_FIELD(string_size),
    READER_FIELD(string_data),
    READER_FIELD(runtime_interpreters_head),
    READER_FIELD(runtime_ceval_gil_locked),
    READER_FIELD(runtime_ceval_gil_last_holder),
    READER_FIELD(debug_offsets_size),
};

#undef BPF_FIELD
#undef READER_FIELD

const Field* find_field(std::string_view key) {
  for (const Field& field : kFields) {
    if (field.key == key) return &field;
  }
  return nullptr;
}

unsigned char* field_address(PythonVersionOffsets& offsets, const Field& field) {
  auto* base = field.in_bpf ? reinterpret_cast<unsigned char*>(&offsets.bpf)
                            : reinterpret_cast<unsigned char*>(&offsets.reader);
  return base + field.offset;
}

}  // namespace

std::vector<std::string_view> python_offset_keys() {
  std::vector<std::string_view> keys;
  for (const Field& field : kFields) keys.push_back(field.key);
  return keys;
}

int64_t python_offset_value(const PythonVersionOffsets& offsets, std::string_view key) {
  const Field* field = find_field(key);
  if (!field) throw std::out_of_range("no python offset named " + std::string(key));
  const unsigned char* address = field_address(const_cast<PythonVersionOffsets&>(offsets), *field);
  switch (field->size) {
    case 1: {
      uint8_t value;
      std::memcpy(&value, address, 1);
      return value;
    }
    case 2: {
      uint16_t value;
      std::memcpy(&value, address, 2);
      return value == PYTHON_OFFSET_NONE ? -1 : value;
    }
    case 4: {
      uint32_t value;
      std::memcpy(&value, address, 4);
      return value;
    }
    default: {
      int64_t value;
      std::memcpy(&value, address, 8);
      return value;
    }
  }
}

bool set_python_offset(PythonVersionOffsets& offsets, std::string_view key, int64_t value) {
  const Field* field = find_field(key);
  if (!field) return false;
  unsigned char* address = field_address(offsets, *field);
  switch (field->size) {
    case 1: {
      if (value < 0 || value > 0xff) return false;
      auto narrow = static_cast<uint8_t>(value);
      std::memcpy(address, &narrow, 1);
      return true;
    }
    case 2: {
      // PYTHON_OFFSET_NONE itself is not a valid offset: it means absent.
      if (value < -1 || value >= PYTHON_OFFSET_NONE) return false;
      auto narrow = static_cast<uint16_t>(value < 0 ? PYTHON_OFFSET_NONE : value);
      std::memcpy(address, &narrow, 2);
      return true;
    }
    case 4: {
      if (value < 0 || value > 0xffffffffLL) return false;
      auto narrow = static_cast<uint32_t>(value);
      std::memcpy(address, &narrow, 4);
      return true;
    }
    default:
      if (value < -1) return false;
      std::memcpy(address, &value, 8);
      return true;
  }
}

PythonOffsetsTable PythonOffsetsTable::load_file(const std::string& path) {
  return from_table(sdk::OffsetTable::load_file(path), path);
}

PythonOffsetsTable PythonOffsetsTable::parse(const std::string& yaml_text,
                                             const std::string& source_name) {
  return from_table(sdk::OffsetTable::parse(yaml_text, source_name), source_name);
}

PythonOffsetsTable PythonOffsetsTable::from_table(const sdk::OffsetTable& table,
                                                  const std::string& source_name) {
  if (table.runtime() != "python") {
    throw sdk::OffsetError(source_name + ": runtime is \"" + table.runtime() +
                           "\", expected \"python\"");
  }
  PythonOffsetsTable result;
  for (const std::string& version_text : table.versions()) {
    auto version = sdk::RuntimeVersion::parse(version_text);
    const sdk::Offsets* entry = version ? table.find(*version) : nullptr;
    bool minor_entry = version_text.find('.') == version_text.rfind('.');
    if (!entry || !minor_entry) {
      // Entries are per minor version: the BPF map has one slot per minor.
      throw sdk::OffsetError(source_name + ": version " + version_text +
                             ": expected a MAJOR.MINOR entry (one per minor version)");
    }
    std::string where = source_name + ": python " + version_text;
    for (const auto& [key, value] : entry->fields()) {
      if (!find_field(key)) throw sdk::OffsetError(where + ": unknown key \"" + key + "\"");
    }
    PythonVersionOffsets offsets;
    offsets.major = version->major;
    offsets.minor = version->minor;
    for (const Field& field : kFields) {
      std::string key(field.key);
      std::optional<int64_t> value = entry->find(key);
      if (!value) throw sdk::OffsetError(where + ": missing required key \"" + key + "\"");
      if (!set_python_offset(offsets, key, *value)) {
        throw sdk::OffsetError(where + ": " + key + ": " + std::to_string(*value) +
                               " does not fit the field");
      }
    }
    uint32_t expected_hex =
        static_cast<uint32_t>(version->major) << 24 | static_cast<uint32_t>(version->minor) << 16;
    if (offsets.bpf.version_hex != expected_hex) {
      throw sdk::OffsetError(where + ": version_hex " + std::to_string(offsets.bpf.version_hex) +
                             " is not " + std::to_string(expected_hex));
    }
    result.versions_.push_back(offsets);
  }
  return result;
}

const PythonVersionOffsets* PythonOffsetsTable::find(int major, int minor) const {
  for (const PythonVersionOffsets& offsets : versions_) {
    if (offsets.major == major && offsets.minor == minor) return &offsets;
  }
  return nullptr;
}

}  // namespace omniprof::python
