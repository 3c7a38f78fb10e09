// Names a Python frame (function, file, line) from the code object the BPF
// walk recorded, reading the profiled process's memory through a callback so
// that it runs on /proc/PID/mem in the plugin and on byte buffers in tests.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include "omniprof/support/result.h"
#include <string>
#include <utility>
#include <vector>

#include "pyperf.h"
#include "python_line_table.h"
#include "omniprof/interpreter_plugin.hpp"
#include "python_offsets_table.h"

namespace omniprof::python {

// Reads the target process's memory (false if any byte cannot be read:
// unmapped, the process exited).
using ReadMemory = sdk::ReadMemory;

// Bounds on what a code object may claim, so garbage costs one failed read.
inline constexpr std::size_t kMaxPythonStringChars = 4096;
inline constexpr std::size_t kMaxLineTableBytes = 1 << 20;

// What the reader keeps per code object: read once, then every sample of it
// is a line table lookup.
struct PythonCodeInfo {
  std::string function;  // co_qualname on 3.11+ ("Class.method"), co_name before
  std::string name;      // co_name
  std::string file;      // co_filename
  int first_line = 0;    // co_firstlineno
  LineTableFormat format = LineTableFormat::kLocations311;
  std::vector<uint8_t> line_table;  // co_lnotab (up to 3.9) / co_linetable (3.10+)
  // Bytes of co_code (up to 3.10): co_lnotab gives every offset past the last
  // entry the last line, so offsets past the code are told apart here. 0: not
  // read (3.11+, whose table ends with the code).
  uint64_t code_bytes = 0;
  // pyperf_code_tag of its co_filename and co_name pointers: what the walk
  // tags the frame's code value with (pyperf.h).
  uint64_t tag = 0;
};

using PythonFrameName = sdk::FrameName;

// A Python str object's text as UTF-8: a compact PyUnicode (3.x: ASCII or
// UCS1/2/4) or, on 2.7, a PyStringObject (bytes, returned as they are).
Result<std::string> read_python_string(const ReadMemory& read, const PythonVersionOffsets& offsets,
                                       uint64_t address);

// The code object at `code_address`: names, file, first line and line table.
Result<PythonCodeInfo> read_code_object(const ReadMemory& read, const PythonVersionOffsets& offsets,
                                        uint64_t code_address);

// The frame's name from a decoded code object and the instruction offset.
PythonFrameName name_frame(const PythonCodeInfo& code, uint32_t instruction_offset);

// Code objects per (pid, code value), each read once. Thread-safe. The code
// value is the frame's: the address, tagged by the walk with the code
// object's names (PYPERF_CODE_TAG_SHIFT), so a code object freed and another
// allocated at its address are two entries; a tagged code object whose
// memory no longer carries its tag when read is an error, never another's
// name. The plugin drops a pid when it exits or execs.
class PythonCodeCache {
 public:
  explicit PythonCodeCache(std::size_t max_entries = 65536) : max_entries_(max_entries) {}

  Result<PythonFrameName> name_frame(uint32_t pid, const ReadMemory& read,
                                     const PythonVersionOffsets& offsets, uint64_t code_value,
                                     uint32_t instruction_offset);
  void drop_pid(uint32_t pid);

  std::size_t size() const;
  // Code objects read from memory (cache misses that succeeded or failed).
  uint64_t reads() const;
  // Times the cache was full and emptied to make room.
  uint64_t evictions() const;
  // Reads that found another code object than the sampled one at its
  // address (named "[unknown python]", not by the newcomer's name).
  uint64_t replaced() const;

 private:
  mutable std::mutex mutex_;
  std::size_t max_entries_;
  std::map<std::pair<uint32_t, uint64_t>, std::shared_ptr<const PythonCodeInfo>> entries_;
  uint64_t reads_ = 0;
  uint64_t evictions_ = 0;
  uint64_t replaced_ = 0;
};

}  // namespace omniprof::python
