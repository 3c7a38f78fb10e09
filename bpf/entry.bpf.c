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
/* Whether omniprof_stop writes each sample's time to sample_times. */
const volatile __u8 record_sample_times = 0;

/* Each counted sample's time and key (struct omniprof_sample_time), when
 * record_sample_times is set; the host sizes it for a few seconds of samples
 * at the sampling rate and reads it at every drain. Left at one page when
 * unused. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4096);
} sample_times SEC(".maps");

/* -p PID...: the processes to keep when filter_pids is set (SetDebugPIDs). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1024);
  __type(key, __u32);
  __type(value, __u8);
} pid_filter SEC(".maps");

/* What BPF added to the maps a drain empties, and when the host wants to
 * look (struct omniprof_drain_thresholds, abi.h). One entry each, shared by
 * every CPU: an addition is a new key or fragment (a sample time only when
 * they are recorded), rare next to samples, so the atomic add costs little. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct omniprof_inflow_totals);
} inflow_totals SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct omniprof_drain_thresholds);
} drain_thresholds SEC(".maps");

/* OMNIPROF_EVENT_DRAIN_DUE goes on a ring of its own, which `run`'s main
 * thread (the one that drains) waits on: not on `events`, whose reader, the
 * event thread, may be seconds into describing processes when the maps fill
 * (a busy start-up), while the drain it would wake must come within the
 * three quarters of room left. At most a few records unread at once (one per
 * arming, two when CPUs race): one page. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4096);
} drain_due SEC(".maps");

/* Adds `n` to the total of `kind` and, past the host's threshold, asks it to
 * look (once: it arms the threshold again after its look). Two CPUs passing
 * it at once may both send; the host takes the second as one more look. The
 * add's result is not used: 5.10 has no fetching atomics. Not sent (ring
 * full, counted as EVENTS_LOST): armed stays set, and the next addition
 * tries again. */
static __always_inline void note_inflow(__u32 kind, __u64 n) {
  __u32 zero = 0;
  struct omniprof_inflow_totals *totals = bpf_map_lookup_elem(&inflow_totals, &zero);
  struct omniprof_drain_thresholds *thresholds = bpf_map_lookup_elem(&drain_thresholds, &zero);
  if (!totals || !thresholds) return;
  kind &= OMNIPROF_INFLOW_KINDS - 1;
  __sync_fetch_and_add(&totals->added[kind], n);
  if (!thresholds->armed || totals->added[kind] < thresholds->at[kind]) return;
  struct omniprof_event event = {.type = OMNIPROF_EVENT_DRAIN_DUE, .ktime_ns = bpf_ktime_get_ns()};
  if (bpf_ringbuf_output(&drain_due, &event, sizeof(event), 0) == 0) {
    thresholds->armed = 0;
  } else {
    omniprof_count(OMNIPROF_STAT_EVENTS_LOST);
  }
}

/* murmur3's 64-bit finalizer: spreads every input bit over the hash. */
static __always_inline __u64 mix64(__u64 h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

/* Stores the first `len` frames of `frames` under the hash of their contents
 * and returns that id. A stack is stored as fragments of
 * OMNIPROF_FRAGMENT_FRAMES frames (stack_traces is keyed by (id, index)), so
 * it costs the room of the frames it has. Fragment 0 is written last: once
 * it is there, the whole stack is. A stack that cannot be stored (map full)
 * keeps its sample, as OMNIPROF_STACK_ID_LOST; fragments of it already
 * written are dropped by the host with the other unreferenced ones.
 * `frames` points into the per-CPU state (a map value), whose fragments can
 * be handed to the map update directly. */
static __always_inline __u64 store_stack(struct omniprof_frame *frames, __u32 len) {
  if (len > OMNIPROF_MAX_STACK_DEPTH) len = OMNIPROF_MAX_STACK_DEPTH;
  __u64 hash = mix64(len);
  for (int i = 0; i < OMNIPROF_MAX_STACK_DEPTH; i++) {
    if (i >= len) break;
    struct omniprof_frame *frame = &frames[i];
    hash = mix64(hash ^ frame->address);
    hash += ((__u64)frame->detail << 32) | ((__u64)frame->kind << 24) | ((__u64)frame->flags << 16) | frame->after;
  }
  if (hash <= OMNIPROF_STACK_ID_LOST) hash += 2;
  struct omniprof_stack_fragment_key key = {.stack_id = hash, .index = 0, .reserved = 0};
  /* The same stack is already stored: the common case. */
  if (bpf_map_lookup_elem(&stack_traces, &key)) return hash;
  __u32 fragments = (len + OMNIPROF_FRAGMENT_FRAMES - 1) / OMNIPROF_FRAGMENT_FRAMES;
  for (int i = OMNIPROF_MAX_FRAGMENTS - 1; i >= 0; i--) {
    if (i >= fragments) continue;
    key.index = i;
    /* The last fragment's unused frames carry whatever the buffer held: the
     * host reads only `len` frames. */
    struct omniprof_stack_fragment *fragment =
        (struct omniprof_stack_fragment *)&frames[(i & (OMNIPROF_MAX_FRAGMENTS - 1)) * OMNIPROF_FRAGMENT_FRAMES];
    if (bpf_map_update_elem(&stack_traces, &key, fragment, BPF_ANY) != 0) {
      omniprof_count(OMNIPROF_STAT_STACK_TRACES_FULL);
      /* Those written before stay until the host sweeps them. */
      omniprof_count_n(OMNIPROF_STAT_FRAGMENTS_STORED, fragments - 1 - i);
      note_inflow(OMNIPROF_INFLOW_FRAGMENTS, fragments - 1 - i);
      return OMNIPROF_STACK_ID_LOST;
    }
  }
  omniprof_count_n(OMNIPROF_STAT_FRAGMENTS_STORED, fragments);
  note_inflow(OMNIPROF_INFLOW_FRAGMENTS, fragments);
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
  state->num_marks = 0;
  state->native_frames = 0;
  __builtin_memset(state->interpreter_walk, 0, sizeof(state->interpreter_walk));
  state->key.pid = tgid;
  state->key.tid = tid;
  state->key.user_stack_id = OMNIPROF_STACK_ID_NONE;
  state->key.kernel_stack_id = OMNIPROF_STACK_ID_NONE;
  state->key.user_stack_len = 0;
  state->key.kernel_stack_len = 0;
  state->key.label_slot = 0;
  state->key.label_value = 0;
  state->key.reserved = 0;
  __builtin_memset(state->key.thread_name, 0, sizeof(state->key.thread_name));
  bpf_get_current_comm(state->key.thread_name, sizeof(state->key.thread_name));

  /* Kernel frames first, through the state's buffers (the BPF stack is too
   * small for them), then the frame buffer is reset for the user walk. */
  /* An int: see omniprof_helper_errno (compat.bpf.h). */
  int bytes = omniprof_helper_errno(bpf_get_stack(ctx, state->kernel_ips, sizeof(state->kernel_ips), 0));
  if (bytes < 0) {
    omniprof_count(OMNIPROF_STAT_KERNEL_STACK_ERROR);
  } else if (bytes > 0) {
    __u32 len = bytes / sizeof(__u64);
    for (int i = 0; i < OMNIPROF_MAX_KERNEL_DEPTH; i++) {
      if (i >= len) break;
      struct omniprof_frame *frame = &state->stack.frames[i];
      frame->address = state->kernel_ips[i];
      frame->detail = 0;
      frame->kind = OMNIPROF_FRAME_KERNEL;
      frame->flags = 0;
      frame->after = 0;
    }
    if (len > OMNIPROF_MAX_KERNEL_DEPTH) len = OMNIPROF_MAX_KERNEL_DEPTH;
    state->key.kernel_stack_len = len;
    state->key.kernel_stack_id = store_stack(state->stack.frames, len);
  }
  state->stack.len = 0;

  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  if (BPF_CORE_READ(task, flags) & OMNIPROF_PF_KTHREAD) {
    omniprof_stop_walk(ctx, state, OMNIPROF_STAT_KERNEL_THREAD);
    return 0;
  }
  /* No user memory to walk either: a process past exit_mm (mm NULL), or in
   * execve after the new image's mm replaced the old one and before
   * load_elf_binary sets end_code, just ahead of the new image's first
   * instruction (mm_alloc zeroes it; the stack's fields are set earlier,
   * before the image is mapped). The registers saved at the system
   * call are the old image's, in an address space that no longer exists:
   * walked, they would stop at once or, named against the new image's
   * mappings, give frames that never ran. */
  struct mm_struct *mm = BPF_CORE_READ(task, mm);
  if (!mm || !BPF_CORE_READ(mm, end_code)) {
    omniprof_stop_walk(ctx, state, OMNIPROF_STAT_USER_MEMORY_GONE);
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

/* After the count, so a time never names a sample that was not counted; the
 * host matches times to counts by key (agent/round_samples.h). */
static __always_inline void record_time(const struct omniprof_unwind_state *state) {
  if (!record_sample_times) return;
  note_inflow(OMNIPROF_INFLOW_SAMPLE_TIMES, 1);
  struct omniprof_sample_time *record = bpf_ringbuf_reserve(&sample_times, sizeof(*record), 0);
  if (!record) {
    omniprof_count(OMNIPROF_STAT_SAMPLE_TIMES_LOST);
    return;
  }
  record->ktime_ns = bpf_ktime_get_ns();
  record->key = state->key;
  bpf_ringbuf_submit(record, 0);
}

SEC("perf_event")
int omniprof_stop(struct bpf_perf_event_data *ctx) {
  struct omniprof_unwind_state *state = omniprof_state();
  if (!state) {
    omniprof_count(OMNIPROF_STAT_STATE_MISSING);
    return 0;
  }
  if (state->stop_reason) omniprof_count(state->stop_reason);
  if (state->walk_flags & OMNIPROF_WALK_NOTED_NEW) omniprof_send_event(OMNIPROF_EVENT_TICK_DUE, state->key.pid);
  __u32 len = state->stack.len;
  if (len > 0) {
    if (len >= OMNIPROF_MAX_STACK_DEPTH) {
      len = OMNIPROF_MAX_STACK_DEPTH;
      omniprof_count(OMNIPROF_STAT_STACK_TRUNCATED);
    }
    state->key.user_stack_len = len;
    state->key.user_stack_id = store_stack(state->stack.frames, len);
  }

  __u64 *count = bpf_map_lookup_elem(&stack_counts, &state->key);
  if (!count) {
    __u64 one = 1;
    if (bpf_map_update_elem(&stack_counts, &state->key, &one, BPF_NOEXIST) == 0) {
      omniprof_count(OMNIPROF_STAT_COUNT_KEYS_ADDED);
      omniprof_count(OMNIPROF_STAT_RECORDED);
      note_inflow(OMNIPROF_INFLOW_COUNT_KEYS, 1);
      record_time(state);
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
  record_time(state);
  return 0;
}

struct linux_binprm;

SEC("tp_btf/sched_process_exec")
int BPF_PROG(omniprof_exec, struct task_struct *task, int old_pid, struct linux_binprm *bprm) {
  __u32 tgid = BPF_CORE_READ(task, tgid);
  if (bpf_map_lookup_elem(&process_info, &tgid)) omniprof_send_event(OMNIPROF_EVENT_EXEC, tgid);
  return 0;
}

/* A new process starts with its parent's mappings, so with its parent's
 * entry: copied here, at the fork, its samples walk whole before the host
 * has read the fork's record (ProcessTracker::apply_records then writes
 * the child only if the entry copied was not the parent's latest). A
 * thread shares its process's entry. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(omniprof_fork, struct task_struct *parent, struct task_struct *child) {
  __u32 child_pid = BPF_CORE_READ(child, pid);
  __u32 child_tgid = BPF_CORE_READ(child, tgid);
  if (child_pid != child_tgid) return 0;
  __u32 parent_tgid = BPF_CORE_READ(parent, tgid);
  struct omniprof_process_info *info = bpf_map_lookup_elem(&process_info, &parent_tgid);
  if (!info) return 0;
  if (bpf_map_update_elem(&process_info, &child_tgid, info, BPF_ANY) != 0) {
    omniprof_count(OMNIPROF_STAT_FORK_COPY_FAILED);
  }
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
