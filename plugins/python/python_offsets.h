/* The CPython layout facts pyperf's BPF program needs, shared by the BPF
 * object (plugins/python/pyperf.bpf.c) and the plugin's user space, which
 * fills one entry per supported minor version in the private map
 * python_offsets from the shipped YAML (offsets/python.yaml) or, on 3.13+,
 * from the process's own _Py_DebugOffsets.
 *
 * Offsets are bytes from the start of the named struct. PYTHON_OFFSET_NONE
 * marks a field the version does not have (the YAML writes it as -1).
 */
#ifndef OMNIPROF_PYTHON_OFFSETS_H
#define OMNIPROF_PYTHON_OFFSETS_H

#include "omniprof/bpf/abi.h"

#define PYTHON_OFFSET_NONE 0xffff
/* Entries of the python_offsets map: one per supported minor version. */
#define PYTHON_MAX_VERSIONS 16

/* How a version keeps its frames. */
enum python_frame_model {
  /* 2.7 to 3.10: a PyFrameObject per call, one per evaluation loop call
   * (PyEval_EvalFrameEx / _PyEval_EvalFrameDefault); f_lasti is the
   * instruction's byte offset (up to 3.9) or code-unit index (3.10). */
  PYTHON_FRAME_OBJECT = 1,
  /* 3.11: _PyInterpreterFrame chained by `previous`; one evaluation loop call
   * runs frames up to and including the one with is_entry set. */
  PYTHON_INTERPRETER_FRAME_311 = 2,
  /* 3.12+: as 3.11, but each evaluation loop call pushes a shim frame owned
   * by the interpreter (owner >= frame_owner_interpreter) below the frames
   * it runs: that frame is the boundary, never shown. */
  PYTHON_INTERPRETER_FRAME_312 = 3,
};

/* How the plugin tells, at sample time, whether the sampled thread holds the GIL. */
enum python_gil_model {
  /* 2.7, 3.6: _PyThreadState_Current is the thread state that holds the
   * GIL, NULL while it is released (3.6 creates its GIL only when a second
   * thread starts, so the GIL's own fields say nothing before that). */
  PYTHON_GIL_CURRENT_TSTATE = 1,
  /* 3.7 to 3.11: the GIL's `locked` and `last_holder` sit at fixed
   * addresses inside _PyRuntime.ceval.gil: held by T iff locked != 0 and
   * last_holder == T. */
  PYTHON_GIL_STATIC = 2,
  /* 3.12+: each interpreter points at its GIL (interp + interp_ceval_gil);
   * locked and last_holder are at gil_locked / gil_last_holder inside it. */
  PYTHON_GIL_PER_INTERPRETER = 3,
};

struct python_offsets {
  omniprof_u32 version_hex; /* major << 24 | minor << 16, as PY_VERSION_HEX */
  omniprof_u8 frame_model;  /* enum python_frame_model */
  omniprof_u8 gil_model;    /* enum python_gil_model */
  /* PyCodeObject.co_filename when co_name follows it (every version so
   * far), else NONE: the walk reads both pointers in one read and tags the
   * frame's code address with them (pyperf_code_tag). Not a YAML key: the
   * plugin derives it from the reader's co_filename and co_name
   * (set_derived_offsets). */
  omniprof_u16 code_names;

  /* PyInterpreterState */
  omniprof_u16 interp_tstate_head; /* tstate_head (up to 3.10), threads.head (3.11+) */
  omniprof_u16 interp_ceval_gil;   /* ceval.gil (3.12+: a pointer), else NONE */

  /* PyThreadState */
  omniprof_u16 tstate_next;
  omniprof_u16 tstate_thread_id;   /* pthread_self() of the thread: its fs base on x86-64 glibc */
  omniprof_u16 tstate_frame;       /* frame (up to 3.10), cframe (3.11, 3.12), current_frame (3.13+) */
  omniprof_u16 cframe_current_frame; /* _PyCFrame.current_frame (3.11, 3.12), else NONE */

  /* PyFrameObject (up to 3.10) or _PyInterpreterFrame (3.11+) */
  omniprof_u16 frame_back;     /* f_back / previous */
  omniprof_u16 frame_code;     /* f_code / f_code (3.11, 3.12) / f_executable (3.13+) */
  omniprof_u16 frame_lasti;    /* f_lasti (int, up to 3.10) / prev_instr (3.11, 3.12) / instr_ptr (3.13+) */
  omniprof_u16 frame_owner;    /* owner (char, 3.12+; 3.11 has it too), else NONE */
  omniprof_u16 frame_is_entry; /* is_entry (bool, 3.11 only), else NONE */
  /* The lowest owner value of a frame that is the interpreter's, not a
   * Python function's, and ends an evaluation loop call's frames: 3.12 and
   * 3.13 FRAME_OWNED_BY_CSTACK (3, the shim), 3.14 and 3.15
   * FRAME_OWNED_BY_INTERPRETER (3; 3.14's CSTACK is 4), as CPython's own
   * _PyFrame_IsIncomplete tells them; NONE before 3.12. */
  omniprof_u16 frame_owner_interpreter;
  /* 3.14+: f_executable is a _PyStackRef, its low bits (Py_TAG_BITS) tags
   * to clear for the code object's address; 0 before. */
  omniprof_u16 frame_code_tag_bits;

  /* PyCodeObject */
  omniprof_u16 code_adaptive;  /* co_code_adaptive (3.11+: the instructions), else NONE */

  /* The GIL's state (gil_model PYTHON_GIL_PER_INTERPRETER: inside the GIL
   * struct; PYTHON_GIL_STATIC: unused, the plugin passes the addresses). */
  omniprof_u16 gil_locked;
  omniprof_u16 gil_last_holder;

  /* Bytes from a frame's start that hold every frame field above
   * (frame_back, frame_code, frame_lasti, frame_owner, frame_is_entry): the
   * walk reads them in one read, not one read each; 0 when they lie past
   * PYPERF_FRAME_HEADER_MAX (each is then read on its own). Not a YAML key:
   * derived by the plugin (set_derived_offsets). */
  omniprof_u16 frame_header_bytes;
};

/* The most of a frame's start the walk reads at once (frame_header_bytes). */
#define PYPERF_FRAME_HEADER_MAX 128

#endif /* OMNIPROF_PYTHON_OFFSETS_H */
