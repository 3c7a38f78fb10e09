/* Workload for end-to-end tests: spends its time reading the clock, which
 * the kernel serves from the [vdso] (no system call), through a known chain
 * main -> read_clock. Runs for argv[1] seconds. The [vdso] is in no file on
 * disk: its unwind table must come from the process's own image. */
#include <stdlib.h>
#include <time.h>

static volatile long sink;

__attribute__((noinline)) void read_clock(double end) {
  struct timespec ts;
  do {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sink += ts.tv_nsec;
  } while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  read_clock(ts.tv_sec + ts.tv_nsec / 1e9 + (argc > 1 ? atof(argv[1]) : 10));
  return 0;
}
