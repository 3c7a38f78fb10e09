// The shipped CPython offsets (offsets/python.yaml) as the structs the plugin
// uses: struct python_offsets for the BPF map, PythonReaderOffsets for the
// user-space code object reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/offsets.hpp"
#include "python_offsets.h"

namespace omniprof::python {

// Offsets the user-space reader needs (bytes from the start of the named
// struct; -1: the version has no such field). Keys of the same name in the YAML.
struct PythonReaderOffsets {
  int64_t co_filename = -1;
  int64_t co_name = -1;
  int64_t co_qualname = -1;  // 3.11+
  int64_t co_firstlineno = -1;
  int64_t co_lnotab = -1;     // up to 3.9
  int64_t co_linetable = -1;  // 3.10+
  int64_t co_code = -1;       // up to 3.10
  int64_t unicode_state = -1;
  int64_t unicode_length = -1;
  int64_t unicode_ascii_data = -1;
  int64_t unicode_compact_data = -1;
  int64_t unicode_kind_bit = -1;
  int64_t unicode_compact_bit = -1;
  int64_t unicode_ascii_bit = -1;
  int64_t bytes_size = -1;
  int64_t bytes_data = -1;
  int64_t string_size = -1;                    // 2.7
  int64_t string_data = -1;                    // 2.7
  int64_t runtime_interpreters_head = -1;      // 3.7+
  int64_t runtime_ceval_gil_locked = -1;       // 3.7 to 3.11
  int64_t runtime_ceval_gil_last_holder = -1;  // 3.7 to 3.11
  int64_t debug_offsets_size = -1;             // sizeof(_Py_DebugOffsets), 3.13+
};

// Everything known about one minor version: an entry of offsets/python.yaml.
// Entries are per minor version (patch -1): the BPF map has one slot per minor.
using PythonVersionOffsets = sdk::VersionOffsets<python_offsets, PythonReaderOffsets>;

// offsets/python.yaml's keys, named as the fields of the two structs, and
// its checks (one entry per minor version, whose version_hex is that
// version's). Loading throws omniprof::sdk::OffsetError naming the file, the
// version and the key (the plugin's create hook catches it).
extern const sdk::OffsetSchema<PythonVersionOffsets> kPythonOffsetSchema;

// Sets offsets.bpf.code_names from the reader's co_filename and co_name
// (python_offsets.h): call it once the offsets are final (after
// _Py_DebugOffsets), before they go to the BPF map.
void set_code_names(PythonVersionOffsets& offsets);
using PythonOffsetsTable = sdk::BoundOffsetTable<PythonVersionOffsets, kPythonOffsetSchema>;

}  // namespace omniprof::python
