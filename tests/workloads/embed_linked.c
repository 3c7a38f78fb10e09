/* Workload for end-to-end tests: a C program linked with libpython (pyenv's
 * 3.12, or a Debian build: tests/workloads/CMakeLists.txt) that
 * runs a Python script (embed_python.h) burning CPU in embedded_hot under
 * embedded_caller for argv[1] seconds. The python plugin must find the
 * interpreter in the libpython this program maps (no python executable). */
#include <Python.h>

#include "embed_python.h"

static void initialize(void) { Py_Initialize(); }
static int run(const char *script) { return PyRun_SimpleString(script); }

int main(int argc, char **argv) {
  struct embedded_python python = {initialize, run, Py_Finalize};
  return embed_run(python, argc > 1 ? atof(argv[1]) : 10);
}
