/* A C function Python calls through ctypes (python_mixed.py): spins for MS
 * milliseconds of CPU time. Its frames must show above the Python frame that
 * called it. */
#include <time.h>

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) long burn_cpu(int ms) {
  double end = cpu_seconds() + ms / 1000.0;
  volatile long total = 0;
  while (cpu_seconds() < end) {
    for (int i = 0; i < 10000; ++i) total += i & 7;
  }
  return total;
}
