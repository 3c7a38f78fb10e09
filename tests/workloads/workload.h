/* What the end-to-end workloads share: a monotonic clock in seconds, the
 * thread's CPU clock, and the CPU-burning loop their hot functions run
 * (inlined, so the hot function, not a helper, is the sampled frame). */
#ifndef OMNIPROF_WORKLOAD_H
#define OMNIPROF_WORKLOAD_H

#include <stdint.h>
#include <time.h>

static inline double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The calling thread's own CPU time in seconds: a workload that must give
 * the profiler a number of samples burns CPU time, not wall time. */
static inline double thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) uint64_t churn(uint64_t x) {
  for (int i = 0; i < 200000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

#endif
