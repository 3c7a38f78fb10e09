/* The library replaced_lib_main loads from a path the test then replaces on
 * disk (a new file renamed over it, as a package upgrade does) or deletes:
 * rl_stage -> rl_middle -> rl_leaf, all -fomit-frame-pointer, so only this
 * file's unwind table walks them. */
#include <stdint.h>

#include "workload.h"

static volatile uint64_t sink;

__attribute__((noinline)) void rl_leaf(void) {
  uint64_t x = sink;
  x = churn(x);
  sink = x;
}

__attribute__((noinline)) void rl_middle(void) {
  rl_leaf();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void rl_stage(void) {
  rl_middle();
  __asm__ volatile("" ::: "memory");
}
