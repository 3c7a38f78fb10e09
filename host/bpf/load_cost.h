// What loading a BPF object cost the kernel: its maps created, then each of
// its programs verified and compiled. Read from the kernel's own record of
// when each program's load began (bpf_prog_info.load_time, taken just before
// the verifier runs) and the clock around bpf_object__load, so no verifier
// log is asked for: a program the verifier refuses keeps its whole log for
// the error that names it. Shown by `omniprof plugins` (the start-up's cost,
// program by program: bench/startup_cost) and logged at debug level.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"

struct bpf_object;

namespace omniprof {

struct ProgramLoadCost {
  std::string name;
  // From its load's start to the next program's (the last: to the object's
  // end): the verifier, the JIT and libbpf's few steps between two loads.
  uint64_t ns = 0;
  uint32_t verified_insns = 0;  // instructions the verifier walked; 0 before 5.16
};

struct ObjectLoadCost {
  uint64_t total_ns = 0;  // bpf_object__load, whole
  // Up to the first program's load: its maps created, BTF loaded, libbpf's
  // feature probes and relocations.
  uint64_t before_programs_ns = 0;
  std::vector<ProgramLoadCost> programs;  // in the order they loaded
};

// CLOCK_BOOTTIME in ns: the clock of bpf_prog_info.load_time.
inline uint64_t boottime_ns() { return clock_ns(CLOCK_BOOTTIME); }

// What loading `object` cost, `began` and `ended` being boottime_ns() taken
// around its bpf_object__load. Programs it did not load are left out.
ObjectLoadCost object_load_cost(bpf_object* object, uint64_t began, uint64_t ended);

// One line: "212.4 ms: maps and set-up 3.1 ms, native_unwind_loop 201.0 ms
// (412035 instructions verified)", the programs costliest first.
std::string describe_load_cost(const ObjectLoadCost& cost);

}  // namespace omniprof
