/* Workload for end-to-end tests: starts, waits argv[2] seconds (default 1),
 * then dlopen()s libdlchain.so and burns CPU through
 * main -> dl_stage -> dl_leaf, both in the library, for argv[1] seconds. The
 * profiler must pick up a library mapped after it read the process. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  double delay = argc > 2 ? atof(argv[2]) : 1;
  usleep((useconds_t)(delay * 1e6));
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
