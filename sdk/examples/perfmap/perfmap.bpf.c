// SPDX-License-Identifier: GPL-2.0
/* perfmap: JIT frames named from the process's perf map.
 *
 * The native walker steps through JIT code by frame pointers (V8, the JVM
 * and .NET keep them) and marks every frame whose pc lies in the JIT code
 * ranges the plugin gave for the process (jit_code.h). This program runs
 * once after the native walk and gives each mark one frame of the plugin's
 * kind, flagged OMNIPROF_FRAME_REPLACES_MARK: the host puts it in the
 * native frame's place, and the plugin's user space names its address from
 * the perf map. No process memory is read here: the address is all the
 * name needs. */
#include "omniprof/bpf/unwinder.bpf.h"
#include "perfmap.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 omniprof_self_slot = 0; /* set by the host before load */

/* interpreter_walk slots. */
enum walk_slot {
  WALK_NEXT_MARK = 0, /* the next mark to give a frame */
};

/* Marks per run of perfmap_unwind (kernels without bpf_loop), which
 * tail-calls itself for the next ones while the budget lasts. */
#define MARKS_PER_PROGRAM 32

static __always_inline void count(__u32 stat) {
  omniprof_count(OMNIPROF_STATS_BASE(omniprof_self_slot) + stat);
}

/* Nothing per process to look up: the state is its own "offsets". */
static __always_inline const struct omniprof_unwind_state *perfmap_prepare(struct omniprof_unwind_state *state) {
  if (state->interpreter_walk[WALK_NEXT_MARK] == 0) count(PERFMAP_STAT_WALKS);
  return state;
}

static __always_inline bool perfmap_more(const struct omniprof_unwind_state *state) {
  return state->interpreter_walk[WALK_NEXT_MARK] < state->num_marks;
}

static __always_inline int perfmap_step(struct omniprof_unwind_state *state,
                                        const struct omniprof_unwind_state *unused) {
  __u64 next = state->interpreter_walk[WALK_NEXT_MARK];
  if (next >= state->num_marks || next >= OMNIPROF_MAX_MARKS) return 1;
  __u32 mark = (__u32)next;
  state->interpreter_walk[WALK_NEXT_MARK] = next + 1;
  /* marks[] counts native frames up to and including the marked one. */
  __u32 frames = state->marks[omniprof_masked(mark, OMNIPROF_MAX_MARKS - 1)];
  if (frames == 0) return 0;
  __u32 index = frames - 1;
  __u64 address = state->stack.frames[omniprof_masked(index, OMNIPROF_MAX_STACK_DEPTH - 1)].address;
  __u32 detail = index == 0 ? 0 : PERFMAP_DETAIL_RETURN_ADDRESS;
  if (omniprof_replace_marked_frame(state, mark, address, detail, (__u8)omniprof_self_slot) != 0) return 1;
  count(PERFMAP_STAT_FRAMES);
  return 0;
}

OMNIPROF_INTERPRETER_PROGRAMS(perfmap_unwind, omniprof_self_slot, struct omniprof_unwind_state, perfmap_prepare,
                              perfmap_step, perfmap_more, MARKS_PER_PROGRAM, OMNIPROF_MAX_MARKS,
                              OMNIPROF_STATS_BASE(omniprof_self_slot) + PERFMAP_STAT_TRUNCATED)
