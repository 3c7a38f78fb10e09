/* What perfmap's BPF program and its user space share. */
#ifndef OMNIPROF_PERFMAP_H
#define OMNIPROF_PERFMAP_H

/* A frame's detail: its address is a return address (every frame but the
 * sampled one): see omniprof_code_address. */
#define PERFMAP_DETAIL_RETURN_ADDRESS 1u

/* Counters, in the plugin's percpu_stats range (OMNIPROF_STATS_BASE of its
 * assigned slot); kStatNames in perfmap_plugin.cpp names them in order. */
enum perfmap_stat {
  PERFMAP_STAT_WALKS = 0,     /* BPF: samples of a perf-map process handed to the plugin */
  PERFMAP_STAT_FRAMES = 1,    /* BPF: JIT frames given to the host to name */
  PERFMAP_STAT_TRUNCATED = 2, /* BPF: walks that ended with marks left (stack full, budget) */
  /* Gauges written from user space (BPF never touches them). */
  PERFMAP_STAT_MALFORMED_LINES = 3, /* perf map lines skipped as malformed, all files read */
  PERFMAP_STAT_READ_ERRORS = 4,     /* perf map reads that failed (a process that exited...) */
  PERFMAP_STAT_RANGES_LEFT_OUT = 5, /* JIT code ranges that did not fit the 4 the walker checks */
  PERFMAP_STAT_END = 6
};

#endif /* OMNIPROF_PERFMAP_H */
