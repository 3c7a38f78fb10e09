/* Workload for end-to-end tests: burns CPU for argv[1] seconds, renaming its
 * thread between bursts of a fraction of a millisecond ("name0", "name1",
 * ...). The thread's name is part of a sample's stack_counts key, so
 * nearly every sample adds a key of its own: the map fills as fast as the
 * process is sampled (the drain schedule's test, tests/e2e/stack_drain_test.cpp). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "workload.h"

static volatile uint64_t sink;

__attribute__((noinline)) void burn(void) {
  uint64_t x = sink;
  x = churn(x);
  sink = x;
}

int main(int argc, char **argv) {
  const double end = now_seconds() + (argc > 1 ? atof(argv[1]) : 10);
  char name[16];
  for (unsigned long n = 0; now_seconds() < end; ++n) {
    snprintf(name, sizeof(name), "name%lu", n % 100000000UL);
    prctl(PR_SET_NAME, name, 0, 0, 0);
    burn();
  }
  return 0;
}
