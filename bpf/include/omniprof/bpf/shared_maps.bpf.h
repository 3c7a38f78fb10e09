/* The shared maps: one definition, included by the host's entry object and by
 * every unwinder object. The host creates them (its entry object loads
 * first); before an unwinder object loads, the host points each of these at
 * its own map with bpf_map__reuse_fd, so an unwinder never owns a shared map.
 * Sizes here are defaults; the host sets the real ones before load. */
#ifndef OMNIPROF_SHARED_MAPS_BPF_H
#define OMNIPROF_SHARED_MAPS_BPF_H

#include "omniprof/bpf/compat.bpf.h"
#include "omniprof/bpf/abi.h"

struct {
  __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
  __uint(max_entries, OMNIPROF_NUM_SLOTS);
  __type(key, __u32);
  __type(value, __u32);
} programs SEC(".maps");

/* (process, thread, stacks, thread name) -> samples this round. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, OMNIPROF_DEFAULT_STACK_COUNTS);
  __type(key, struct omniprof_stack_key);
  __type(value, __u64);
} stack_counts SEC(".maps");

/* The hash maps a sample writes are preallocated: older kernels' verifiers
 * refuse a perf_event program that uses a BPF_F_NO_PREALLOC hash map
 * (allocating in NMI or hard-irq context can fail), and even where it is
 * allowed, an allocation failing under memory pressure would lose samples.
 * process_info, which samples only read, is unpreallocated where the kernel
 * allows it (BpfMaps::adjust_map_sizes). */

/* (stack id, fragment index) -> 16 frames of that stack (abi.h). User,
 * interpreter and kernel stacks share it; max_entries counts fragments. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, OMNIPROF_DEFAULT_STACK_TRACES);
  __type(key, struct omniprof_stack_fragment_key);
  __type(value, struct omniprof_stack_fragment);
} stack_traces SEC(".maps");

/* pid (tgid) -> what the host knows of the process. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, OMNIPROF_DEFAULT_PROCESSES);
  __type(key, __u32);
  __type(value, struct omniprof_process_info);
} process_info SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, OMNIPROF_NUM_STATS);
  __type(key, __u32);
  __type(value, __u64);
} percpu_stats SEC(".maps");

/* The walk in progress on this CPU, handed from program to program across
 * tail calls (too large for the 512-byte BPF stack). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct omniprof_unwind_state);
} unwind_state SEC(".maps");

/* Native unwind tables (see abi.h): row shards, the rules rows point at, and
 * each executable's chunks. Written by the native plugin through the host's
 * fds.
 *
 * One shard of rows. Only a template: no map of this type exists until the
 * host creates one (create_inner_map) and puts it in unwind_shards. Every
 * shard has the template's size, so the verifier knows each inner map's
 * max_entries and inlines the row lookups as it does for a plain ARRAY (no
 * BPF_F_INNER_MAP, which 5.10 has but which would turn every row lookup into
 * a helper call). */
struct omniprof_unwind_shard_map {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, OMNIPROF_ROWS_PER_SHARD);
  /* Sizes, not BTF types: an object that never touches a row (the host's
   * entry object) gets only a forward declaration of the row struct in its
   * BTF, from which libbpf cannot size the template. */
  __uint(key_size, sizeof(__u32));
  __uint(value_size, sizeof(struct omniprof_unwind_row));
};

/* shard index -> shard. Starts empty: the memory is the inner maps', created
 * as the store needs them, up to the host's budget (max_entries is set from
 * maps.unwind_memory_mb before load). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, OMNIPROF_DEFAULT_UNWIND_MEMORY_MB);
  __type(key, __u32);
  __array(values, struct omniprof_unwind_shard_map);
} unwind_shards SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, OMNIPROF_MAX_UNWIND_RULES);
  __type(key, __u32);
  __type(value, struct omniprof_unwind_rule);
} unwind_rules SEC(".maps");

/* executable id -> its chunks. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, OMNIPROF_DEFAULT_EXECUTABLES);
  __type(key, __u64);
  __type(value, struct omniprof_executable_unwind_info);
} executable_unwind_info SEC(".maps");

static __always_inline void omniprof_count(__u32 stat) {
  __u64 *value = bpf_map_lookup_elem(&percpu_stats, &stat);
  if (value) *value += 1; /* per-CPU: no atomics needed */
}

static __always_inline void omniprof_count_n(__u32 stat, __u64 n) {
  __u64 *value = bpf_map_lookup_elem(&percpu_stats, &stat);
  if (value) *value += n;
}

/* Notifications to the host (enum omniprof_event_type). */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* OMNIPROF_EVENT_REQUEST_KEY -> time of the last request, so a busy process
 * asks for the same thing at most once per OMNIPROF_REQUEST_INTERVAL_NS
 * (or once more when the host deletes the key: BpfMaps::allow_request). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192);
  __type(key, __u64);
  __type(value, __u64);
} event_requests SEC(".maps");

#define OMNIPROF_REQUEST_INTERVAL_NS 1000000000ULL

static __always_inline void omniprof_send_event(__u32 type, __u32 pid) {
  struct omniprof_event *event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) {
    omniprof_count(OMNIPROF_STAT_EVENTS_LOST);
    return;
  }
  event->type = type;
  event->pid = pid;
  event->ktime_ns = bpf_ktime_get_ns();
  bpf_ringbuf_submit(event, 0);
}

/* A rate-limited request to the host (describe this process, re-read its
 * mappings). */
static __always_inline void omniprof_request(__u32 type, __u32 pid) {
  __u64 key = OMNIPROF_EVENT_REQUEST_KEY(type, pid);
  __u64 now = bpf_ktime_get_ns();
  __u64 *last = bpf_map_lookup_elem(&event_requests, &key);
  if (last && now - *last < OMNIPROF_REQUEST_INTERVAL_NS) return;
  bpf_map_update_elem(&event_requests, &key, &now, BPF_ANY);
  omniprof_count(OMNIPROF_STAT_PROCESS_REQUESTS);
  omniprof_send_event(type, pid);
}

static __always_inline struct omniprof_unwind_state *omniprof_state(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&unwind_state, &zero);
}

#endif /* OMNIPROF_SHARED_MAPS_BPF_H */
