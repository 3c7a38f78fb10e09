/* What every unwinder program (in-tree or third-party) uses to hand the walk
 * on: push frames, tail-call the next slot under the tail-call guard, and end
 * the walk with a reason. */
#ifndef OMNIPROF_UNWINDER_BPF_H
#define OMNIPROF_UNWINDER_BPF_H

#include "omniprof/bpf/shared_maps.bpf.h"

/* Appends a frame. Returns 0, or -1 when the stack buffer is full. The mask
 * keeps the index provably inside the array for the verifier. */
static __always_inline int omniprof_push_frame(struct omniprof_unwind_state *state, __u64 frame,
                                               __u8 kind) {
  __u32 len = state->stack.len;
  if (len >= OMNIPROF_MAX_STACK_DEPTH) return -1;
  state->stack.frames[len & (OMNIPROF_MAX_STACK_DEPTH - 1)] = frame;
  state->stack.kinds[len & (OMNIPROF_MAX_STACK_DEPTH - 1)] = kind;
  state->stack.len = len + 1;
  return 0;
}

/* Ends the walk: records why and hands over to STOP, which stores the stack
 * and counts the sample. STOP is always reachable: the guard below keeps one
 * tail call in reserve for it. */
static __always_inline void omniprof_stop_walk(void *ctx, struct omniprof_unwind_state *state,
                                               __u32 reason) {
  state->stop_reason = reason;
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

#endif /* OMNIPROF_UNWINDER_BPF_H */
