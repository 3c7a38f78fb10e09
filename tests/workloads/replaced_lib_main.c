/* Workload for the replaced-file end-to-end test: dlopen()s the library at
 * argv[2] and burns CPU through main -> rl_stage -> rl_middle -> rl_leaf
 * for argv[1] seconds, whatever happens to the library's file meanwhile. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "workload.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SECONDS LIBRARY\n", argv[0]);
    return 2;
  }
  double seconds = atof(argv[1]);
  void *library = dlopen(argv[2], RTLD_NOW);
  if (!library) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  void (*rl_stage)(void) = (void (*)(void))dlsym(library, "rl_stage");
  if (!rl_stage) return 1;
  double end = now_seconds() + seconds;
  while (now_seconds() < end) rl_stage();
  __asm__ volatile("" ::: "memory");
  return 0;
}
