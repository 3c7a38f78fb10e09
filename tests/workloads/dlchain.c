/* The library dlopen_main loads late: dl_stage -> dl_leaf. */
#include <stdint.h>

static volatile uint64_t sink;

__attribute__((noinline)) void dl_leaf(void) {
  uint64_t x = sink;
  for (int i = 0; i < 200000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  sink = x;
}

__attribute__((noinline)) void dl_stage(void) {
  dl_leaf();
  __asm__ volatile("" ::: "memory");
}
