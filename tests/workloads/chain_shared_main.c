/* chain.c with one link in a shared library: main -> stage_a -> stage_b
 * (libchainlink.so) -> stage_c -> leaf. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

volatile uint64_t sink;
void stage_b(void); /* in libchainlink.so */

__attribute__((noinline)) void leaf(void) {
  uint64_t x = sink;
  for (int i = 0; i < 200000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  sink = x;
}
__attribute__((noinline)) void stage_c(void) { leaf(); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void stage_a(void) { stage_b(); __asm__ volatile("" ::: "memory"); }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  double end = now() + (argc > 1 ? atof(argv[1]) : 10);
  while (now() < end) stage_a();
  return 0;
}
