// What omniprof asks of the kernel and of libbpf: whether this machine can
// run omniprof at all (checked before anything is loaded, with one line
// saying what is missing and what to do), which optional program features
// it has, libbpf's messages, and the constants of a BPF object set before
// it loads.
#pragma once

#include <cstdint>
#include <string>

#include "omniprof/support/result.h"

struct bpf_object;

namespace omniprof {

// Root (or CAP_BPF + CAP_PERFMON), kernel BTF, perf_event BPF programs and a
// cpu-clock perf event. The error is one line naming the missing piece.
Result<void> check_bpf_usable();

// Routes libbpf's messages to the host logger, and keeps the last lines of a
// failed load (the verifier's verdict) for the error that names the plugin.
void install_libbpf_logging();
std::string take_libbpf_log_tail(size_t max_lines);

// The OMNIPROF_PROGRAM_NEEDS_* features the running kernel has, probed once.
// OMNIPROF_HIDE_BPF_FEATURES=bpf_loop makes the host act as on a kernel
// without them (5.10 to 5.16): the tests load the fallback programs on any
// kernel that way.
uint32_t kernel_features();
// Whether OMNIPROF_HIDE_BPF_FEATURES names `feature` (also "process_records":
// the host acts as on a kernel without perf's process records).
bool kernel_feature_hidden(const char* feature);

// Whether perf_event programs may use a BPF_F_NO_PREALLOC hash map (the
// verifier refuses them before 6.x: an element freed while a sample's
// program holds it), probed once by loading one that does;
// OMNIPROF_HIDE_BPF_FEATURES=unpreallocated_maps says no.
bool perf_event_programs_take_unpreallocated_maps();

// Finds a `const volatile` global in an object's .rodata through BTF and sets
// it before load (how third-party unwinders learn their assigned slot).
// False when the object has no such 4-byte variable.
bool set_rodata_u32(bpf_object* object, const char* variable, uint32_t value);

}  // namespace omniprof
