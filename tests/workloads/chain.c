/* Workload for end-to-end tests: burns CPU in leaf(), always reached through
 * main -> stage_a -> stage_b -> stage_c -> leaf. Runs for argv[1] seconds
 * (default 10). noinline keeps every link a real frame at -O2. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "workload.h"

static volatile uint64_t sink;

__attribute__((noinline)) uint64_t seed(void) { return sink; }

/* leaf() starts with a call so that the compiler sets up its frame before the
 * hot loop: GCC 12 drops the frame pointer of leaf functions even with
 * -mno-omit-leaf-frame-pointer, and shrink-wrapping would place the prologue
 * only before a call that came after the loop. A frame-pointer walk from a
 * frameless function skips its caller. */
__attribute__((noinline)) void leaf(void) {
  uint64_t x = seed();
  x = churn(x);
  sink = x;
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void stage_c(void) { leaf(); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void stage_b(void) { stage_c(); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void stage_a(void) { stage_b(); __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  double end = now_seconds() + seconds;
  while (now_seconds() < end) stage_a();
  return 0;
}
