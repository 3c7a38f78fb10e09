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

/* stack id (hash of the frames) -> frames. User, interpreter and kernel
 * stacks share it. Not preallocated: most rounds use a fraction of it. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, OMNIPROF_DEFAULT_STACK_TRACES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, __u64);
  __type(value, struct omniprof_stack);
} stack_traces SEC(".maps");

/* pid (tgid) -> what the host knows of the process. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, OMNIPROF_DEFAULT_PROCESSES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
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

static __always_inline void omniprof_count(__u32 stat) {
  __u64 *value = bpf_map_lookup_elem(&percpu_stats, &stat);
  if (value) *value += 1; /* per-CPU: no atomics needed */
}

static __always_inline void omniprof_count_n(__u32 stat, __u64 n) {
  __u64 *value = bpf_map_lookup_elem(&percpu_stats, &stat);
  if (value) *value += n;
}

static __always_inline struct omniprof_unwind_state *omniprof_state(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&unwind_state, &zero);
}

#endif /* OMNIPROF_SHARED_MAPS_BPF_H */
