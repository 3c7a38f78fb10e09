/* What the embedded-Python workloads (embed_linked.c, embed_dlopen.c) share:
 * the script they run and how they start the interpreter. The script burns
 * CPU in embedded_hot, called by embedded_caller, for `seconds`; the profiler
 * must show both under the C program's own main. */
#ifndef OMNIPROF_EMBED_PYTHON_H
#define OMNIPROF_EMBED_PYTHON_H

#include <stdio.h>
#include <stdlib.h>

/* The pyenv build the workloads embed (PYTHON_HOME, from CMake): its
 * libpython finds its standard library there, not next to this program. */
static inline void embed_set_home(void) { setenv("PYTHONHOME", PYTHON_HOME, 1); }

/* The script, for `seconds` seconds, into `buffer`. */
static inline void embed_script(char *buffer, size_t size, double seconds) {
  snprintf(buffer, size,
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
}

#endif
