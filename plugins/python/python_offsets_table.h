// The shipped CPython offsets (offsets/python.yaml) as the structs the plugin
// uses: struct python_offsets for the BPF map, PythonReaderOffsets for the
// user-space code object reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/offsets.hpp"
#include "python_offsets.h"

namespace omniprof::python {

// Offsets the user-space reader needs (bytes from the start of the named
// struct; -1: the version has no such field). Keys of the same name in the YAML.
struct PythonReaderOffsets {
  int64_t co_filename = -1;
  int64_t co_name = -1;
  int64_t co_qualname = -1;  // 3.11+
  int64_t co_firstlineno = -1;
  int64_t co_lnotab = -1;     // up to 3.9
  int64_t co_linetable = -1;  // 3.10+
  int64_t co_code = -1;       // up to 3.10
  int64_t unicode_state = -1;
  int64_t unicode_length = -1;
  int64_t unicode_ascii_data = -1;
  int64_t unicode_compact_data = -1;
  int64_t unicode_kind_bit = -1;
  int64_t unicode_compact_bit = -1;
  int64_t unicode_ascii_bit = -1;
  int64_t bytes_size = -1;
  int64_t bytes_data = -1;
  int64_t string_size = -1;                    // 2.7
  int64_t string_data = -1;                    // 2.7
  int64_t runtime_interpreters_head = -1;      // 3.7+
  int64_t runtime_ceval_gil_locked = -1;       // 3.7 to 3.11
  int64_t runtime_ceval_gil_last_holder = -1;  // 3.7 to 3.11
  int64_t debug_offsets_size = -1;             // sizeof(_Py_DebugOffsets), 3.13+
  // 3.13+: where, in the version's _Py_DebugOffsets, each field the plugin
  // reads from it lies (bytes from its start; python_debug_offsets.h).
  int64_t debug_runtime_interpreters_head = -1;  // runtime_state.interpreters_head
  int64_t debug_interp_threads_head = -1;  // interpreter_state.threads_head
  int64_t debug_interp_ceval_gil = -1;  // interpreter_state.ceval_gil
  int64_t debug_interp_gil_runtime_state = -1;  // interpreter_state.gil_runtime_state
  int64_t debug_interp_gil_locked = -1;  // interpreter_state.gil_runtime_state_locked
  int64_t debug_interp_gil_holder = -1;  // interpreter_state.gil_runtime_state_holder
  int64_t debug_tstate_next = -1;  // thread_state.next
  int64_t debug_tstate_current_frame = -1;  // thread_state.current_frame
  int64_t debug_tstate_thread_id = -1;  // thread_state.thread_id
  int64_t debug_frame_previous = -1;  // interpreter_frame.previous
  int64_t debug_frame_executable = -1;  // interpreter_frame.executable
  int64_t debug_frame_instr_ptr = -1;  // interpreter_frame.instr_ptr
  int64_t debug_frame_owner = -1;  // interpreter_frame.owner
  int64_t debug_code_filename = -1;  // code_object.filename
  int64_t debug_code_name = -1;  // code_object.name
  int64_t debug_code_qualname = -1;  // code_object.qualname
  int64_t debug_code_linetable = -1;  // code_object.linetable
  int64_t debug_code_firstlineno = -1;  // code_object.firstlineno
  int64_t debug_code_adaptive = -1;  // code_object.co_code_adaptive
  int64_t debug_bytes_ob_size = -1;  // bytes_object.ob_size
  int64_t debug_bytes_ob_sval = -1;  // bytes_object.ob_sval
  int64_t debug_unicode_state = -1;  // unicode_object.state
  int64_t debug_unicode_length = -1;  // unicode_object.length
  int64_t debug_unicode_asciiobject_size = -1;  // unicode_object.asciiobject_size
};

// Everything known about one minor version: an entry of offsets/python.yaml.
// Entries are per minor version (patch -1): the BPF map has one slot per minor.
using PythonVersionOffsets = sdk::VersionOffsets<python_offsets, PythonReaderOffsets>;

// offsets/python.yaml's keys, named as the fields of the two structs, and
// its checks (one entry per minor version, whose version_hex is that
// version's). Loading throws omniprof::sdk::OffsetError naming the file, the
// version and the key (the plugin's create hook catches it).
extern const sdk::OffsetSchema<PythonVersionOffsets> kPythonOffsetSchema;

// Sets what offsets.bpf derives from the rest (python_offsets.h):
// code_names from the reader's co_filename and co_name, frame_header_bytes
// from the frame fields. Call it once the offsets are final (after
// _Py_DebugOffsets), before they go to the BPF map.
void set_derived_offsets(PythonVersionOffsets& offsets);
using PythonOffsetsTable = sdk::BoundOffsetTable<PythonVersionOffsets, kPythonOffsetSchema>;

}  // namespace omniprof::python
