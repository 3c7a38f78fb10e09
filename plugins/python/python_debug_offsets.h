// CPython's _Py_DebugOffsets (3.13+): the layout facts a process publishes at
// the start of _PyRuntime (Include/internal/pycore_runtime.h of 3.13,
// pycore_debug_offsets.h of 3.14+), so that an out-of-process reader need not
// trust a shipped table. The struct itself changes with each minor version:
// where each field the plugin reads lies in it is the YAML's debug_* keys of
// that version (checked against the headers like every other key).
#pragma once

#include <cstdint>
#include "omniprof/support/result.h"
#include <span>

#include "python_offsets_table.h"

namespace omniprof::python {

// Every version's struct starts with an 8-byte cookie ("xdebugpy"), then
// its PY_VERSION_HEX and whether it is free-threaded, as uint64_t.
inline constexpr std::size_t kPyDebugOffsetsVersionAt = 8;
inline constexpr std::size_t kPyDebugOffsetsFreeThreadedAt = 16;
// Bytes the plugin reads at most (3.15's struct is 888).
inline constexpr std::size_t kPyDebugOffsetsMaxSize = 4096;

// The fields of the struct the plugin uses, in its terms.
struct PyDebugOffsets {
  uint64_t version = 0;  // the process's PY_VERSION_HEX
  uint64_t free_threaded = 0;
  uint64_t runtime_interpreters_head = 0;
  uint64_t interp_threads_head = 0;
  uint64_t interp_ceval_gil = 0;
  uint64_t interp_gil_runtime_state = 0;  // offsetof(PyInterpreterState, _gil)
  uint64_t interp_gil_locked = 0;         // offsetof(PyInterpreterState, _gil.locked)
  uint64_t interp_gil_holder = 0;         // offsetof(PyInterpreterState, _gil.last_holder)
  uint64_t tstate_next = 0;
  uint64_t tstate_current_frame = 0;
  uint64_t tstate_thread_id = 0;
  uint64_t frame_previous = 0;
  uint64_t frame_executable = 0;
  uint64_t frame_instr_ptr = 0;
  uint64_t frame_owner = 0;
  uint64_t code_filename = 0;
  uint64_t code_name = 0;
  uint64_t code_qualname = 0;
  uint64_t code_linetable = 0;
  uint64_t code_firstlineno = 0;
  uint64_t code_adaptive = 0;
  uint64_t bytes_ob_size = 0;
  uint64_t bytes_ob_sval = 0;
  uint64_t unicode_state = 0;
  uint64_t unicode_length = 0;
  uint64_t unicode_asciiobject_size = 0;
};

// Parses the first layout.reader.debug_offsets_size bytes of _PyRuntime with
// `layout`'s debug_* positions (the shipped entry of the minor version the
// executable says it is). Errors: no debug offsets in that entry (before
// 3.13), a short image, a wrong cookie ("xdebugpy"), a version other than
// the layout's (the struct changes each minor version), a free-threaded
// build (other struct layouts), or offsets too large for the BPF map's u16
// fields.
Result<PyDebugOffsets> parse_py_debug_offsets(std::span<const uint8_t> image, const PythonVersionOffsets& layout);

// Overwrites in `offsets` every field the debug offsets give (the GIL's
// locked / last_holder as offsets inside struct _gil_runtime_state, like the
// YAML). The rest (sizeof PyCompactUnicodeObject, the state bits, models)
// stays as the YAML says. False if a value does not fit its field.
bool apply_py_debug_offsets(const PyDebugOffsets& debug, PythonVersionOffsets& offsets);

}  // namespace omniprof::python
