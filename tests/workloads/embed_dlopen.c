/* Workload for end-to-end tests: a C program that dlopen()s libpython (as
 * embed_linked.c, one per build)
 * late, once the profiler has described it, then runs the script of
 * embed_python.h through Py_Initialize/PyRun_SimpleString found with dlsym.
 * argv[1]: seconds of Python; argv[2] (optional): a file to wait for before
 * the delay (the test creates it once omniprof samples); argv[3]: the delay,
 * 1.5 s by default. The host must notice the new mapping (the native walk
 * meets pcs outside the known mappings) and ask the plugins again. */
#include <dlfcn.h>
#include <unistd.h>

#include "embed_python.h"

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  const char *wait_for = argc > 2 ? argv[2] : NULL;
  double delay = argc > 3 ? atof(argv[3]) : 1.5;
  /* At most 120 s: a test that died must not leave this waiting forever. */
  for (int i = 0; wait_for && access(wait_for, F_OK) != 0 && i < 2400; i++) usleep(50000);
  usleep((useconds_t)(delay * 1e6));
  void *python = dlopen(LIBPYTHON_PATH, RTLD_NOW | RTLD_GLOBAL);
  if (!python) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  struct embedded_python embedded = {
      (void (*)(void))dlsym(python, "Py_Initialize"),
      (int (*)(const char *))dlsym(python, "PyRun_SimpleString"),
      (void (*)(void))dlsym(python, "Py_Finalize"),
  };
  if (!embedded.initialize || !embedded.run_simple_string || !embedded.finalize) {
    fprintf(stderr, "%s: no Py_Initialize/PyRun_SimpleString/Py_Finalize\n", LIBPYTHON_PATH);
    return 1;
  }
  return embed_run(embedded, seconds);
}
