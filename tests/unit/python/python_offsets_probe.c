/* Prints, for the CPython whose headers it is compiled against, every key of
 * plugins/python/offsets/python.yaml as "key value" (value -1 for a field the
 * version does not have). python_offsets_yaml_test compiles it once per pyenv
 * version with -DPy_BUILD_CORE and that version's include and internal
 * directories, then compares each line with the YAML. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#endif
#if PY_VERSION_HEX >= 0x03070000 && PY_VERSION_HEX < 0x03080000
#include <internal/pystate.h>
#elif PY_VERSION_HEX >= 0x03080000 && PY_VERSION_HEX < 0x03090000
#include <internal/pycore_pystate.h>
#elif PY_VERSION_HEX >= 0x03090000
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#endif
#if PY_VERSION_HEX >= 0x030C0000
#include <internal/pycore_gil.h>
#endif
#if PY_VERSION_HEX >= 0x030E0000
#include <internal/pycore_stackref.h>
#include <internal/pycore_debug_offsets.h>
#endif

#define NONE (-1L)
#define KEY(name, value) printf("%s %ld\n", name, (long)(value))

#if PY_MAJOR_VERSION >= 3
/* The state bitfield has no offsetof: set one member in a zeroed object and
 * find the bit that changed. */
static long state_bit(int which) {
  PyASCIIObject object;
  memset(&object, 0, sizeof object);
  switch (which) {
    case 0: object.state.kind = 1; break;
    case 1: object.state.compact = 1; break;
    default: object.state.ascii = 1; break;
  }
  unsigned char bytes[sizeof object.state];
  memcpy(bytes, (char*)&object + offsetof(PyASCIIObject, state), sizeof bytes);
  for (size_t i = 0; i < sizeof bytes * 8; ++i)
    if (bytes[i / 8] & (1u << (i % 8))) return (long)i;
  return -2;
}
#endif

int main(void) {
  /* struct python_offsets */
  KEY("version_hex", PY_VERSION_HEX & 0xffff0000);
#if PY_VERSION_HEX < 0x030B0000
  KEY("frame_model", 1);
#elif PY_VERSION_HEX < 0x030C0000
  KEY("frame_model", 2);
#else
  KEY("frame_model", 3);
#endif
/* 2.7 and 3.6: _PyThreadState_Current says who holds the GIL (3.6 creates
 * its GIL only once a second thread starts). */
#if PY_VERSION_HEX < 0x03070000
  KEY("gil_model", 1);
#elif PY_VERSION_HEX < 0x030C0000
  KEY("gil_model", 2);
#else
  KEY("gil_model", 3);
#endif

#if PY_VERSION_HEX < 0x030B0000
  KEY("interp_tstate_head", offsetof(PyInterpreterState, tstate_head));
#else
  KEY("interp_tstate_head", offsetof(PyInterpreterState, threads.head));
#endif
#if PY_VERSION_HEX < 0x030C0000
  KEY("interp_ceval_gil", NONE);
#else
  KEY("interp_ceval_gil", offsetof(PyInterpreterState, ceval.gil));
#endif

  KEY("tstate_next", offsetof(PyThreadState, next));
  KEY("tstate_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX < 0x030B0000
  KEY("tstate_frame", offsetof(PyThreadState, frame));
  KEY("cframe_current_frame", NONE);
#elif PY_VERSION_HEX < 0x030D0000
  KEY("tstate_frame", offsetof(PyThreadState, cframe));
  KEY("cframe_current_frame", offsetof(_PyCFrame, current_frame));
#else
  KEY("tstate_frame", offsetof(PyThreadState, current_frame));
  KEY("cframe_current_frame", NONE);
#endif

#if PY_VERSION_HEX < 0x030B0000
  KEY("frame_back", offsetof(PyFrameObject, f_back));
  KEY("frame_code", offsetof(PyFrameObject, f_code));
  KEY("frame_lasti", offsetof(PyFrameObject, f_lasti));
  KEY("frame_owner", NONE);
  KEY("frame_is_entry", NONE);
  KEY("frame_owner_interpreter", NONE);
  KEY("frame_code_tag_bits", 0);
  KEY("code_adaptive", NONE);
#else
  KEY("frame_back", offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX < 0x030D0000
  KEY("frame_code", offsetof(_PyInterpreterFrame, f_code));
  KEY("frame_lasti", offsetof(_PyInterpreterFrame, prev_instr));
#else
  KEY("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  KEY("frame_lasti", offsetof(_PyInterpreterFrame, instr_ptr));
#endif
  KEY("frame_owner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030C0000
  KEY("frame_is_entry", offsetof(_PyInterpreterFrame, is_entry));
#else
  KEY("frame_is_entry", NONE);
#endif
#if PY_VERSION_HEX < 0x030C0000
  KEY("frame_owner_interpreter", NONE);
#elif PY_VERSION_HEX < 0x030E0000
  KEY("frame_owner_interpreter", FRAME_OWNED_BY_CSTACK);
#else
  KEY("frame_owner_interpreter", FRAME_OWNED_BY_INTERPRETER);
#endif
#if PY_VERSION_HEX >= 0x030E0000
  KEY("frame_code_tag_bits", Py_TAG_BITS);
#else
  KEY("frame_code_tag_bits", 0);
#endif
  KEY("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif

#if PY_VERSION_HEX >= 0x030C0000
  KEY("gil_locked", offsetof(struct _gil_runtime_state, locked));
  KEY("gil_last_holder", offsetof(struct _gil_runtime_state, last_holder));
#else
  KEY("gil_locked", NONE);
  KEY("gil_last_holder", NONE);
#endif

  /* The reader's PyCodeObject fields */
  KEY("co_filename", offsetof(PyCodeObject, co_filename));
  KEY("co_name", offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030B0000
  KEY("co_qualname", offsetof(PyCodeObject, co_qualname));
#else
  KEY("co_qualname", NONE);
#endif
  KEY("co_firstlineno", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX < 0x030A0000
  KEY("co_lnotab", offsetof(PyCodeObject, co_lnotab));
  KEY("co_linetable", NONE);
#else
  KEY("co_lnotab", NONE);
  KEY("co_linetable", offsetof(PyCodeObject, co_linetable));
#endif
#if PY_VERSION_HEX < 0x030B0000
  KEY("co_code", offsetof(PyCodeObject, co_code));
#else
  KEY("co_code", NONE);
#endif

  /* Strings */
#if PY_MAJOR_VERSION == 2
  KEY("unicode_state", NONE);
  KEY("unicode_length", NONE);
  KEY("unicode_ascii_data", NONE);
  KEY("unicode_compact_data", NONE);
  KEY("unicode_kind_bit", NONE);
  KEY("unicode_compact_bit", NONE);
  KEY("unicode_ascii_bit", NONE);
  KEY("bytes_size", NONE);
  KEY("bytes_data", NONE);
  KEY("string_size", offsetof(PyStringObject, ob_size));
  KEY("string_data", offsetof(PyStringObject, ob_sval));
#else
  KEY("unicode_state", offsetof(PyASCIIObject, state));
  KEY("unicode_length", offsetof(PyASCIIObject, length));
  KEY("unicode_ascii_data", sizeof(PyASCIIObject));
  KEY("unicode_compact_data", sizeof(PyCompactUnicodeObject));
  KEY("unicode_kind_bit", state_bit(0));
  KEY("unicode_compact_bit", state_bit(1));
  KEY("unicode_ascii_bit", state_bit(2));
  KEY("bytes_size", offsetof(PyBytesObject, ob_base.ob_size));
  KEY("bytes_data", offsetof(PyBytesObject, ob_sval));
  KEY("string_size", NONE);
  KEY("string_data", NONE);
#endif

  /* Runtime entry points */
#if PY_VERSION_HEX >= 0x03070000
  KEY("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
#else
  KEY("runtime_interpreters_head", NONE);
#endif
#if PY_VERSION_HEX >= 0x03070000 && PY_VERSION_HEX < 0x030C0000
  KEY("runtime_ceval_gil_locked", offsetof(_PyRuntimeState, ceval.gil.locked));
  KEY("runtime_ceval_gil_last_holder", offsetof(_PyRuntimeState, ceval.gil.last_holder));
#else
  KEY("runtime_ceval_gil_locked", NONE);
  KEY("runtime_ceval_gil_last_holder", NONE);
#endif
#if PY_VERSION_HEX >= 0x030D0000
  KEY("debug_offsets_size", sizeof(_Py_DebugOffsets));
  KEY("debug_runtime_interpreters_head", offsetof(_Py_DebugOffsets, runtime_state.interpreters_head));
  KEY("debug_interp_threads_head", offsetof(_Py_DebugOffsets, interpreter_state.threads_head));
  KEY("debug_interp_ceval_gil", offsetof(_Py_DebugOffsets, interpreter_state.ceval_gil));
  KEY("debug_interp_gil_runtime_state", offsetof(_Py_DebugOffsets, interpreter_state.gil_runtime_state));
  KEY("debug_interp_gil_locked", offsetof(_Py_DebugOffsets, interpreter_state.gil_runtime_state_locked));
  KEY("debug_interp_gil_holder", offsetof(_Py_DebugOffsets, interpreter_state.gil_runtime_state_holder));
  KEY("debug_tstate_next", offsetof(_Py_DebugOffsets, thread_state.next));
  KEY("debug_tstate_current_frame", offsetof(_Py_DebugOffsets, thread_state.current_frame));
  KEY("debug_tstate_thread_id", offsetof(_Py_DebugOffsets, thread_state.thread_id));
  KEY("debug_frame_previous", offsetof(_Py_DebugOffsets, interpreter_frame.previous));
  KEY("debug_frame_executable", offsetof(_Py_DebugOffsets, interpreter_frame.executable));
  KEY("debug_frame_instr_ptr", offsetof(_Py_DebugOffsets, interpreter_frame.instr_ptr));
  KEY("debug_frame_owner", offsetof(_Py_DebugOffsets, interpreter_frame.owner));
  KEY("debug_code_filename", offsetof(_Py_DebugOffsets, code_object.filename));
  KEY("debug_code_name", offsetof(_Py_DebugOffsets, code_object.name));
  KEY("debug_code_qualname", offsetof(_Py_DebugOffsets, code_object.qualname));
  KEY("debug_code_linetable", offsetof(_Py_DebugOffsets, code_object.linetable));
  KEY("debug_code_firstlineno", offsetof(_Py_DebugOffsets, code_object.firstlineno));
  KEY("debug_code_adaptive", offsetof(_Py_DebugOffsets, code_object.co_code_adaptive));
  KEY("debug_bytes_ob_size", offsetof(_Py_DebugOffsets, bytes_object.ob_size));
  KEY("debug_bytes_ob_sval", offsetof(_Py_DebugOffsets, bytes_object.ob_sval));
  KEY("debug_unicode_state", offsetof(_Py_DebugOffsets, unicode_object.state));
  KEY("debug_unicode_length", offsetof(_Py_DebugOffsets, unicode_object.length));
  KEY("debug_unicode_asciiobject_size", offsetof(_Py_DebugOffsets, unicode_object.asciiobject_size));
#else
  KEY("debug_offsets_size", NONE);
  KEY("debug_runtime_interpreters_head", NONE);
  KEY("debug_interp_threads_head", NONE);
  KEY("debug_interp_ceval_gil", NONE);
  KEY("debug_interp_gil_runtime_state", NONE);
  KEY("debug_interp_gil_locked", NONE);
  KEY("debug_interp_gil_holder", NONE);
  KEY("debug_tstate_next", NONE);
  KEY("debug_tstate_current_frame", NONE);
  KEY("debug_tstate_thread_id", NONE);
  KEY("debug_frame_previous", NONE);
  KEY("debug_frame_executable", NONE);
  KEY("debug_frame_instr_ptr", NONE);
  KEY("debug_frame_owner", NONE);
  KEY("debug_code_filename", NONE);
  KEY("debug_code_name", NONE);
  KEY("debug_code_qualname", NONE);
  KEY("debug_code_linetable", NONE);
  KEY("debug_code_firstlineno", NONE);
  KEY("debug_code_adaptive", NONE);
  KEY("debug_bytes_ob_size", NONE);
  KEY("debug_bytes_ob_sval", NONE);
  KEY("debug_unicode_state", NONE);
  KEY("debug_unicode_length", NONE);
  KEY("debug_unicode_asciiobject_size", NONE);
#endif
  return 0;
}
