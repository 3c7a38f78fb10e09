#include "ruby_offsets_table.h"

#include <cstddef>
#include <cstring>
#include <omniprof/offsets.hpp>
#include <stdexcept>

namespace omniprof::ruby {
namespace {

// One YAML key: a u16 member of struct ruby_offsets (RUBY_OFFSET_NONE for
// -1) or an int64_t member of RubyReaderOffsets.
struct Field {
  std::string_view key;
  bool in_bpf;
  std::size_t offset;
};

#define BPF_FIELD(name) Field{#name, true, offsetof(ruby_offsets, name)}
#define READER_FIELD(name) Field{#name, false, offsetof(RubyReaderOffsets, name)}

constexpr Field kFields[] = {
    BPF_FIELD(ec_vm_stack),
    BPF_FIELD(ec_vm_stack_size),
    BPF_FIELD(ec_cfp),
    BPF_FIELD(control_frame_size),
    BPF_FIELD(cfp_pc),
    BPF_FIELD(cfp_iseq),
    BPF_FIELD(cfp_ep),
    BPF_FIELD(ractor_running_ec),
    BPF_FIELD(ec_thread_ptr),
    BPF_FIELD(thread_native_id),
    READER_FIELD(ec_model),
    READER_FIELD(iseq_body),
    READER_FIELD(body_iseq_encoded),
    READER_FIELD(body_type),
    READER_FIELD(body_iseq_size),
    READER_FIELD(body_location_pathobj),
    READER_FIELD(body_location_label),
    READER_FIELD(body_location_first_lineno),
    READER_FIELD(first_lineno_fixnum),
    READER_FIELD(body_insns_info_body),
    READER_FIELD(body_insns_info_positions),
    READER_FIELD(body_insns_info_size),
    READER_FIELD(body_insns_info_succ_index_table),
    READER_FIELD(insn_info_entry_size),
    READER_FIELD(insn_info_line_no),
    READER_FIELD(me_def),
    READER_FIELD(me_called_id),
    READER_FIELD(me_owner),
    READER_FIELD(def_original_id),
    READER_FIELD(string_len),
    READER_FIELD(string_heap_ptr),
    READER_FIELD(string_embed_ary),
    READER_FIELD(string_noembed_flag),
    READER_FIELD(string_embed_len_shift),
    READER_FIELD(string_embed_len_mask),
    READER_FIELD(array_heap_len),
    READER_FIELD(array_heap_ptr),
    READER_FIELD(array_embed_ary),
    READER_FIELD(array_embed_flag),
    READER_FIELD(array_embed_len_shift),
    READER_FIELD(array_embed_len_mask),
    READER_FIELD(class_ext_pointer),
    READER_FIELD(class_ext_embedded),
    READER_FIELD(classext_iv_tbl),
    READER_FIELD(classext_classpath),
    READER_FIELD(classext_attached_object),
    READER_FIELD(class_singleton_flag),
    READER_FIELD(classext_iv_ptr),
    READER_FIELD(vm_shape_list),
    READER_FIELD(shape_size),
    READER_FIELD(shape_edge_name),
    READER_FIELD(shape_next_iv_index),
    READER_FIELD(shape_type),
    READER_FIELD(shape_parent_id),
    READER_FIELD(shape_type_ivar),
    READER_FIELD(shape_id_shift),
    READER_FIELD(st_entries_start),
    READER_FIELD(st_entries_bound),
    READER_FIELD(st_entries),
    READER_FIELD(st_entry_size),
    READER_FIELD(st_entry_key),
    READER_FIELD(st_entry_record),
    READER_FIELD(symbols_ids),
    READER_FIELD(id_scope_shift),
    READER_FIELD(last_op_id),
    READER_FIELD(id_entry_unit),
};

#undef BPF_FIELD
#undef READER_FIELD

const Field* find_field(std::string_view key) {
  for (const Field& field : kFields) {
    if (field.key == key) return &field;
  }
  return nullptr;
}

unsigned char* field_address(RubyVersionOffsets& offsets, const Field& field) {
  auto* base = field.in_bpf ? reinterpret_cast<unsigned char*>(&offsets.bpf)
                            : reinterpret_cast<unsigned char*>(&offsets.reader);
  return base + field.offset;
}

}  // namespace

std::vector<std::string_view> ruby_offset_keys() {
  std::vector<std::string_view> keys;
  for (const Field& field : kFields) keys.push_back(field.key);
  return keys;
}

int64_t ruby_offset_value(const RubyVersionOffsets& offsets, std::string_view key) {
  const Field* field = find_field(key);
  if (!field) throw std::out_of_range("no ruby offset named " + std::string(key));
  const unsigned char* address = field_address(const_cast<RubyVersionOffsets&>(offsets), *field);
  if (field->in_bpf) {
    uint16_t value;
    std::memcpy(&value, address, 2);
    return value == RUBY_OFFSET_NONE ? -1 : value;
  }
  int64_t value;
  std::memcpy(&value, address, 8);
  return value;
}

bool set_ruby_offset(RubyVersionOffsets& offsets, std::string_view key, int64_t value) {
  const Field* field = find_field(key);
  if (!field) return false;
  unsigned char* address = field_address(offsets, *field);
  if (value < -1) return false;
  if (field->in_bpf) {
    // RUBY_OFFSET_NONE itself is not a valid offset: it means absent.
    if (value >= RUBY_OFFSET_NONE) return false;
    auto narrow = static_cast<uint16_t>(value < 0 ? RUBY_OFFSET_NONE : value);
    std::memcpy(address, &narrow, 2);
    return true;
  }
  std::memcpy(address, &value, 8);
  return true;
}


namespace {

// 3.2's shape keys come together, and each field lies inside rb_shape_t:
// the reader reads shape_size bytes per shape and picks the fields out.
void check_shape_offsets(const RubyReaderOffsets& o, const std::string& where) {
  if (o.classext_iv_ptr < 0) return;
  if (o.vm_shape_list < 0 || o.shape_size <= 0 || o.shape_size > 256 || o.shape_type_ivar < 0 ||
      o.shape_id_shift < 0 || o.shape_id_shift > 63) {
    throw sdk::OffsetError(where + ": classext_iv_ptr (classes through object shapes) needs vm_shape_list, "
                           "shape_size (1 to 256), shape_type_ivar and shape_id_shift (0 to 63)");
  }
  struct ShapeField {
    const char* key;
    int64_t offset;
    int64_t width;
  };
  const ShapeField fields[] = {{"shape_edge_name", o.shape_edge_name, 8},
                               {"shape_next_iv_index", o.shape_next_iv_index, 4},
                               {"shape_type", o.shape_type, 1},
                               {"shape_parent_id", o.shape_parent_id, 4}};
  for (const ShapeField& field : fields) {
    if (field.offset < 0 || field.offset + field.width > o.shape_size) {
      throw sdk::OffsetError(where + ": " + field.key + ": " + std::to_string(field.offset) +
                             " does not fit a shape of shape_size " + std::to_string(o.shape_size) + " bytes");
    }
  }
}

}  // namespace

RubyOffsetsTable RubyOffsetsTable::load_file(const std::string& path) {
  return from_table(sdk::OffsetTable::load_file(path), path);
}

RubyOffsetsTable RubyOffsetsTable::parse(const std::string& yaml_text, const std::string& source_name) {
  return from_table(sdk::OffsetTable::parse(yaml_text, source_name), source_name);
}

RubyOffsetsTable RubyOffsetsTable::from_table(const sdk::OffsetTable& table, const std::string& source_name) {
  if (table.runtime() != "ruby") {
    throw sdk::OffsetError(source_name + ": runtime is \"" + table.runtime() + "\", expected \"ruby\"");
  }
  RubyOffsetsTable result;
  for (const std::string& version_text : table.versions()) {
    // The SDK parsed the pattern strictly; find() returns this very entry
    // (a MAJOR.MINOR.PATCH entry wins for its own patch).
    std::optional<sdk::RuntimeVersion> version = sdk::RuntimeVersion::parse(version_text);
    const sdk::Offsets* entry = version ? table.find(*version) : nullptr;
    if (!entry || entry->version() != version_text) {
      throw sdk::OffsetError(source_name + ": version " + version_text + ": not a MAJOR.MINOR[.PATCH] entry");
    }
    bool has_patch = version_text.find('.') != version_text.rfind('.');
    std::string where = source_name + ": ruby " + version_text;
    for (const auto& [key, value] : entry->fields()) {
      if (!find_field(key)) throw sdk::OffsetError(where + ": unknown key \"" + key + "\"");
    }
    RubyVersionOffsets offsets;
    offsets.major = version->major;
    offsets.minor = version->minor;
    offsets.patch = has_patch ? version->patch : -1;
    offsets.bpf.version = static_cast<uint32_t>(version->major) << 16 | static_cast<uint32_t>(version->minor) << 8;
    for (const Field& field : kFields) {
      std::string key(field.key);
      std::optional<int64_t> value = entry->find(key);
      if (!value) throw sdk::OffsetError(where + ": missing required key \"" + key + "\"");
      if (!set_ruby_offset(offsets, key, *value)) {
        throw sdk::OffsetError(where + ": " + key + ": " + std::to_string(*value) + " does not fit the field");
      }
    }
    int64_t model = offsets.reader.ec_model;
    if (model != RUBY_EC_TLS_DTV && model != RUBY_EC_GLOBAL_POINTER && model != RUBY_EC_MAIN_RACTOR) {
      throw sdk::OffsetError(where + ": ec_model: " + std::to_string(model) + " is not 1 (TLS), 3 (global pointer) or " +
                             "4 (main ractor)");
    }
    if (model == RUBY_EC_MAIN_RACTOR && offsets.bpf.ractor_running_ec == RUBY_OFFSET_NONE) {
      throw sdk::OffsetError(where + ": ec_model 4 (main ractor) needs ractor_running_ec");
    }
    // A global EC is the GVL holder's: without the thread check, a thread
    // running outside the GVL would get another thread's stack.
    if (model != RUBY_EC_TLS_DTV &&
        (offsets.bpf.ec_thread_ptr == RUBY_OFFSET_NONE || offsets.bpf.thread_native_id == RUBY_OFFSET_NONE)) {
      throw sdk::OffsetError(where + ": ec_model " + std::to_string(model) +
                             " (a global EC) needs ec_thread_ptr and thread_native_id");
    }
    check_shape_offsets(offsets.reader, where);
    result.versions_.push_back(offsets);
  }
  return result;
}

const RubyVersionOffsets* RubyOffsetsTable::find(int major, int minor) const {
  for (const RubyVersionOffsets& offsets : versions_) {
    if (offsets.major == major && offsets.minor == minor && offsets.patch < 0) return &offsets;
  }
  return nullptr;
}

const RubyVersionOffsets* RubyOffsetsTable::find(int major, int minor, int patch) const {
  for (const RubyVersionOffsets& offsets : versions_) {
    if (offsets.major == major && offsets.minor == minor && offsets.patch == patch) return &offsets;
  }
  return find(major, minor);
}

}  // namespace omniprof::ruby
