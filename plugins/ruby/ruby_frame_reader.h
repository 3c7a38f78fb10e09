// Names a Ruby frame (`Class#method`, path, line) from what the rbperf BPF
// walk recorded (rbperf.h: an iseq and a pc index, or a C function's method
// entry), reading the profiled process's memory through a callback so that
// it runs on /proc/PID/mem in the plugin and on live test processes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "omniprof/support/result.h"
#include "omniprof/interpreter_plugin.hpp"
#include "ruby_offsets_table.h"

namespace omniprof::ruby {

// Reads the target process's memory (false if any byte cannot be read:
// unmapped, the process exited).
using ReadMemory = sdk::ReadMemory;

// Where a process keeps what naming needs, found by the plugin in the ELF
// file (plus the mapping's load bias).
struct RubyProcessAddresses {
  uint64_t global_symbols = 0;  // &ruby_global_symbols (ID -> name), 0 if not found
  uint64_t vm_pointer = 0;      // &ruby_current_vm_ptr (3.2: where the shapes are), 0 if not found
};

using RubyFrameName = sdk::FrameName;

// What the walk recorded for one frame (rbperf.h).
struct RubyFrameRecord {
  uint64_t address = 0;       // rb_iseq_t, or the C function's method entry
  uint32_t detail = 0;        // pc index, or RBPERF_DETAIL_CFUNC
  uint64_t method_entry = 0;  // from ruby_frames_seen; 0 if not known
};

// Frames per (pid, address), each iseq / method entry read once. Thread-safe.
// The plugin drops a pid when it exits or execs.
class RubyFrameCache {
 public:
  explicit RubyFrameCache(std::size_t max_entries = 65536);
  ~RubyFrameCache();

  Result<RubyFrameName> name_frame(uint32_t pid, const ReadMemory& read, const RubyVersionOffsets& offsets,
                                   const RubyProcessAddresses& addresses, const RubyFrameRecord& frame);
  void drop_pid(uint32_t pid);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace omniprof::ruby
