/* The library dlopen_main loads late: dl_stage -> dl_leaf. */
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
