// SPDX-License-Identifier: GPL-2.0
/* pyperf: walks the sampled thread's CPython frames and gives each marked
 * native frame (one running _PyEval_EvalFrameDefault / PyEval_EvalFrameEx)
 * the Python frames it ran (see omniprof_unwind_state in abi.h).
 *
 * The thread's own PyThreadState is found from its thread pointer (the fs
 * base, through BTF): CPython records pthread_self() in each thread state's
 * thread_id, and on x86-64 glibc pthread_self() is the fs base. So every
 * thread is walked, not only the one holding the GIL; the GIL's state says
 * whether it held it, which labels the sample.
 *
 * A Python frame is stored as (code object address, instruction offset);
 * the plugin's user space names it from the code object (python_code_reader).
 * Frame layouts differ per version (python_offsets.h); one program serves
 * them all, driven by the offsets of the process's version.
 *
 * The walk's position lives in state->interpreter_walk, in map memory, not
 * in registers: that keeps the verifier's states at the loop head identical
 * whichever path an iteration took, so it prunes them instead of walking
 * every combination. */
#include "omniprof/bpf/unwinder.bpf.h"
#include "python_offsets.h"
#include "pyperf.h"

char LICENSE[] SEC("license") = "GPL";

/* Written by the plugin from its YAML (or the process's _Py_DebugOffsets). */
OMNIPROF_VERSION_OFFSETS_MAP(python_offsets, struct python_offsets, PYTHON_MAX_VERSIONS, offsets_of, PYPERF_DATA_VERSION)

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, PYPERF_THREAD_STATE_ENTRIES);
  __type(key, __u64);
  __type(value, __u64);
} python_thread_states SEC(".maps");

/* Each CPU's copy of the frame being read (read_frame_header). */
struct pyperf_frame_header {
  __u8 bytes[PYPERF_FRAME_HEADER_MAX];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct pyperf_frame_header);
} python_frame_header SEC(".maps");

/* The code objects the walks met, for the plugin's tick to name. */
OMNIPROF_SEEN_MAP(python_code_seen, struct pyperf_code_key, __u8, PYPERF_CODE_SEEN_ENTRIES);

/* interpreter_walk slots. */
enum walk_slot {
  WALK_FRAME = 0,   /* next Python frame to read; 0 = none left */
  WALK_MARK = 1,    /* the mark the next frame belongs to */
  WALK_STARTED = 2, /* 1 once the thread state is found (later runs go on) */
};

/* Python frames per run of python_unwind (kernels without bpf_loop); it
 * tail-calls itself for the next ones while the budget lasts. The native
 * walk leaves it OMNIPROF_INTERPRETER_TAIL_CALLS (6), of which STOP keeps
 * one: 5 runs of 32 frames reach a 100-deep recursion's <module> (16 a run
 * stopped at 80 frames on 5.10). */
#define FRAMES_PER_PROGRAM 32
/* Python frames per run of python_unwind_loop. */
#define FRAMES_PER_LOOP_PROGRAM OMNIPROF_MAX_STACK_DEPTH

enum step { STEP_CONTINUE = 0, STEP_DONE = 1 };

/* The sampled thread's PyThreadState, or 0 (a thread Python does not know:
 * a C thread, one not yet or no longer registered). */
static __always_inline __u64 find_thread_state(struct omniprof_unwind_state *state,
                                               const struct omniprof_process_info *process,
                                               const struct python_offsets *o) {
  __u64 thread_pointer = omniprof_thread_pointer();
  __u64 key = ((__u64)state->key.pid << 32) | state->key.tid;
  __u64 id = 0;
  __u64 *cached = bpf_map_lookup_elem(&python_thread_states, &key);
  if (cached) {
    __u64 tstate = *cached;
    /* Still this thread's (a thread state is freed when its thread ends,
     * and the tid may be reused). */
    if (omniprof_read_user_u64(tstate + o->tstate_thread_id, &id) == 0 && id == thread_pointer) return tstate;
  }
  __u64 interp = 0, tstate = 0;
  if (omniprof_read_user_u64(process->interpreter_data[PYPERF_DATA_INTERP_HEAD], &interp) != 0 || interp == 0) return 0;
  if (omniprof_read_user_u64(interp + o->interp_tstate_head, &tstate) != 0) return 0;
  for (int i = 0; i < PYPERF_MAX_THREADS; i++) {
    if (tstate == 0) break;
    if (omniprof_read_user_u64(tstate + o->tstate_thread_id, &id) != 0) break;
    if (id == thread_pointer) {
      bpf_map_update_elem(&python_thread_states, &key, &tstate, BPF_ANY);
      return tstate;
    }
    if (omniprof_read_user_u64(tstate + o->tstate_next, &tstate) != 0) break;
  }
  return 0;
}

/* Whether `tstate` holds the GIL now (python_gil_model). */
static __always_inline bool holds_gil(const struct omniprof_process_info *process, const struct python_offsets *o,
                                      __u64 tstate) {
  __u64 holder = 0;
  int locked = 0;
  switch (o->gil_model) {
    case PYTHON_GIL_CURRENT_TSTATE:
      if (omniprof_read_user_u64(process->interpreter_data[PYPERF_DATA_GIL_A], &holder) != 0) return false;
      return holder == tstate;
    case PYTHON_GIL_STATIC:
      if (bpf_probe_read_user(&locked, sizeof(locked), (const void *)process->interpreter_data[PYPERF_DATA_GIL_A]) != 0)
        return false;
      if (omniprof_read_user_u64(process->interpreter_data[PYPERF_DATA_GIL_B], &holder) != 0) return false;
      return locked != 0 && holder == tstate;
    case PYTHON_GIL_PER_INTERPRETER: {
      __u64 interp = 0, gil = 0;
      if (omniprof_read_user_u64(process->interpreter_data[PYPERF_DATA_INTERP_HEAD], &interp) != 0) return false;
      if (omniprof_read_user_u64(interp + o->interp_ceval_gil, &gil) != 0 || gil == 0) return false;
      if (bpf_probe_read_user(&locked, sizeof(locked), (const void *)(gil + o->gil_locked)) != 0) return false;
      if (omniprof_read_user_u64(gil + o->gil_last_holder, &holder) != 0) return false;
      return locked != 0 && holder == tstate;
    }
    default:
      return false;
  }
}

/* Finds the thread's innermost frame and labels the sample. STEP_DONE: no
 * Python stack on this thread. */
static __always_inline int start_walk(struct omniprof_unwind_state *state, const struct omniprof_process_info *process,
                                      const struct python_offsets *o) {
  omniprof_count(PYPERF_STAT_SAMPLES);
  __u64 tstate = find_thread_state(state, process, o);
  if (tstate == 0) {
    omniprof_count(PYPERF_STAT_NO_THREAD_STATE);
    return STEP_DONE;
  }
  __u64 frame = 0;
  if (omniprof_read_user_u64(tstate + o->tstate_frame, &frame) != 0) {
    omniprof_count(PYPERF_STAT_READ_FAILED);
    return STEP_DONE;
  }
  /* 3.11, 3.12: the thread state points at a _PyCFrame, which points at
   * the current frame. */
  if (o->cframe_current_frame != PYTHON_OFFSET_NONE && frame != 0) {
    if (omniprof_read_user_u64(frame + o->cframe_current_frame, &frame) != 0) {
      omniprof_count(PYPERF_STAT_READ_FAILED);
      return STEP_DONE;
    }
  }
  if (holds_gil(process, o, tstate)) {
    omniprof_count(PYPERF_STAT_GIL_HELD);
    omniprof_label_sample(state, OMNIPROF_SLOT_PYTHON, PYPERF_GIL_HELD);
  } else {
    omniprof_count(PYPERF_STAT_GIL_RELEASED);
    omniprof_label_sample(state, OMNIPROF_SLOT_PYTHON, PYPERF_GIL_RELEASED);
  }
  state->interpreter_walk[WALK_FRAME] = frame;
  state->interpreter_walk[WALK_MARK] = 0;
  state->interpreter_walk[WALK_STARTED] = 1;
  return STEP_CONTINUE;
}

static __always_inline void note_code_seen(__u32 pid, __u64 code) {
  struct pyperf_code_key key = {.pid = pid, .reserved = 0, .code = code};
  if (bpf_map_lookup_elem(&python_code_seen, &key)) return;
  __u8 one = 1;
  omniprof_note_seen(&python_code_seen, &python_code_seen_fresh, &key, &one, PYPERF_STAT_CODE_SEEN_FULL);
}

/* The frame's fields in one read of its first frame_header_bytes (a helper
 * call costs more than the bytes it copies: one read, not four), or NULL
 * where the layout or the read does not allow it: each field is then read
 * on its own (frame_field). */
static __always_inline const struct pyperf_frame_header *read_frame_header(__u64 frame,
                                                                         const struct python_offsets *o) {
  __u32 size = o->frame_header_bytes;
  if (size == 0 || size > PYPERF_FRAME_HEADER_MAX) return NULL;
  __u32 zero = 0;
  struct pyperf_frame_header *header = bpf_map_lookup_elem(&python_frame_header, &zero);
  if (!header || bpf_probe_read_user(header->bytes, size, (const void *)frame) != 0) return NULL;
  return header;
}

/* `size` (1, 4 or 8) bytes of the frame at `offset`: from its header when
 * read (every field lies within frame_header_bytes), else from the process. */
static __always_inline long frame_field(const struct pyperf_frame_header *header, __u64 frame, __u16 offset,
                                        void *out, __u32 size) {
  if (header && offset <= PYPERF_FRAME_HEADER_MAX - 8) {
    const __u8 *at = &header->bytes[offset];
    if (size == 8) {
      *(__u64 *)out = *(const __u64 *)at;
    } else if (size == 4) {
      *(__u32 *)out = *(const __u32 *)at;
    } else {
      *(__u8 *)out = *at;
    }
    return 0;
  }
  return bpf_probe_read_user(out, size, (const void *)(frame + offset));
}

/* One Python frame: push it for its mark and move to its caller. */
static __always_inline int walk_one_frame(struct omniprof_unwind_state *state, const struct python_offsets *o) {
  __u64 frame = state->interpreter_walk[WALK_FRAME];
  if (frame == 0) return STEP_DONE;
  __u64 code = 0, back = 0;
  __u32 mark = (__u32)state->interpreter_walk[WALK_MARK];
  const struct pyperf_frame_header *header = read_frame_header(frame, o);
  if (frame_field(header, frame, o->frame_code, &code, 8) != 0 || frame_field(header, frame, o->frame_back, &back, 8) != 0) {
    /* A frame is there but cannot be read: it stays in the stack as a frame
     * the reader cannot name ("[unknown python]"), and the walk ends. */
    omniprof_count(PYPERF_STAT_READ_FAILED);
    omniprof_interpreter_frame(state, mark, 0, 0, OMNIPROF_FRAME_PYTHON);
    state->interpreter_walk[WALK_FRAME] = 0;
    return STEP_DONE;
  }
  code &= ~(__u64)o->frame_code_tag_bits;
  __u32 detail = 0;
  bool last_of_call = false;
  if (o->frame_model == PYTHON_FRAME_OBJECT) {
    /* One PyFrameObject per evaluation loop call. f_lasti is -1 before the
     * first instruction; stored as is, the reader takes it as "the first
     * line". */
    int lasti = 0;
    frame_field(header, frame, o->frame_lasti, &lasti, sizeof(lasti));
    detail = (__u32)lasti;
    last_of_call = true;
  } else {
    __u8 owner = 0;
    if (o->frame_owner != PYTHON_OFFSET_NONE) {
      frame_field(header, frame, o->frame_owner, &owner, sizeof(owner));
    }
    if (o->frame_model == PYTHON_INTERPRETER_FRAME_312 && owner >= o->frame_owner_interpreter) {
      /* The shim an evaluation loop call pushes below the frames it runs:
       * the next frames belong to the next (outer) marked native frame. */
      state->interpreter_walk[WALK_MARK] = mark + 1;
      state->interpreter_walk[WALK_FRAME] = back;
      return STEP_CONTINUE;
    }
    __u64 instruction = 0;
    frame_field(header, frame, o->frame_lasti, &instruction, sizeof(instruction));
    __u64 first = code + o->code_adaptive;
    if (instruction >= first && instruction - first < 0xffffffffULL) detail = (__u32)(instruction - first);
    if (o->frame_model == PYTHON_INTERPRETER_FRAME_311 && o->frame_is_entry != PYTHON_OFFSET_NONE) {
      __u8 is_entry = 0;
      frame_field(header, frame, o->frame_is_entry, &is_entry, sizeof(is_entry));
      last_of_call = is_entry != 0;
    }
  }
  /* A frame without a code object is pushed too (named "[unknown python]"). */
  __u64 tagged = code;
  if (code != 0 && code <= PYPERF_CODE_ADDRESS_MASK && o->code_names != PYTHON_OFFSET_NONE) {
    __u64 names[2] = {0, 0}; /* co_filename, co_name */
    if (bpf_probe_read_user(names, sizeof(names), (const void *)(code + o->code_names)) == 0) {
      tagged |= pyperf_code_tag(names[0], names[1]) << PYPERF_CODE_TAG_SHIFT;
    }
  }
  if (omniprof_interpreter_frame(state, mark, tagged, detail, OMNIPROF_FRAME_PYTHON) != 0) return STEP_DONE;
  omniprof_count(PYPERF_STAT_FRAMES);
  if (code != 0) note_code_seen(state->key.pid, tagged);
  if (last_of_call) state->interpreter_walk[WALK_MARK] = mark + 1;
  state->interpreter_walk[WALK_FRAME] = back;
  return STEP_CONTINUE;
}

/* A layout the walk can use (an all-zero entry: no layout stored for this version). */
static __always_inline bool offsets_usable(const struct python_offsets *o) { return o->version_hex != 0; }

/* Shared by both programs: the process's offsets, and the walk's start on
 * the first run. NULL: nothing (more) to walk, the caller stops. */
OMNIPROF_INTERPRETER_PREPARE(prepare, struct python_offsets, offsets_of, offsets_usable, PYPERF_STAT_NO_OFFSETS, WALK_STARTED, start_walk)

/* Frames are left to walk. */
static __always_inline bool frames_left(const struct omniprof_unwind_state *state) {
  return state->interpreter_walk[WALK_FRAME] != 0;
}

/* python_unwind (tail calls, before 5.17) and python_unwind_loop (bpf_loop). */
OMNIPROF_INTERPRETER_PROGRAMS(python_unwind, OMNIPROF_SLOT_PYTHON, struct python_offsets, prepare, walk_one_frame,
                              frames_left, FRAMES_PER_PROGRAM, FRAMES_PER_LOOP_PROGRAM, PYPERF_STAT_TRUNCATED)
