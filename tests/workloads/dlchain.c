/* The library dlopen_main and dlopen_late load late: dl_stage -> dl_leaf,
 * and dl_burn_for, which runs them for a given CPU time. */
#include <stdint.h>

#include "workload.h"

static volatile uint64_t sink;

__attribute__((noinline)) void dl_leaf(void) {
  uint64_t x = sink;
  x = churn(x);
  sink = x;
}

__attribute__((noinline)) void dl_stage(void) {
  dl_leaf();
  __asm__ volatile("" ::: "memory");
}

/* What dlopen_late calls at once after loading the library: dl_stage over
 * and over until the calling thread has used SECONDS more CPU time. */
__attribute__((noinline)) void dl_burn_for(double seconds) {
  double until = thread_cpu_seconds() + seconds;
  while (thread_cpu_seconds() < until) dl_stage();
  __asm__ volatile("" ::: "memory");
}
