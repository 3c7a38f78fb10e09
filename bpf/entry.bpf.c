// SPDX-License-Identifier: GPL-2.0
/* The host's BPF object. It defines the shared maps (see shared_maps.bpf.h)
 * and three kinds of program:
 *   omniprof_entry: runs on every cpu-clock sample. Records the kernel stack,
 *     finds the user registers and tail-calls the NATIVE slot.
 *   omniprof_stop: the STOP slot. Every walk ends here: it stores the user
 *     stack, counts the sample and counts why the walk stopped.
 *   omniprof_exec / omniprof_exit: tell the host that a process it described
 *     has replaced or lost its mappings.
 */
#include "omniprof/bpf/unwinder.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the host between open and load. */
const volatile __u8 filter_pids = 0;

/* -p PID...: the processes to keep when filter_pids is set (SetDebugPIDs). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1024);
  __type(key, __u32);
  __type(value, __u8);
} pid_filter SEC(".maps");

/* murmur3's 64-bit finalizer: spreads every input bit over the hash. */
static __always_inline __u64 mix64(__u64 h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

/* Stores a stack under the hash of its frames and returns that id. A stack
 * that cannot be stored (map full) keeps its sample, as OMNIPROF_STACK_ID_LOST.
 * Kernel stacks leave `kinds` unset (every frame is a kernel frame: the host
 * knows them from kernel_stack_id), so only user stacks hash their kinds. */
static __always_inline __u64 store_stack(struct omniprof_stack *stack, bool user) {
  __u32 len = stack->len;
  __u64 hash = mix64(len ^ ((__u64)user << 63));
  for (int i = 0; i < OMNIPROF_MAX_STACK_DEPTH; i++) {
    if (i >= len) break;
    hash = mix64(hash ^ stack->frames[i]);
    if (user) hash += stack->kinds[i];
  }
  if (hash <= OMNIPROF_STACK_ID_LOST) hash += 2;
  long err = bpf_map_update_elem(&stack_traces, &hash, stack, BPF_NOEXIST);
  /* EEXIST: the same stack is already stored, which is the common case. */
  if (err != 0 && omniprof_helper_errno(err) != -OMNIPROF_EEXIST) {
    omniprof_count(OMNIPROF_STAT_STACK_TRACES_FULL);
    return OMNIPROF_STACK_ID_LOST;
  }
  return hash;
}

SEC("perf_event")
int omniprof_entry(struct bpf_perf_event_data *ctx) {
  omniprof_count(OMNIPROF_STAT_SAMPLES);
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = pid_tgid >> 32;
  __u32 tid = (__u32)pid_tgid;
  if (tid == 0) {
    omniprof_count(OMNIPROF_STAT_IDLE);
    return 0;
  }
  if (filter_pids && !bpf_map_lookup_elem(&pid_filter, &tgid)) {
    omniprof_count(OMNIPROF_STAT_FILTERED);
    return 0;
  }
  struct omniprof_unwind_state *state = omniprof_state();
  if (!state) {
    omniprof_count(OMNIPROF_STAT_STATE_MISSING);
    return 0;
  }
  state->tail_calls = 0;
  state->stop_reason = 0;
  state->walk_flags = 0;
  state->key.pid = tgid;
  state->key.tid = tid;
  state->key.user_stack_id = OMNIPROF_STACK_ID_NONE;
  state->key.kernel_stack_id = OMNIPROF_STACK_ID_NONE;
  __builtin_memset(state->key.thread_name, 0, sizeof(state->key.thread_name));
  bpf_get_current_comm(state->key.thread_name, sizeof(state->key.thread_name));

  /* Kernel frames first, through the state's stack buffer (the BPF stack is
   * too small for them), then the buffer is reset for the user walk. */
  state->stack.flags = 0;
  /* An int: see omniprof_helper_errno (compat.bpf.h). */
  int bytes = omniprof_helper_errno(bpf_get_stack(ctx, state->stack.frames, sizeof(state->stack.frames), 0));
  if (bytes < 0) {
    omniprof_count(OMNIPROF_STAT_KERNEL_STACK_ERROR);
  } else if (bytes > 0) {
    state->stack.len = bytes / sizeof(__u64);
    state->key.kernel_stack_id = store_stack(&state->stack, false);
  }
  state->stack.len = 0;

  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  if (BPF_CORE_READ(task, flags) & OMNIPROF_PF_KTHREAD) {
    omniprof_stop_walk(ctx, state, OMNIPROF_STAT_KERNEL_THREAD);
    return 0;
  }

  struct pt_regs regs;
  if (omniprof_regs_user_mode(&ctx->regs)) {
    regs = ctx->regs;
  } else if (omniprof_user_regs(task, &regs) != 0) {
    omniprof_stop_walk(ctx, state, OMNIPROF_STAT_USER_REGS_ERROR);
    return 0;
  }
  state->ip = regs.rip;
  state->sp = regs.rsp;
  state->bp = regs.rbp;

  if (!bpf_map_lookup_elem(&process_info, &tgid)) {
    omniprof_request(OMNIPROF_EVENT_PROCESS_UNKNOWN, tgid);
  }

  omniprof_tail_call(ctx, state, OMNIPROF_SLOT_NATIVE);
  return 0;
}

SEC("perf_event")
int omniprof_stop(struct bpf_perf_event_data *ctx) {
  struct omniprof_unwind_state *state = omniprof_state();
  if (!state) {
    omniprof_count(OMNIPROF_STAT_STATE_MISSING);
    return 0;
  }
  if (state->stop_reason) omniprof_count(state->stop_reason);
  if (state->stack.len > 0) {
    if (state->stack.len >= OMNIPROF_MAX_STACK_DEPTH) omniprof_count(OMNIPROF_STAT_STACK_TRUNCATED);
    state->key.user_stack_id = store_stack(&state->stack, true);
  }

  __u64 *count = bpf_map_lookup_elem(&stack_counts, &state->key);
  if (!count) {
    __u64 one = 1;
    if (bpf_map_update_elem(&stack_counts, &state->key, &one, BPF_NOEXIST) == 0) {
      omniprof_count(OMNIPROF_STAT_RECORDED);
      return 0;
    }
    /* Another CPU may have inserted the same key in between. */
    count = bpf_map_lookup_elem(&stack_counts, &state->key);
    if (!count) {
      omniprof_count(OMNIPROF_STAT_STACK_COUNTS_FULL);
      return 0;
    }
  }
  __sync_fetch_and_add(count, 1);
  omniprof_count(OMNIPROF_STAT_RECORDED);
  return 0;
}

struct linux_binprm;

SEC("tp_btf/sched_process_exec")
int BPF_PROG(omniprof_exec, struct task_struct *task, int old_pid, struct linux_binprm *bprm) {
  __u32 tgid = BPF_CORE_READ(task, tgid);
  if (bpf_map_lookup_elem(&process_info, &tgid)) omniprof_send_event(OMNIPROF_EVENT_EXEC, tgid);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(omniprof_exit, struct task_struct *task) {
  __u32 pid = BPF_CORE_READ(task, pid);
  __u32 tgid = BPF_CORE_READ(task, tgid);
  if (pid != tgid) return 0; /* a thread, not the process */
  if (bpf_map_lookup_elem(&process_info, &tgid)) omniprof_send_event(OMNIPROF_EVENT_EXIT, tgid);
  return 0;
}
