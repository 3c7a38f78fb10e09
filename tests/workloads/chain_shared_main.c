/* chain.c with one link in a shared library: main -> stage_a -> stage_b
 * (libchainlink.so) -> stage_c -> leaf. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "workload.h"

volatile uint64_t sink;
void stage_b(void); /* in libchainlink.so */

__attribute__((noinline)) void leaf(void) {
  uint64_t x = sink;
  x = churn(x);
  sink = x;
}
__attribute__((noinline)) void stage_c(void) { leaf(); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void stage_a(void) { stage_b(); __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv) {
  double end = now_seconds() + (argc > 1 ? atof(argv[1]) : 10);
  while (now_seconds() < end) stage_a();
  return 0;
}
