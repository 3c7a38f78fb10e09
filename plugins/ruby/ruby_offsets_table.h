// The shipped CRuby offsets (offsets/ruby.yaml) as the structs the plugin
// uses: struct ruby_offsets for the BPF map, RubyReaderOffsets for the
// user-space frame reader (ruby_frame_reader.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/offsets.hpp"
#include "ruby_offsets.h"

namespace omniprof::ruby {

// What the reader needs beyond the BPF walk's offsets: bytes from the start
// of the named struct, flag values and bit positions, or constants of the
// version's sources; -1 where the version has no such thing. The YAML keys
// have the same names (offsets/ruby.yaml explains each).
struct RubyReaderOffsets {
  int64_t ec_model = -1;  // enum ruby_ec_model; RUBY_EC_TLS_DTV stands for "TLS", whichever TLS model
  // rb_iseq_t.body, rb_iseq_constant_body.iseq_encoded: the walk records the
  // pc itself (rbperf.h), the reader turns it into an index with them
  int64_t iseq_body = -1;
  int64_t body_iseq_encoded = -1;
  // rb_iseq_constant_body
  int64_t body_type = -1;
  int64_t body_iseq_size = -1;
  int64_t body_location_pathobj = -1;
  int64_t body_location_label = -1;
  int64_t body_location_first_lineno = -1;
  int64_t first_lineno_fixnum = -1;  // 1: a VALUE holding a Fixnum (up to 3.1), 0: an int
  int64_t body_insns_info_body = -1;
  int64_t body_insns_info_positions = -1;
  int64_t body_insns_info_size = -1;
  int64_t body_insns_info_succ_index_table = -1;
  int64_t insn_info_entry_size = -1;
  int64_t insn_info_line_no = -1;
  // rb_callable_method_entry_t, rb_method_definition_t
  int64_t me_def = -1;
  int64_t me_called_id = -1;
  int64_t me_owner = -1;
  int64_t def_original_id = -1;
  // RString, RArray
  int64_t string_len = -1;
  int64_t string_heap_ptr = -1;
  int64_t string_embed_ary = -1;
  int64_t string_noembed_flag = -1;
  int64_t string_embed_len_shift = -1;  // -1: an embedded string's length is string_len too
  int64_t string_embed_len_mask = -1;
  int64_t array_heap_len = -1;
  int64_t array_heap_ptr = -1;
  int64_t array_embed_ary = -1;
  int64_t array_embed_flag = -1;
  int64_t array_embed_len_shift = -1;
  int64_t array_embed_len_mask = -1;
  // RClass and its rb_classext_t
  int64_t class_ext_pointer = -1;   // RClass.ptr (up to 3.1)
  int64_t class_ext_embedded = -1;  // the classext right after the RClass (3.3+)
  int64_t classext_iv_tbl = -1;     // st_table of ivars: __classpath__, __attached__ (up to 3.1)
  int64_t classext_classpath = -1;  // 3.3+
  int64_t classext_attached_object = -1;  // 3.3+
  int64_t class_singleton_flag = -1;      // FL_SINGLETON
  // 3.2's object shapes (ruby_shapes.h): the class's ivar array, where the
  // VM keeps its shapes, rb_shape_t, and where the flags keep the shape id
  int64_t classext_iv_ptr = -1;
  int64_t vm_shape_list = -1;
  int64_t shape_size = -1;
  int64_t shape_edge_name = -1;
  int64_t shape_next_iv_index = -1;
  int64_t shape_type = -1;
  int64_t shape_parent_id = -1;
  int64_t shape_type_ivar = -1;
  int64_t shape_id_shift = -1;
  // st_table (ivar tables up to 3.1)
  int64_t st_entries_start = -1;
  int64_t st_entries_bound = -1;
  int64_t st_entries = -1;
  int64_t st_entry_size = -1;
  int64_t st_entry_key = -1;
  int64_t st_entry_record = -1;
  // The ID table: rb_symbols_t and symbol.c's constants
  int64_t symbols_ids = -1;
  int64_t id_scope_shift = -1;
  int64_t last_op_id = -1;
  int64_t id_entry_unit = -1;
};

// Everything known about one version entry of offsets/ruby.yaml: a minor
// version (patch -1) or one patch release that differs from its minor
// (3.0.4: the EC in TLS). find(3, 1, 7) finds "3.1", find(3, 0, 4) "3.0.4".
using RubyVersionOffsets = sdk::VersionOffsets<ruby_offsets, RubyReaderOffsets>;

// offsets/ruby.yaml's keys, named as the fields of the two structs, and its
// checks (the EC model and the fields it needs, the shape fields; it sets
// bpf.version). Loading throws omniprof::sdk::OffsetError naming the file,
// the version and the key (the plugin's create hook catches it).
extern const sdk::OffsetSchema<RubyVersionOffsets> kRubyOffsetSchema;
using RubyOffsetsTable = sdk::BoundOffsetTable<RubyVersionOffsets, kRubyOffsetSchema>;

}  // namespace omniprof::ruby
