/* What every unwinder program (in-tree or third-party) uses to hand the walk
 * on: push frames, tail-call the next slot under the tail-call guard, hand
 * the marked native frames to the process's interpreter unwinder, and end
 * the walk with a reason.
 *
 * The contract for a plugin's BPF object (the host checks the first two at
 * load):
 * - Each program the entry lists (omniprof_plugin.programs) is a
 *   SEC("perf_event") program the host puts in the tail-call slot the entry
 *   names; the native walk tail-calls it, for a process this plugin claimed
 *   (detect_process), once the native frames are walked and marked.
 * - A third-party plugin asks for OMNIPROF_SLOT_THIRD_PARTY_FIRST and is
 *   given a free slot from 4 to 7. It learns which by declaring
 *     const volatile __u32 omniprof_self_slot = 0;
 *   which the host sets in .rodata before load (an object without it is
 *   loaded as is). The slot is also the kind of the frames it pushes
 *   (enum omniprof_frame_kind in abi.h: the host asks the plugin whose slot
 *   equals a frame's kind to name it) and the base of its counters
 *   (OMNIPROF_STATS_BASE(omniprof_self_slot) + its own index).
 * - Shared maps (process_info, percpu_stats, programs...) are declared by
 *   including this header (shared_maps.bpf.h); the host replaces them with
 *   its own before load. Any other map is the plugin's own (private_map_fd).
 * - The program ends every walk: omniprof_stop_walk, or omniprof_tail_call
 *   to a slot that will; state->tail_calls counts against
 *   OMNIPROF_MAX_TAIL_CALLS, the one for STOP always kept.
 * - An interpreter's frames go after the native ones, each naming the mark
 *   (the marked native frame: its pc in the process's interpreter_ranges)
 *   it belongs to: omniprof_interpreter_frame (after the mark) or
 *   omniprof_replace_marked_frame (in its place). Marks and splicing:
 *   omniprof_unwind_state in abi.h. OMNIPROF_INTERPRETER_PROGRAMS below
 *   writes both programs of such an unwinder from its step functions. */
#ifndef OMNIPROF_UNWINDER_BPF_H
#define OMNIPROF_UNWINDER_BPF_H

#include "omniprof/bpf/shared_maps.bpf.h"

/* `value & mask` that clang cannot fold away: after a range check clang
 * knows the mask changes nothing and drops it, but the verifier may not
 * have carried that range to the register the access uses (a 32-bit
 * compare, a 64-bit address). The empty asm hides what clang knows. */
static __always_inline __u32 omniprof_masked(__u32 value, __u32 mask) {
  asm volatile("" : "+r"(value));
  return value & mask;
}

/* Reads one 64-bit word of the sampled process's memory: 0, or a negative
 * error (the word is then 0). */
static __always_inline long omniprof_read_user_u64(__u64 address, __u64 *out) {
  return bpf_probe_read_user(out, sizeof(*out), (const void *)address);
}

/* Appends a frame to the stack. Returns 0, or -1 when the stack buffer is
 * full. The mask keeps the index provably inside the array for the
 * verifier (OMNIPROF_MAX_STACK_DEPTH is a power of two). */
static __always_inline int omniprof_push_frame(struct omniprof_unwind_state *state, __u64 address,
                                               __u8 kind) {
  __u32 len = state->stack.len;
  if (len >= OMNIPROF_MAX_STACK_DEPTH) return -1;
  struct omniprof_frame *frame = &state->stack.frames[len & (OMNIPROF_MAX_STACK_DEPTH - 1)];
  frame->address = address;
  frame->detail = 0;
  frame->kind = kind;
  frame->flags = 0;
  frame->after = 0;
  state->stack.len = len + 1;
  return 0;
}

/* Ends the walk: records why and hands over to STOP, which stores the
 * stack and counts the sample. STOP is always
 * reachable: the guard below keeps one tail call in reserve for it. */
static __always_inline void omniprof_stop_walk(void *ctx, struct omniprof_unwind_state *state,
                                               __u32 reason) {
  if (reason) state->stop_reason = reason;
  state->tail_calls++;
  bpf_tail_call(ctx, &programs, OMNIPROF_SLOT_STOP);
  /* Only reached if the STOP slot is empty, which the host never allows
   * while sampling; counted so that it cannot go unnoticed. */
  omniprof_count(OMNIPROF_STAT_TAIL_CALL_FAILED);
}

/* Continues the walk in `slot` (the same unwinder for its next batch of
 * frames, or another unwinder). Past OMNIPROF_MAX_TAIL_CALLS the walk ends
 * with OMNIPROF_STAT_TAIL_CALL_LIMIT; if the slot is empty (its plugin is not
 * loaded) it ends with OMNIPROF_STAT_TAIL_CALL_FAILED. Either way the frames
 * gathered so far are kept. */
static __always_inline void omniprof_tail_call(void *ctx, struct omniprof_unwind_state *state,
                                               __u32 slot) {
  if (state->tail_calls >= OMNIPROF_MAX_TAIL_CALLS) {
    omniprof_stop_walk(ctx, state, OMNIPROF_STAT_TAIL_CALL_LIMIT);
    return;
  }
  state->tail_calls++;
  bpf_tail_call(ctx, &programs, slot);
  state->tail_calls--;
  omniprof_stop_walk(ctx, state, OMNIPROF_STAT_TAIL_CALL_FAILED);
}

/* ---- The interpreter hand-off (see omniprof_unwind_state in abi.h) -------- */

/* Whether `pc` lies in the process's interpreter code. A constant number of
 * compares: the ranges live in process_info, no map lookup per frame. */
static __always_inline bool omniprof_in_interpreter(const struct omniprof_process_info *process, __u64 pc) {
  if (!process) return false;
  /* Keeps clang from computing &process->interpreter_ranges before the NULL
   * check, which the verifier refuses (pointer arithmetic on a
   * map_value_or_null). */
  asm volatile("" : "+r"(process));
  if (process->interpreter_slot == 0) return false;
  __u32 n = process->num_interpreter_ranges;
  for (int i = 0; i < OMNIPROF_MAX_INTERPRETER_RANGES; i++) {
    if (i >= n) break;
    if (pc >= process->interpreter_ranges[i].start && pc < process->interpreter_ranges[i].end) return true;
  }
  return false;
}

/* Marks the frame just pushed as one that ran interpreter code. */
static __always_inline void omniprof_mark_interpreter_frame(struct omniprof_unwind_state *state) {
  __u32 n = state->num_marks;
  if (n >= OMNIPROF_MAX_MARKS) {
    omniprof_count(OMNIPROF_STAT_MARKS_FULL);
    return;
  }
  state->marks[omniprof_masked(n, OMNIPROF_MAX_MARKS - 1)] = (__u16)state->stack.len;
  state->num_marks = n + 1;
}

/* The native walk is over (`reason` says why): the process's interpreter
 * unwinder walks next if it has one, then STOP. */
static __always_inline void omniprof_native_walk_done(void *ctx, struct omniprof_unwind_state *state,
                                                      const struct omniprof_process_info *process,
                                                      __u32 reason) {
  state->stop_reason = reason;
  state->walk_flags |= OMNIPROF_WALK_NATIVE_DONE;
  state->native_frames = state->stack.len;
  if (process && process->interpreter_slot > OMNIPROF_SLOT_NATIVE &&
      process->interpreter_slot < OMNIPROF_NUM_SLOTS) {
    state->tail_calls++;
    bpf_tail_call(ctx, &programs, process->interpreter_slot);
    /* The interpreter's plugin is not loaded: the native frames stand. */
    state->tail_calls--;
    omniprof_count(OMNIPROF_STAT_TAIL_CALL_FAILED);
  }
  omniprof_stop_walk(ctx, state, 0);
}

/* For interpreter unwinders: appends an interpreter frame that belongs to
 * mark `mark` (0 = the innermost marked native frame; state->num_marks or
 * more = after the last native frame). Frames must come in stack order,
 * leaf first. Returns 0, or -1 when the stack is full (counted: the frame
 * is lost, the sample kept). `flags`: 0 or OMNIPROF_FRAME_REPLACES_MARK. */
static __always_inline int omniprof_spliced_frame(struct omniprof_unwind_state *state, __u32 mark,
                                                  __u64 address, __u32 detail, __u8 kind, __u8 flags) {
  __u32 len = state->stack.len;
  if (len >= OMNIPROF_MAX_STACK_DEPTH) {
    omniprof_count(OMNIPROF_STAT_INTERPRETER_TRUNCATED);
    return -1;
  }
  __u32 after = state->native_frames;
  if (mark < state->num_marks && mark < OMNIPROF_MAX_MARKS) after = state->marks[omniprof_masked(mark, OMNIPROF_MAX_MARKS - 1)];
  struct omniprof_frame *frame = &state->stack.frames[omniprof_masked(len, OMNIPROF_MAX_STACK_DEPTH - 1)];
  frame->address = address;
  frame->detail = detail;
  frame->kind = kind;
  frame->flags = OMNIPROF_FRAME_SPLICED | flags;
  frame->after = (__u16)after;
  state->stack.len = len + 1;
  return 0;
}

static __always_inline int omniprof_interpreter_frame(struct omniprof_unwind_state *state, __u32 mark,
                                                      __u64 address, __u32 detail, __u8 kind) {
  return omniprof_spliced_frame(state, mark, address, detail, kind, 0);
}

/* For unwinders of code the native walker steps through but cannot name
 * (JIT code): a frame that takes the place of mark `mark`'s native frame
 * (OMNIPROF_FRAME_REPLACES_MARK); otherwise as omniprof_interpreter_frame. */
static __always_inline int omniprof_replace_marked_frame(struct omniprof_unwind_state *state, __u32 mark,
                                                         __u64 address, __u32 detail, __u8 kind) {
  return omniprof_spliced_frame(state, mark, address, detail, kind, OMNIPROF_FRAME_REPLACES_MARK);
}

/* For interpreter unwinders: labels the sample (label_value indexes the
 * plugin's label_values; pyperf: GIL held or released). */
static __always_inline void omniprof_label_sample(struct omniprof_unwind_state *state, __u32 slot,
                                                  __u8 value) {
  state->key.label_slot = (__u8)slot;
  state->key.label_value = value;
}

/* Defines an interpreter plugin's private map NAME of its layouts, one
 * OFFSETS per runtime version it knows (an ARRAY of MAX_VERSIONS that the
 * plugin fills before sampling, from its YAML or the process's own debug
 * offsets), and OFFSETS_OF(process), the layout of the version the plugin
 * stored in process_info.interpreter_data[VERSION_INDEX] (NULL past the
 * array). */
#define OMNIPROF_VERSION_OFFSETS_MAP(NAME, OFFSETS, MAX_VERSIONS, OFFSETS_OF, VERSION_INDEX)      \
  struct {                                                                                        \
    __uint(type, BPF_MAP_TYPE_ARRAY);                                                             \
    __uint(max_entries, MAX_VERSIONS);                                                            \
    __type(key, __u32);                                                                           \
    __type(value, OFFSETS);                                                                       \
  } NAME SEC(".maps");                                                                            \
  static __always_inline const OFFSETS *OFFSETS_OF(const struct omniprof_process_info *process) { \
    __u32 version = (__u32)process->interpreter_data[VERSION_INDEX];                              \
    return bpf_map_lookup_elem(&NAME, &version);                                                  \
  }

/* Defines a plugin's private maps of what its walks met that user space
 * names later (ENTRIES of KEY to VALUE each): NAME, an LRU hash of every
 * object met (a hot stack costs one lookup per frame; full, it forgets the
 * least recently used, which is noted again when met again), and
 * NAME_fresh, the ones not handed to user space yet: the walk notes an
 * object once in both (omniprof_note_seen), the plugin takes NAME_fresh's
 * entries on its tick (drain_map) and names them from the process's memory.
 * So a process's objects are read once each, and a tick comes only when
 * there is something new. An entry stays in NAME until the LRU evicts it:
 * after an exec, an object of the new image at an address the old one used
 * is not noted again, and the plugin names it at the round's end from the
 * process's memory (if it still lives) rather than at a tick. */
#define OMNIPROF_SEEN_MAP(NAME, KEY, VALUE, ENTRIES) \
  struct {                                           \
    __uint(type, BPF_MAP_TYPE_LRU_HASH);             \
    __uint(max_entries, ENTRIES);                    \
    __type(key, KEY);                                \
    __type(value, VALUE);                            \
  } NAME SEC(".maps");                               \
  struct {                                           \
    __uint(type, BPF_MAP_TYPE_HASH);                 \
    __uint(max_entries, ENTRIES);                    \
    __type(key, KEY);                                \
    __type(value, VALUE);                            \
  } NAME##_fresh SEC(".maps")

/* Notes `key` (with `value`) in the maps OMNIPROF_SEEN_MAP(NAME) defined,
 * `seen` (NAME) and `fresh` (NAME_fresh), once the caller has looked it up
 * in `seen` and not found it. Another CPU noting it in between (-EEXIST) is
 * no loss; any other failure is counted in FULL (the object is named late,
 * if at all; one NAME_fresh has no room for is taken out of NAME again, to
 * be noted at its next walk). A new entry marks the walk, and its end (STOP)
 * asks the host for the plugins' tick at once (OMNIPROF_EVENT_TICK_DUE):
 * one event per walk, however many objects it noted. */
static __always_inline void omniprof_note_seen(void *seen, void *fresh, const void *key, const void *value,
                                               __u32 full) {
  long err = bpf_map_update_elem(seen, key, value, BPF_NOEXIST);
  if (omniprof_helper_failed(err)) {
    if (omniprof_helper_errno(err) != -OMNIPROF_EEXIST) omniprof_count(full);
    return;
  }
  if (omniprof_helper_failed(bpf_map_update_elem(fresh, key, value, BPF_ANY))) {
    omniprof_count(full);
    bpf_map_delete_elem(seen, key);
    return;
  }
  struct omniprof_unwind_state *state = omniprof_state();
  if (state) state->walk_flags |= OMNIPROF_WALK_NOTED_NEW;
}

/* Defines NAME, a PREPARE (below) for an unwinder whose walk reads its
 * process's layout: the sampled process's process_info entry (none: nothing
 * to walk), OFFSETS_OF(process), the plugin's layout for it, which
 * USABLE(offsets) accepts (else the walk stops, counted in NO_OFFSETS), and
 * on the walk's first run (interpreter_walk[STARTED] still 0)
 * BEGIN(state, process, offsets), which finds where the walk starts, sets
 * interpreter_walk[STARTED] and returns 0 to go on. */
#define OMNIPROF_INTERPRETER_PREPARE(NAME, OFFSETS, OFFSETS_OF, USABLE, NO_OFFSETS, STARTED, BEGIN)        \
  static __always_inline const OFFSETS *NAME(struct omniprof_unwind_state *state) {                         \
    __u32 tgid = state->key.pid;                                                                             \
    const struct omniprof_process_info *process = bpf_map_lookup_elem(&process_info, &tgid);                \
    if (!process) return NULL;                                                                               \
    const OFFSETS *o = OFFSETS_OF(process);                                                                  \
    if (!o || !USABLE(o)) {                                                                                  \
      omniprof_count(NO_OFFSETS);                                                                            \
      return NULL;                                                                                           \
    }                                                                                                        \
    if (state->interpreter_walk[STARTED] == 0 && BEGIN(state, process, o) != 0) return NULL;                \
    return o;                                                                                                \
  }

/* An interpreter unwinder's two programs (list both in the plugin's program
 * slots, the bpf_loop one first with OMNIPROF_PROGRAM_NEEDS_BPF_LOOP):
 *   NAME##_loop (kernels with bpf_loop, 5.17+): up to LOOP_STEPS steps in
 *     one run;
 *   NAME (before 5.17): STEPS_PER_RUN steps per run, then a tail call to
 *     SLOT for more while the budget lasts (the native walk leaves
 *     OMNIPROF_INTERPRETER_TAIL_CALLS).
 * The unwinder defines, as static __always_inline functions:
 *   const OFFSETS *PREPARE(struct omniprof_unwind_state *): the process's
 *     layout, and the walk's start on the first run; NULL: nothing to walk;
 *   int STEP(struct omniprof_unwind_state *, const OFFSETS *): one frame,
 *     0 to go on (its position lives in state->interpreter_walk, so that a
 *     tail call or the next bpf_loop iteration picks it up);
 *   bool MORE(const struct omniprof_unwind_state *): frames are left (a step
 *     that ends the walk on a read failure clears its position);
 * and TRUNCATED, the counter of walks that ended with frames left. */
#define OMNIPROF_INTERPRETER_PROGRAMS(NAME, SLOT, OFFSETS, PREPARE, STEP, MORE, STEPS_PER_RUN, LOOP_STEPS, TRUNCATED) \
  SEC("perf_event")                                                                                                \
  int NAME(struct bpf_perf_event_data *ctx) {                                                                      \
    struct omniprof_unwind_state *state = omniprof_state();                                                        \
    if (!state) return 0;                                                                                          \
    const OFFSETS *o = PREPARE(state);                                                                             \
    if (o) {                                                                                                       \
      int steps = 0;                                                                                               \
      for (; steps < (STEPS_PER_RUN); steps++) {                                                                   \
        if (STEP(state, o) != 0) break;                                                                            \
      }                                                                                                            \
      if (steps == (STEPS_PER_RUN) && MORE(state)) {                                                               \
        if (state->tail_calls + 1 < OMNIPROF_MAX_TAIL_CALLS) {                                                     \
          omniprof_tail_call(ctx, state, SLOT);                                                                    \
          return 0;                                                                                                \
        }                                                                                                          \
        omniprof_count(TRUNCATED);                                                                                 \
      }                                                                                                            \
    }                                                                                                              \
    omniprof_stop_walk(ctx, state, 0);                                                                             \
    return 0;                                                                                                      \
  }                                                                                                                \
  struct NAME##_loop_context {                                                                                     \
    struct omniprof_unwind_state *state;                                                                           \
    const OFFSETS *offsets;                                                                                        \
  };                                                                                                               \
  static long NAME##_loop_step(__u32 index, void *data) {                                                          \
    struct NAME##_loop_context *loop = data;                                                                       \
    return STEP(loop->state, loop->offsets) != 0 ? 1 : 0;                                                          \
  }                                                                                                                \
  SEC("perf_event")                                                                                                \
  int NAME##_loop(struct bpf_perf_event_data *ctx) {                                                               \
    struct omniprof_unwind_state *state = omniprof_state();                                                        \
    if (!state) return 0;                                                                                          \
    const OFFSETS *o = PREPARE(state);                                                                             \
    if (o) {                                                                                                       \
      struct NAME##_loop_context loop = {.state = state, .offsets = o};                                            \
      bpf_loop((LOOP_STEPS), NAME##_loop_step, &loop, 0);                                                          \
      if (MORE(state)) omniprof_count(TRUNCATED);                                                                  \
    }                                                                                                              \
    omniprof_stop_walk(ctx, state, 0);                                                                             \
    return 0;                                                                                                      \
  }

#endif /* OMNIPROF_UNWINDER_BPF_H */
