#include "ruby_offsets_table.h"

namespace omniprof::ruby {
namespace {

#define BPF_FIELD(name) OMNIPROF_OFFSET_FIELD(RubyVersionOffsets, bpf, name)
#define READER_FIELD(name) OMNIPROF_OFFSET_FIELD(RubyVersionOffsets, reader, name)

const sdk::OffsetField kFields[] = {
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

// The EC model and the fields it needs, the shape fields; sets bpf.version.
void check_entry(RubyVersionOffsets& offsets, const std::string& where) {
  offsets.bpf.version = static_cast<uint32_t>(offsets.major) << 16 | static_cast<uint32_t>(offsets.minor) << 8;
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
}

}  // namespace

const sdk::OffsetSchema<RubyVersionOffsets> kRubyOffsetSchema("ruby", kFields, RUBY_OFFSET_NONE, check_entry);

}  // namespace omniprof::ruby
