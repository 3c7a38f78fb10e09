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

// Everything known about one minor version (an entry of offsets/python.yaml,
// bound by sdk::BoundOffsetTable).
struct PythonVersionOffsets {
  int major = 0;
  int minor = 0;
  int patch = -1;  // always -1: entries are per minor version (the BPF map has one slot per minor)
  python_offsets bpf{};
  PythonReaderOffsets reader;

  static constexpr const char* kRuntime = "python";
  static const sdk::OffsetBinding<PythonVersionOffsets>& binding();
  // One entry per minor version, whose version_hex is that version's.
  static void check(PythonVersionOffsets& offsets, const std::string& where);
};

// Throws omniprof::sdk::OffsetError naming the file, the version and the key
// for a missing, unknown or out-of-range key (the plugin's create hook
// catches it, see sdk/include/omniprof/offsets.hpp).
using PythonOffsetsTable = sdk::BoundOffsetTable<PythonVersionOffsets>;

// The YAML keys, in the order of the structs: every one is required in every
// version entry (-1 where absent), and no other key is accepted.
std::vector<std::string_view> python_offset_keys();
// The value of `key` in `offsets` (-1 for PYTHON_OFFSET_NONE), for tests and
// logging; throws std::out_of_range for a key not in python_offset_keys().
int64_t python_offset_value(const PythonVersionOffsets& offsets, std::string_view key);
// Sets `key`; false if the value does not fit the field (a u16 offset, the u8 models).
bool set_python_offset(PythonVersionOffsets& offsets, std::string_view key, int64_t value);

}  // namespace omniprof::python
