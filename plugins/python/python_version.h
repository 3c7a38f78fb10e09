// The exact CPython version of a python executable or libpython, read from
// its ELF file (stripped or not).
#pragma once

#include <string>

#include "omniprof/offsets.hpp"
#include "omniprof/support/elf_file.h"
#include "omniprof/support/result.h"

namespace omniprof::python {

// MAJOR.MINOR.PATCH (PATCH: CPython's "micro"), and how it was found:
// "Py_Version" (3.11+: the PY_VERSION_HEX constant behind that symbol) or
// "PY_VERSION string" (a "3.9.18" string in .rodata).
struct PythonVersion : sdk::RuntimeVersion {
  std::string source;
};

// 3.11+: the value of the `Py_Version` symbol (a const unsigned long
// PY_VERSION_HEX, read from the file at the symbol's address). Older: the
// NUL-terminated PY_VERSION string ("3.9.18", "2.7.18+") in .rodata whose
// MAJOR.MINOR matches what the file name says (python3.9, libpython3.9.so.1.0)
// or, for a renamed file, the only MAJOR.MINOR such strings agree on with the
// ABI the exported symbols show (PyString_* for 2.x, PyUnicode_* for 3.x).
// Errors name the file and why (no Python symbols, no version string,
// ambiguous strings).
Result<PythonVersion> read_python_version(const std::string& path);
// The same, on a file already open (the plugin reads its symbols too).
Result<PythonVersion> read_python_version(const ElfFile& elf);

}  // namespace omniprof::python
