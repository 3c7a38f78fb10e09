// SPDX-License-Identifier: GPL-2.0
/* rbperf: walks the sampled thread's CRuby control frames and gives each
 * marked native frame (one running rb_vm_exec) the Ruby frames it ran (see
 * omniprof_unwind_state in abi.h).
 *
 * The thread's own execution context comes from its thread pointer (the fs
 * base, through BTF): from 3.0.4 CRuby keeps it in the thread-local
 * `ruby_current_ec`, so every thread is walked, not only the one holding
 * the GVL (ruby_offsets.h: enum ruby_ec_model says how each version is
 * reached). Control frames grow down from the top of the EC's VM stack:
 * from ec->cfp (the innermost) up to vm_stack + vm_stack_size.
 *
 * One rb_vm_exec call runs control frames down to (and including) the
 * first one flagged VM_FRAME_FLAG_FINISH, the frame C pushed before it
 * entered the VM: the frames after it belong to the next (outer) mark. A C
 * function called from Ruby (Integer#times) has a control frame of its own
 * (VM_FRAME_MAGIC_CFUNC) in the run of the rb_vm_exec that called it; the
 * Ruby code it yields to runs in a new rb_vm_exec above its native frames.
 *
 * A frame is stored as rbperf.h says (iseq + pc index, or a C function's
 * method entry); the plugin's user space names it (ruby_frame_reader).
 *
 * The walk's position lives in state->interpreter_walk, in map memory, not
 * in registers: that keeps the verifier's states at the loop head identical
 * whichever path an iteration took, so it prunes them. */
#include "omniprof/bpf/unwinder.bpf.h"
#include "rbperf.h"
#include "ruby_offsets.h"

char LICENSE[] SEC("license") = "GPL";

/* Written by the plugin from offsets/ruby.yaml. */
OMNIPROF_VERSION_OFFSETS_MAP(ruby_offsets, struct ruby_offsets, RUBY_MAX_VERSIONS, offsets_of, RBPERF_DATA_VERSION)

/* The frames the walks met (value: the method entry), for the plugin's tick
 * to name. */
OMNIPROF_SEEN_MAP(ruby_frames_seen, struct rbperf_frame_key, __u64, RBPERF_FRAMES_SEEN_ENTRIES);

/* interpreter_walk slots. */
enum walk_slot {
  WALK_CFP = 0,     /* next control frame to read; 0 = none left */
  WALK_END = 1,     /* the end of the control frames (the VM stack's top) */
  WALK_MARK = 2,    /* the mark the next frame belongs to */
  WALK_STARTED = 3, /* 1 once the EC is found (later runs go on) */
};

/* Control frames per run of ruby_unwind (kernels without bpf_loop); it
 * tail-calls itself for the next ones while the budget lasts. */
#define FRAMES_PER_PROGRAM 16
/* Control frames per run of ruby_unwind_loop: every frame of a full stack,
 * plus the C-pushed frames that are not shown. */
#define FRAMES_PER_LOOP_PROGRAM (2 * OMNIPROF_MAX_STACK_DEPTH)

/* glibc x86-64: tcbhead_t.dtv sits after the tcb pointer at the thread
 * pointer; each dtv_t is {void *val; void *to_free} and module ids start at
 * 1 (dtv[0] is the generation). TLS_DTV_UNALLOCATED is (void *)-1. */
#define GLIBC_TCB_DTV 8
#define GLIBC_DTV_ENTRY_SIZE 16
#define GLIBC_DTV_UNALLOCATED (~0ULL)
/* A module id past this is not one the DTV of a sane process holds. */
#define MAX_TLS_MODULE_ID 4096

enum step { STEP_CONTINUE = 0, STEP_DONE = 1 };

/* The global EC models give the EC of the thread that holds the GVL: the
 * sampled thread's only if that EC's thread is this one (its thread_id is
 * pthread_self(), the fs base). Another thread's is not walked (counted):
 * its frames would be shown under this thread. */
static __always_inline bool gvl_holder_is_this_thread(const struct ruby_offsets *o, __u64 ec) {
  __u64 thread = 0, id = 0;
  if (ec == 0 || o->ec_thread_ptr == RUBY_OFFSET_NONE || o->thread_native_id == RUBY_OFFSET_NONE) return false;
  if (omniprof_read_user_u64(ec + o->ec_thread_ptr, &thread) != 0 || thread == 0) return false;
  if (omniprof_read_user_u64(thread + o->thread_native_id, &id) != 0) return false;
  if (id == omniprof_thread_pointer()) return true;
  omniprof_count(RBPERF_STAT_EC_OF_ANOTHER_THREAD);
  return false;
}

/* The sampled thread's rb_execution_context_t, or 0 (a thread that never
 * ran Ruby: its TLS slot is empty or its DTV entry unallocated). */
static __always_inline __u64 find_ec(const struct omniprof_process_info *process, const struct ruby_offsets *o) {
  __u64 a = process->interpreter_data[RBPERF_DATA_EC_A];
  __u64 b = process->interpreter_data[RBPERF_DATA_EC_B];
  __u64 ec = 0, base = 0;
  switch (process->interpreter_data[RBPERF_DATA_EC_MODEL]) {
    case RUBY_EC_TLS_DTV: {
      __u64 tp = omniprof_thread_pointer(), dtv = 0;
      if (tp == 0 || a == 0 || a > MAX_TLS_MODULE_ID) return 0;
      if (omniprof_read_user_u64(tp + GLIBC_TCB_DTV, &dtv) != 0 || dtv == 0) return 0;
      if (omniprof_read_user_u64(dtv + a * GLIBC_DTV_ENTRY_SIZE, &base) != 0) return 0;
      if (base == 0 || base == GLIBC_DTV_UNALLOCATED) return 0;
      if (omniprof_read_user_u64(base + b, &ec) != 0) return 0;
      return ec;
    }
    case RUBY_EC_TLS_TP_OFFSET: {
      __u64 tp = omniprof_thread_pointer();
      if (tp == 0 || omniprof_read_user_u64(tp + a, &ec) != 0) return 0;
      return ec;
    }
    case RUBY_EC_GLOBAL_POINTER:
      if (omniprof_read_user_u64(a, &ec) != 0) return 0;
      return gvl_holder_is_this_thread(o, ec) ? ec : 0;
    case RUBY_EC_MAIN_RACTOR:
      if (o->ractor_running_ec == RUBY_OFFSET_NONE) return 0;
      if (omniprof_read_user_u64(a, &base) != 0 || base == 0) return 0;
      if (omniprof_read_user_u64(base + o->ractor_running_ec, &ec) != 0) return 0;
      return gvl_holder_is_this_thread(o, ec) ? ec : 0;
    default:
      return 0;
  }
}

/* Finds the thread's innermost control frame. STEP_DONE: no Ruby stack. */
static __always_inline int start_walk(struct omniprof_unwind_state *state, const struct omniprof_process_info *process,
                                      const struct ruby_offsets *o) {
  omniprof_count(RBPERF_STAT_SAMPLES);
  __u64 ec = find_ec(process, o);
  if (ec == 0) {
    omniprof_count(RBPERF_STAT_NO_EC);
    return STEP_DONE;
  }
  __u64 vm_stack = 0, vm_stack_size = 0, cfp = 0;
  if (omniprof_read_user_u64(ec + o->ec_vm_stack, &vm_stack) != 0 || omniprof_read_user_u64(ec + o->ec_vm_stack_size, &vm_stack_size) != 0 ||
      omniprof_read_user_u64(ec + o->ec_cfp, &cfp) != 0) {
    omniprof_count(RBPERF_STAT_READ_FAILED);
    return STEP_DONE;
  }
  /* RUBY_VM_END_CONTROL_FRAME: the control frames end where the VM stack
   * does. The last one is the thread's dummy top frame (the main thread's
   * carries a "<dummy toplevel>" iseq), which CRuby's backtraces skip too
   * (backtrace_each: end_cfp = RUBY_VM_NEXT_CONTROL_FRAME(end_cfp)). A size
   * past 1 GiB of VALUEs is not a stack. */
  if (vm_stack == 0 || vm_stack_size > (1ULL << 27) || cfp == 0) {
    omniprof_count(RBPERF_STAT_NO_EC);
    return STEP_DONE;
  }
  state->interpreter_walk[WALK_CFP] = cfp;
  state->interpreter_walk[WALK_END] = vm_stack + vm_stack_size * 8 - o->control_frame_size;
  state->interpreter_walk[WALK_MARK] = 0;
  state->interpreter_walk[WALK_STARTED] = 1;
  return STEP_CONTINUE;
}

/* The method entry (or cref: the reader tells them apart) that the local
 * environment of `ep` holds: a block's env chains to its method's through
 * ep[-1] until the one flagged VM_ENV_FLAG_LOCAL. 0 if not reached within a
 * few levels (blocks nest that deep only in odd code: the frame keeps its
 * label without the class). */
#define MAX_ENV_LEVELS 6
static __always_inline __u64 local_method_entry(__u64 ep, __u64 flags) {
  for (int i = 0; i < MAX_ENV_LEVELS; i++) {
    if (flags & RUBY_VM_ENV_FLAG_LOCAL) {
      __u64 me = 0;
      if (omniprof_read_user_u64(ep + RUBY_VM_ENV_INDEX_ME_CREF * 8, &me) != 0) return 0;
      return me;
    }
    __u64 prev = 0;
    if (omniprof_read_user_u64(ep + RUBY_VM_ENV_INDEX_SPECVAL * 8, &prev) != 0) return 0;
    ep = prev & ~0x03ULL;
    if (ep == 0 || omniprof_read_user_u64(ep, &flags) != 0) return 0;
  }
  return 0;
}

/* Notes (pid, address) for the plugin's tick, once: with `ep`, the method
 * entry of its local environment (an iseq frame), or itself (a C function
 * frame, ep 0). The entry is read only when the frame is new to the map: a
 * hot stack costs one lookup per frame. */
static __always_inline void note_frame_seen(__u32 pid, __u64 address, __u64 ep, __u64 flags) {
  struct rbperf_frame_key key = {.pid = pid, .reserved = 0, .address = address};
  if (bpf_map_lookup_elem(&ruby_frames_seen, &key)) return;
  __u64 method_entry = ep ? local_method_entry(ep, flags) : address;
  omniprof_note_seen(&ruby_frames_seen, &ruby_frames_seen_fresh, &key, &method_entry, RBPERF_STAT_FRAMES_SEEN_FULL);
}

/* The fields of rb_control_frame_t the walk reads are within its first
 * CFP_READ_BYTES (pc, iseq, ep: 0, 16, 32 on every supported version):
 * one read per frame, picked by the version's offsets (8-byte aligned). */
#define CFP_READ_BYTES 48
#define CFP_READ_WORDS (CFP_READ_BYTES / 8)

static __always_inline __u64 cfp_word(const __u64 *words, __u16 offset) {
  /* Constant indexes: a stack access at a variable offset is refused by
   * kernels before 5.12. The plugin refuses offsets past the bytes read. */
  switch (offset) {
    case 0: return words[0];
    case 8: return words[1];
    case 16: return words[2];
    case 24: return words[3];
    case 32: return words[4];
    case 40: return words[5];
    default: return 0;
  }
}

/* One control frame: push it (if it is one Ruby shows) for its mark and
 * move to its caller. */
static __always_inline int walk_one_frame(struct omniprof_unwind_state *state, const struct ruby_offsets *o) {
  __u64 cfp = state->interpreter_walk[WALK_CFP];
  if (cfp == 0 || cfp >= state->interpreter_walk[WALK_END]) return STEP_DONE;
  __u32 mark = (__u32)state->interpreter_walk[WALK_MARK];
  __u64 words[CFP_READ_WORDS] = {};
  __u64 flags = 0;
  if (bpf_probe_read_user(words, sizeof(words), (const void *)cfp) != 0 ||
      omniprof_read_user_u64(cfp_word(words, o->cfp_ep), &flags) != 0) {
    /* A frame is there but cannot be read: it stays in the stack as a frame
     * the reader cannot name ("[unknown ruby]"), and the walk ends. */
    omniprof_count(RBPERF_STAT_READ_FAILED);
    omniprof_interpreter_frame(state, mark, 0, 0, OMNIPROF_FRAME_RUBY);
    state->interpreter_walk[WALK_CFP] = 0;
    return STEP_DONE;
  }
  __u64 pc = cfp_word(words, o->cfp_pc), iseq = cfp_word(words, o->cfp_iseq), ep = cfp_word(words, o->cfp_ep);
  int pushed = 0;
  if (iseq != 0 && pc != 0) {
    /* rbperf.h: the pc's VALUE index, modulo 2^29; the reader takes the
     * iseq's iseq_encoded off it (it reads the iseq anyway), which saves
     * two reads here per frame. */
    __u32 detail = (__u32)(pc >> 3) & RBPERF_DETAIL_PC_MASK;
    if (omniprof_interpreter_frame(state, mark, iseq, detail, OMNIPROF_FRAME_RUBY) != 0) return STEP_DONE;
    note_frame_seen(state->key.pid, iseq, ep, flags);
    pushed = 1;
  } else if ((flags & RUBY_VM_FRAME_MAGIC_MASK) == RUBY_VM_FRAME_MAGIC_CFUNC) {
    /* A C function's env is local: ep[-2] is its method entry. */
    __u64 me = 0;
    omniprof_read_user_u64(ep + RUBY_VM_ENV_INDEX_ME_CREF * 8, &me);
    if (omniprof_interpreter_frame(state, mark, me, RBPERF_DETAIL_CFUNC, OMNIPROF_FRAME_RUBY) != 0) return STEP_DONE;
    if (me != 0) note_frame_seen(state->key.pid, me, 0, 0);
    pushed = 1;
  }
  /* Other frames (the thread's dummy top frame, IFUNC frames of C blocks)
   * are not shown, as Ruby's own backtraces do not show them. */
  if (pushed) omniprof_count(RBPERF_STAT_FRAMES);
  if (flags & RUBY_VM_FRAME_FLAG_FINISH) state->interpreter_walk[WALK_MARK] = mark + 1;
  state->interpreter_walk[WALK_CFP] = cfp + o->control_frame_size;
  return STEP_CONTINUE;
}

/* A layout the walk can use (an all-zero entry: no layout stored for this version). */
static __always_inline bool offsets_usable(const struct ruby_offsets *o) { return o->version != 0 && o->control_frame_size != 0; }

/* Shared by both programs: the process's offsets, and the walk's start on
 * the first run. NULL: nothing (more) to walk, the caller stops. */
OMNIPROF_INTERPRETER_PREPARE(prepare, struct ruby_offsets, offsets_of, offsets_usable, RBPERF_STAT_NO_OFFSETS, WALK_STARTED, start_walk)

/* Frames are left to walk. */
static __always_inline bool frames_left(const struct omniprof_unwind_state *state) {
  __u64 cfp = state->interpreter_walk[WALK_CFP];
  return cfp != 0 && cfp < state->interpreter_walk[WALK_END];
}

/* ruby_unwind (tail calls, before 5.17) and ruby_unwind_loop (bpf_loop). */
OMNIPROF_INTERPRETER_PROGRAMS(ruby_unwind, OMNIPROF_SLOT_RUBY, struct ruby_offsets, prepare, walk_one_frame,
                              frames_left, FRAMES_PER_PROGRAM, FRAMES_PER_LOOP_PROGRAM, RBPERF_STAT_TRUNCATED)
