/* What the embedded-Python workloads (embed_linked.c, embed_dlopen.c) share:
 * the script they run and how they run it. The script burns CPU in
 * embedded_hot, called by embedded_caller, for `seconds`; the profiler must
 * show both under the C program's own main. */
#ifndef OMNIPROF_EMBED_PYTHON_H
#define OMNIPROF_EMBED_PYTHON_H

#include <stdio.h>
#include <stdlib.h>

/* Py_Initialize, PyRun_SimpleString and Py_Finalize: linked, or found with
 * dlsym in a dlopen()ed libpython. */
struct embedded_python {
  void (*initialize)(void);
  int (*run_simple_string)(const char *);
  void (*finalize)(void);
};

/* Runs the script for `seconds` seconds; 0 when it ran without an exception. */
static inline int embed_run(struct embedded_python python, double seconds) {
  char script[1024];
  snprintf(script, sizeof script,
           "import time\n"
           "def embedded_hot(n):\n"
           "    x = 0\n"
           "    for i in range(n):\n"
           "        x = (x * 31 + i) %% 1000003\n"
           "    return x\n"
           "def embedded_caller(seconds):\n"
           "    end = time.monotonic() + seconds\n"
           "    while time.monotonic() < end:\n"
           "        embedded_hot(200000)\n"
           "embedded_caller(%f)\n",
           seconds);
  /* The build embedded (PYTHON_HOME, from CMake): its libpython finds
   * its standard library there, not next to this program. */
  setenv("PYTHONHOME", PYTHON_HOME, 1);
  python.initialize();
  int failed = python.run_simple_string(script);
  python.finalize();
  return failed ? 1 : 0;
}

#endif
