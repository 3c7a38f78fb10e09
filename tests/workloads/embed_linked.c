/* Workload for end-to-end tests: a C program linked with libpython3.12 that
 * runs a Python script (embed_python.h) burning CPU in embedded_hot under
 * embedded_caller for argv[1] seconds. The python plugin must find the
 * interpreter in the libpython this program maps (no python executable). */
#include <Python.h>

#include "embed_python.h"

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  char script[1024];
  embed_script(script, sizeof script, seconds);
  embed_set_home();
  Py_Initialize();
  int failed = PyRun_SimpleString(script);
  Py_Finalize();
  return failed ? 1 : 0;
}
