// SPDX-License-Identifier: GPL-2.0
/* The native unwinder, first version: walks user stacks through the frame
 * pointer chain. It fills the NATIVE slot; the DWARF walker that replaces it
 * keeps this slot, this entry point and these stop reasons.
 *
 * Each run walks up to FRAMES_PER_PROGRAM frames, then tail-calls its own
 * slot to continue with a fresh instruction budget, so the depth is bounded
 * by OMNIPROF_MAX_STACK_DEPTH, not by the verifier's program size. */
#include "omniprof/bpf/unwinder.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define FRAMES_PER_PROGRAM 32

static __always_inline void stop(void *ctx, struct omniprof_unwind_state *state, __u32 walked,
                                 __u32 reason) {
  omniprof_count_n(OMNIPROF_STAT_NATIVE_FRAMES, walked);
  omniprof_stop_walk(ctx, state, reason);
}

SEC("perf_event")
int native_unwind(struct bpf_perf_event_data *ctx) {
  struct omniprof_unwind_state *state = omniprof_state();
  if (!state) return 0;

  __u32 walked = 0;
  for (int i = 0; i < FRAMES_PER_PROGRAM; i++) {
    if (omniprof_push_frame(state, state->ip, OMNIPROF_FRAME_NATIVE) < 0) {
      stop(ctx, state, walked, OMNIPROF_STAT_NATIVE_STOP_MAX_DEPTH);
      return 0;
    }
    walked++;
    if (state->bp == 0) {
      stop(ctx, state, walked, OMNIPROF_STAT_NATIVE_STOP_OUTERMOST);
      return 0;
    }
    /* x86-64 frame record: [bp] = caller's bp, [bp + 8] = return address. */
    __u64 record[2];
    if (bpf_probe_read_user(record, sizeof(record), (void *)state->bp) != 0) {
      stop(ctx, state, walked, OMNIPROF_STAT_NATIVE_STOP_READ_FAILED);
      return 0;
    }
    if (record[1] == 0) {
      stop(ctx, state, walked, OMNIPROF_STAT_NATIVE_STOP_ZERO_RETURN);
      return 0;
    }
    /* The stack grows down: a caller's frame is above its callee's. Anything
     * else is not a frame chain (code without frame pointers) and would loop;
     * the return address read with it is still the caller's, so keep it. */
    if (record[0] != 0 && record[0] <= state->bp) {
      if (omniprof_push_frame(state, record[1], OMNIPROF_FRAME_NATIVE) == 0) walked++;
      stop(ctx, state, walked, OMNIPROF_STAT_NATIVE_STOP_FP_NOT_ASCENDING);
      return 0;
    }
    state->sp = state->bp + 16;
    state->bp = record[0];
    state->ip = record[1];
  }
  omniprof_count_n(OMNIPROF_STAT_NATIVE_FRAMES, walked);
  omniprof_tail_call(ctx, state, OMNIPROF_SLOT_NATIVE);
  return 0;
}
