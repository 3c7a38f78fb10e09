// SPDX-License-Identifier: GPL-2.0
/* The native unwinder: walks user stacks with the unwind tables the native
 * plugin builds from each executable's DWARF call-frame information, and
 * falls back to the frame-pointer chain where no table covers the pc (JIT
 * code, executables whose table is not loaded yet or did not fit).
 *
 * Per frame: find the process's mapping holding the pc (binary search in
 * process_info), the executable's chunk holding it (binary search in
 * executable_unwind_info), the chunk's shard (an inner map of
 * unwind_shards), the last row at or before the pc (binary search in that
 * shard), then recover CFA, return address and rbp from the row's rule.
 *
 * Each run walks a batch of frames (FRAMES_PER_PROGRAM, or with bpf_loop
 * FRAMES_PER_LOOP_PROGRAM), then tail-calls its own slot to continue with a
 * fresh instruction budget. Each frame whose pc lies in the process's
 * interpreter code is marked; when the native walk ends, the process's
 * interpreter unwinder runs once and places its frames at the marks (see
 * omniprof_unwind_state in abi.h).
 * Every loop has a constant bound and every array index is masked, which is
 * what the verifier of a 5.10 kernel needs to accept them. */
#include "omniprof/bpf/code_address.h"
#include "omniprof/bpf/unwinder.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* The verifier walks every frame of a run: with the two-level row lookup,
 * 6 frames cost it ~490k instructions on 6.18 (of its 1M limit), 5 frames
 * ~400k, which leaves room for older verifiers. */
#define FRAMES_PER_PROGRAM 5

enum step_result {
  STEP_CONTINUE = 0,
  STEP_STOP = 1, /* state->stop_reason says why */
};

static __always_inline int stop_with(struct omniprof_unwind_state *state, __u32 reason) {
  state->stop_reason = reason;
  return STEP_STOP;
}

/* The caller of the current frame through the frame-pointer chain. */
static __always_inline int frame_pointer_step(struct omniprof_unwind_state *state) {
  if (state->bp == 0) return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_OUTERMOST);
  /* x86-64 frame record: [bp] = caller's bp, [bp + 8] = return address. */
  __u64 record[2];
  if (bpf_probe_read_user(record, sizeof(record), (void *)state->bp) != 0) {
    return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_READ_FAILED);
  }
  if (record[1] == 0) return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_ZERO_RETURN);
  /* The stack grows down: a caller's frame is above its callee's. Anything
   * else is not a frame chain (code without frame pointers) and would loop. */
  if (record[0] != 0 && record[0] <= state->bp) {
    omniprof_push_frame(state, record[1], OMNIPROF_FRAME_NATIVE);
    return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_FP_NOT_ASCENDING);
  }
  omniprof_count(OMNIPROF_STAT_NATIVE_FP_FRAMES);
  state->walk_flags |= OMNIPROF_WALK_FROM_FRAME_POINTER;
  state->sp = state->bp + 16;
  state->bp = record[0];
  state->ip = record[1];
  return STEP_CONTINUE;
}

static __always_inline struct omniprof_process_mapping *find_mapping(struct omniprof_process_info *info,
                                                             __u64 pc) {
  __u32 count = info->num_mappings;
  if (count > OMNIPROF_MAX_MAPPINGS) count = OMNIPROF_MAX_MAPPINGS;
  /* lo ends as the number of mappings starting at or before pc. */
  __u32 lo = 0, hi = count;
  for (int i = 0; i <= OMNIPROF_MAPPING_SEARCH_STEPS; i++) {
    if (lo >= hi) break;
    __u32 mid = (lo + hi) / 2;
    if (info->mappings[mid & (OMNIPROF_MAX_MAPPINGS - 1)].start <= pc) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return NULL;
  struct omniprof_process_mapping *mapping = &info->mappings[(lo - 1) & (OMNIPROF_MAX_MAPPINGS - 1)];
  return pc < mapping->end ? mapping : NULL;
}

/* The chunk of an executable's table that covers `pc`, or NULL. */
static __always_inline struct omniprof_unwind_chunk *find_chunk(struct omniprof_executable_unwind_info *info,
                                                                __u64 pc) {
  __u32 count = info->num_chunks;
  if (count > OMNIPROF_MAX_CHUNKS) count = OMNIPROF_MAX_CHUNKS;
  /* Chunks are sorted and do not overlap: lo ends as the number of chunks
   * starting at or before pc. A constant bound (log2 + 1 steps) and an index
   * masked into the array, so the verifier sees every access in bounds
   * without tracking lo and hi. */
  __u32 lo = 0, hi = count;
  for (int i = 0; i <= OMNIPROF_CHUNK_SEARCH_STEPS; i++) {
    if (lo >= hi) break;
    __u32 mid = (lo + hi) / 2;
    if (info->chunks[mid & (OMNIPROF_MAX_CHUNKS - 1)].low_pc <= pc) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return NULL;
  struct omniprof_unwind_chunk *chunk = &info->chunks[(lo - 1) & (OMNIPROF_MAX_CHUNKS - 1)];
  return pc - chunk->low_pc < chunk->high_offset ? chunk : NULL;
}

/* The rule in effect at `pc` (an ELF virtual address) of an executable, or
 * NULL with the reason counted. */
static __always_inline struct omniprof_unwind_rule *find_rule(struct omniprof_unwind_state *state, __u64 file_id,
                                                              __u64 pc) {
  struct omniprof_executable_unwind_info *info = bpf_map_lookup_elem(&executable_unwind_info, &file_id);
  if (!info) {
    omniprof_count(OMNIPROF_STAT_NATIVE_NO_TABLE);
    return NULL;
  }
  struct omniprof_unwind_chunk *chunk = find_chunk(info, pc);
  if (!chunk || chunk->num_rows == 0) {
    /* Only here, where the walk falls back to frame pointers anyway: a table
     * the host is still building (abi.h, OMNIPROF_UNWIND_INFO_BUILDING). */
    if (info->flags & OMNIPROF_UNWIND_INFO_BUILDING) {
      if (!(state->walk_flags & OMNIPROF_WALK_TABLE_BUILDING)) {
        state->walk_flags |= OMNIPROF_WALK_TABLE_BUILDING;
        omniprof_count(OMNIPROF_STAT_NATIVE_WALKS_TABLE_BUILDING);
      }
      return NULL;
    }
    omniprof_count(OMNIPROF_STAT_NATIVE_NO_ROW);
    return NULL;
  }
  /* Two levels: the shard (an inner map of unwind_shards), then its rows.
   * The verifier types the inner lookup's result as a map of the template's
   * shape (struct omniprof_unwind_shard_map), so the row lookups below are
   * inlined array accesses, bounds-checked against OMNIPROF_ROWS_PER_SHARD.
   * A shard the chunk names but unwind_shards lacks cannot happen while the
   * store keeps its shards for life; if it ever does, it is counted, never
   * silently taken for "no table". */
  __u32 shard_index = chunk->shard;
  void *shard = bpf_map_lookup_elem(&unwind_shards, &shard_index);
  if (!shard) {
    omniprof_count(OMNIPROF_STAT_NATIVE_NO_SHARD);
    return NULL;
  }
  __u32 target = (__u32)(pc - chunk->low_pc);
  __u32 first = chunk->first_row;
  /* lo ends as the number of rows at or before target; row 0 is at low_pc. */
  __u32 lo = 0, hi = chunk->num_rows;
  for (int i = 0; i <= OMNIPROF_ROW_SEARCH_STEPS; i++) {
    if (lo >= hi) break;
    __u32 mid = (lo + hi) / 2;
    __u32 index = first + mid;
    struct omniprof_unwind_row *row = bpf_map_lookup_elem(shard, &index);
    if (!row) {
      /* Past the shard's end (a corrupt chunk): counted as no row below.
       * No count here: a helper call in the loop body multiplies the
       * states the verifier walks. */
      lo = 0;
      break;
    }
    if (row->pc_offset <= target) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) {
    omniprof_count(OMNIPROF_STAT_NATIVE_NO_ROW);
    return NULL;
  }
  __u32 index = first + lo - 1;
  struct omniprof_unwind_row *row = bpf_map_lookup_elem(shard, &index);
  if (!row) {
    omniprof_count(OMNIPROF_STAT_NATIVE_NO_ROW);
    return NULL;
  }
  __u32 rule_index = row->rule;
  return bpf_map_lookup_elem(&unwind_rules, &rule_index);
}

/* The caller of the current frame from the unwind tables, or from frame
 * pointers where they do not cover the pc (the code the frame ran: the
 * call's row applies, not the row after it). */
static __always_inline int unwind_step(struct omniprof_unwind_state *state,
                                       struct omniprof_process_info *process, __u64 pc) {
  struct omniprof_process_mapping *mapping = process ? find_mapping(process, pc) : NULL;
  if (!mapping) {
    /* A library loaded after the host read the mappings (dlopen), or JIT
     * code: ask the host to re-read them (rate-limited). */
    if (process && !(state->walk_flags & OMNIPROF_WALK_FROM_FRAME_POINTER)) {
      omniprof_request(OMNIPROF_EVENT_MAPPINGS_STALE, state->key.pid);
    }
    omniprof_count(OMNIPROF_STAT_NATIVE_NO_MAPPING);
    return frame_pointer_step(state);
  }
  if (mapping->file_id == 0) {
    omniprof_count(OMNIPROF_STAT_NATIVE_NO_MAPPING);
    return frame_pointer_step(state);
  }
  struct omniprof_unwind_rule *rule = find_rule(state, mapping->file_id, pc - mapping->load_bias);
  if (!rule) return frame_pointer_step(state);

  __u64 cfa;
  switch (rule->cfa_type) {
    case OMNIPROF_CFA_RSP:
      cfa = state->sp + (__s64)rule->cfa_offset;
      break;
    case OMNIPROF_CFA_RBP:
      cfa = state->bp + (__s64)rule->cfa_offset;
      break;
    case OMNIPROF_CFA_PLT:
      cfa = state->sp + 8 + (((state->ip & 15) >= (__u64)rule->cfa_offset) ? 8 : 0);
      break;
    case OMNIPROF_CFA_OUTERMOST:
      return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_OUTERMOST);
    case OMNIPROF_CFA_END_OF_FUNCTION:
      omniprof_count(OMNIPROF_STAT_NATIVE_NO_ROW);
      return frame_pointer_step(state);
    default:
      omniprof_count(OMNIPROF_STAT_NATIVE_UNSUPPORTED_RULE);
      return frame_pointer_step(state);
  }
  if (cfa <= state->sp) return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_SP_NOT_ASCENDING);

  __u64 return_address = 0;
  if (bpf_probe_read_user(&return_address, sizeof(return_address), (void *)(cfa - 8)) != 0) {
    return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_READ_FAILED);
  }
  if (rule->rbp_type == OMNIPROF_RBP_AT_CFA_OFFSET) {
    __u64 saved_bp = 0;
    if (bpf_probe_read_user(&saved_bp, sizeof(saved_bp), (void *)(cfa + (__s64)rule->rbp_offset)) != 0) {
      return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_READ_FAILED);
    }
    state->bp = saved_bp;
  }
  if (return_address == 0) return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_ZERO_RETURN);
  omniprof_count(OMNIPROF_STAT_NATIVE_DWARF_FRAMES);
  state->walk_flags &= ~OMNIPROF_WALK_FROM_FRAME_POINTER;
  state->sp = cfa;
  state->ip = return_address;
  return STEP_CONTINUE;
}

/* One frame of the walk: push the current pc, mark it if it ran interpreter
 * code, step to the caller. STEP_STOP with state->stop_reason set ends the
 * native walk. */
static __always_inline int walk_one_frame(struct omniprof_unwind_state *state,
                                          struct omniprof_process_info *process) {
  if (omniprof_push_frame(state, state->ip, OMNIPROF_FRAME_NATIVE) < 0) {
    return stop_with(state, OMNIPROF_STAT_NATIVE_STOP_MAX_DEPTH);
  }
  __u64 pc = omniprof_code_address(state->ip, state->stack.len > 1);
  if (omniprof_in_interpreter(process, pc)) omniprof_mark_interpreter_frame(state);
  return unwind_step(state, process, pc);
}

/* Tail calls the native walk may spend: the rest is kept for the
 * process's interpreter unwinder and STOP. */
static __always_inline bool native_budget_left(struct omniprof_unwind_state *state,
                                               struct omniprof_process_info *process) {
  __u32 reserve = (process && process->interpreter_slot) ? OMNIPROF_INTERPRETER_TAIL_CALLS : 1;
  return state->tail_calls + reserve < OMNIPROF_MAX_TAIL_CALLS;
}

/* Kernels before 5.17 (no bpf_loop): FRAMES_PER_PROGRAM frames per run,
 * then a tail call to this slot for the next ones. The verifier walks every
 * frame of a run, which is what bounds FRAMES_PER_PROGRAM; the tail-call
 * budget bounds the depth (about 120 frames). */
SEC("perf_event")
int native_unwind(struct bpf_perf_event_data *ctx) {
  struct omniprof_unwind_state *state = omniprof_state();
  if (!state) return 0;
  __u32 tgid = state->key.pid;
  struct omniprof_process_info *process = bpf_map_lookup_elem(&process_info, &tgid);
  __u32 first = state->stack.len;

  for (int i = 0; i < FRAMES_PER_PROGRAM; i++) {
    if (walk_one_frame(state, process) == STEP_STOP) {
      omniprof_count_n(OMNIPROF_STAT_NATIVE_FRAMES, state->stack.len - first);
      omniprof_native_walk_done(ctx, state, process, state->stop_reason);
      return 0;
    }
  }
  /* One count per run, not per frame: a helper call in the unrolled body
   * multiplies the states the verifier walks. */
  omniprof_count_n(OMNIPROF_STAT_NATIVE_FRAMES, state->stack.len - first);
  if (!native_budget_left(state, process)) {
    omniprof_native_walk_done(ctx, state, process, OMNIPROF_STAT_TAIL_CALL_LIMIT);
    return 0;
  }
  omniprof_tail_call(ctx, state, OMNIPROF_SLOT_NATIVE);
  return 0;
}

/* Kernels with bpf_loop (5.17+): the loop's callback is verified once,
 * however many times it runs, so one run walks FRAMES_PER_LOOP_PROGRAM
 * frames and the whole stack (OMNIPROF_MAX_STACK_DEPTH) takes a few tail
 * calls. The host loads this program instead of native_unwind where the
 * kernel has bpf_loop (OMNIPROF_PROGRAM_NEEDS_BPF_LOOP). */
#define FRAMES_PER_LOOP_PROGRAM 128

struct loop_context {
  struct omniprof_unwind_state *state;
  struct omniprof_process_info *process;
  int stopped;
};

/* One frame, verified once as a function of its own (a global function:
 * the verifier checks it against its argument types alone), not once per
 * state the loop's callback reaches: inlined, a 6.18 verifier walks the
 * three binary searches' branches over a million instructions. */
__noinline int native_walk_frame(struct omniprof_unwind_state *state, __u32 tgid) {
  if (!state) return STEP_STOP;
  struct omniprof_process_info *process = bpf_map_lookup_elem(&process_info, &tgid);
  return walk_one_frame(state, process);
}

static long walk_frame_callback(__u32 index, void *data) {
  struct loop_context *loop = data;
  if (native_walk_frame(loop->state, loop->state->key.pid) == STEP_STOP) {
    loop->stopped = 1;
    return 1; /* ends bpf_loop */
  }
  return 0;
}

SEC("perf_event")
int native_unwind_loop(struct bpf_perf_event_data *ctx) {
  struct omniprof_unwind_state *state = omniprof_state();
  if (!state) return 0;
  __u32 tgid = state->key.pid;
  struct loop_context loop = {.state = state, .process = bpf_map_lookup_elem(&process_info, &tgid), .stopped = 0};
  __u32 first = state->stack.len;
  bpf_loop(FRAMES_PER_LOOP_PROGRAM, walk_frame_callback, &loop, 0);
  omniprof_count_n(OMNIPROF_STAT_NATIVE_FRAMES, state->stack.len - first);
  if (loop.stopped) {
    omniprof_native_walk_done(ctx, state, loop.process, state->stop_reason);
    return 0;
  }
  if (!native_budget_left(state, loop.process)) {
    omniprof_native_walk_done(ctx, state, loop.process, OMNIPROF_STAT_TAIL_CALL_LIMIT);
    return 0;
  }
  omniprof_tail_call(ctx, state, OMNIPROF_SLOT_NATIVE);
  return 0;
}
