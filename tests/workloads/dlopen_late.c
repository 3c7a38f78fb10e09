/* Workload of the late-dlopen tests (tests/e2e/early_samples_test.cpp): a
 * process that maps a library long after it started and calls into it at
 * once. It waits for GO_FILE if one is given (at most 120 s), sleeps
 * DELAY_MS, then dlopen()s libdlchain.so (loaded by no other process of those
 * tests) and calls its dl_burn_for right away, from call_late_library, for
 * CPU_SECONDS of its own CPU time: dl_leaf <- dl_stage <- dl_burn_for (the
 * library) <- call_late_library <- main (this program). Its thread is named
 * "dl_late_hot" from just after dlopen to the end of that call (the label
 * thread_name of those samples, read by BPF from the kernel). Writes to
 * GAP_FILE the seconds from just before dlopen to the call into the library.
 *
 *   dlopen_late_nofp DELAY_MS CPU_SECONDS GAP_FILE [GO_FILE] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "workload.h"

static double gap_seconds;

__attribute__((noinline)) void call_late_library(void (*burn)(double), double seconds, double since) {
  gap_seconds = now_seconds() - since;
  burn(seconds);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: %s DELAY_MS CPU_SECONDS GAP_FILE [GO_FILE]\n", argv[0]);
    return 2;
  }
  /* A test that died must not leave this waiting forever. */
  for (int i = 0; argc == 5 && access(argv[4], F_OK) != 0; i++) {
    if (i == 2400) {
      fprintf(stderr, "%s never appeared\n", argv[4]);
      return 1;
    }
    usleep(50000);
  }
  usleep((useconds_t)atoi(argv[1]) * 1000);
  double before = now_seconds();
  void *library = dlopen(DLCHAIN_PATH, RTLD_NOW);
  if (!library) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  void (*dl_burn_for)(double) = (void (*)(double))dlsym(library, "dl_burn_for");
  if (!dl_burn_for) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  prctl(PR_SET_NAME, "dl_late_hot");
  call_late_library(dl_burn_for, atof(argv[2]), before);
  prctl(PR_SET_NAME, "dl_late_end");
  FILE *gap = fopen(argv[3], "w");
  if (!gap) return 1;
  fprintf(gap, "%.9f\n", gap_seconds);
  return fclose(gap) == 0 ? 0 : 1;
}
