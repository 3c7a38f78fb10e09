#include "python_offsets_table.h"

#include <algorithm>

namespace omniprof::python {
namespace {

#define BPF_FIELD(name) OMNIPROF_OFFSET_FIELD(PythonVersionOffsets, bpf, name)
#define READER_FIELD(name) OMNIPROF_OFFSET_FIELD(PythonVersionOffsets, reader, name)

const sdk::OffsetField kFields[] = {
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
    BPF_FIELD(frame_owner_interpreter),
    BPF_FIELD(frame_code_tag_bits),
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
    READER_FIELD(debug_runtime_interpreters_head),
    READER_FIELD(debug_interp_threads_head),
    READER_FIELD(debug_interp_ceval_gil),
    READER_FIELD(debug_interp_gil_runtime_state),
    READER_FIELD(debug_interp_gil_locked),
    READER_FIELD(debug_interp_gil_holder),
    READER_FIELD(debug_tstate_next),
    READER_FIELD(debug_tstate_current_frame),
    READER_FIELD(debug_tstate_thread_id),
    READER_FIELD(debug_frame_previous),
    READER_FIELD(debug_frame_executable),
    READER_FIELD(debug_frame_instr_ptr),
    READER_FIELD(debug_frame_owner),
    READER_FIELD(debug_code_filename),
    READER_FIELD(debug_code_name),
    READER_FIELD(debug_code_qualname),
    READER_FIELD(debug_code_linetable),
    READER_FIELD(debug_code_firstlineno),
    READER_FIELD(debug_code_adaptive),
    READER_FIELD(debug_bytes_ob_size),
    READER_FIELD(debug_bytes_ob_sval),
    READER_FIELD(debug_unicode_state),
    READER_FIELD(debug_unicode_length),
    READER_FIELD(debug_unicode_asciiobject_size),
};

#undef BPF_FIELD
#undef READER_FIELD

// One entry per minor version, whose version_hex is that version's.
void check_entry(PythonVersionOffsets& offsets, const std::string& where) {
  if (offsets.patch >= 0) {
    throw sdk::OffsetError(where + ": expected a MAJOR.MINOR entry (one per minor version)");
  }
  uint32_t expected_hex = static_cast<uint32_t>(offsets.major) << 24 | static_cast<uint32_t>(offsets.minor) << 16;
  if (offsets.bpf.version_hex != expected_hex) {
    throw sdk::OffsetError(where + ": version_hex " + std::to_string(offsets.bpf.version_hex) + " is not " +
                           std::to_string(expected_hex));
  }
}

}  // namespace

void set_derived_offsets(PythonVersionOffsets& offsets) {
  const PythonReaderOffsets& r = offsets.reader;
  const bool adjacent = r.co_filename >= 0 && r.co_name == r.co_filename + 8 && r.co_filename < PYTHON_OFFSET_NONE;
  offsets.bpf.code_names = adjacent ? static_cast<uint16_t>(r.co_filename) : PYTHON_OFFSET_NONE;

  python_offsets& b = offsets.bpf;
  uint32_t header = 0;
  auto covers = [&](uint16_t offset, uint32_t size) {
    if (offset != PYTHON_OFFSET_NONE) header = std::max(header, offset + size);
  };
  covers(b.frame_back, 8);
  covers(b.frame_code, 8);
  covers(b.frame_lasti, b.frame_model == PYTHON_FRAME_OBJECT ? 4 : 8);  // an int, else a pointer
  covers(b.frame_owner, 1);
  covers(b.frame_is_entry, 1);
  b.frame_header_bytes = header <= PYPERF_FRAME_HEADER_MAX ? static_cast<uint16_t>(header) : 0;
}

const sdk::OffsetSchema<PythonVersionOffsets> kPythonOffsetSchema("python", kFields, PYTHON_OFFSET_NONE, check_entry);

}  // namespace omniprof::python
