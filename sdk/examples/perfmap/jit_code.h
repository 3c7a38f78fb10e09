// Where a process's JIT code lives and where its perf map is: what the
// plugin tells the native walker (the ranges whose frames it marks, see
// omniprof_process_attach.interpreter_ranges in plugin.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/support/proc_maps.h"

namespace omniprof::perfmap {

// Anonymous memory: no path, or a named one ("[anon:...]"); not the
// kernel's [vdso], [vsyscall], [stack], ... which hold no JIT code.
bool anonymous(const ProcMapping& mapping);

struct CodeRange {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive
  bool operator==(const CodeRange&) const = default;
};

// The process's JIT code, as at most `max_ranges` ranges: each run of
// adjacent anonymous mappings that holds executable memory (a JIT reserves
// its code space and makes pages executable as it fills them: V8's code
// range, the JVM's code cache), whole, so code made executable later in the
// same reservation is covered too. Past `max_ranges`, the closest ranges are
// merged, never across a file-backed executable mapping (its frames are the
// native plugin's to name); what still does not fit is left out, the
// smallest first, and counted in *left_out. `maps` are sorted by start, as
// the kernel lists them (parse_proc_maps).
std::vector<CodeRange> jit_code_ranges(const std::vector<ProcMapping>& maps, size_t max_ranges,
                                       size_t* left_out);

// The pid the process has in its own pid namespace (the last NSpid field of
// /proc/PID/status text), which names its perf map; `pid` when the status
// has no NSpid line (kernels before 4.1).
int32_t namespace_pid(std::string_view status_text, int32_t pid);

// Where the process's perf map would be, most likely first: /tmp of its own
// mount namespace, named by its namespace pid, then the host's /tmp by pid.
std::vector<std::string> perf_map_candidates(int32_t pid, int32_t ns_pid);

}  // namespace omniprof::perfmap
