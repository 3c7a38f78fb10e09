/* Workload for end-to-end tests: starts, waits for the file argv[2] to
 * exist (the test creates it once the profiler records, so once it has read
 * this process; at most 120 s), then dlopen()s libdlchain.so and burns CPU
 * through main -> dl_stage -> dl_leaf, both in the library, for argv[1]
 * seconds. The profiler must pick up a library mapped after it read the
 * process. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  if (argc < 3) {
    fprintf(stderr, "usage: %s SECONDS FILE_TO_WAIT_FOR\n", argv[0]);
    return 2;
  }
  /* A test that died must not leave this waiting forever. */
  for (int i = 0; access(argv[2], F_OK) != 0; i++) {
    if (i == 2400) {
      fprintf(stderr, "%s never appeared\n", argv[2]);
      return 1;
    }
    usleep(50000);
  }
  void *library = dlopen(DLCHAIN_PATH, RTLD_NOW);
  if (!library) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  void (*dl_stage)(void) = (void (*)(void))dlsym(library, "dl_stage");
  double end = now_seconds() + seconds;
  while (now_seconds() < end) dl_stage();
  __asm__ volatile("" ::: "memory");
  return 0;
}
