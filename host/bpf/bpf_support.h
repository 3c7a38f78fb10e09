// Checks, before anything is loaded, that this machine can run omniprof, and
// says in one line what is missing and what to do.
#pragma once

#include "omniprof/support/result.h"

namespace omniprof {

// Root (or CAP_BPF + CAP_PERFMON), kernel BTF, perf_event BPF programs and a
// cpu-clock perf event. The error is one line naming the missing piece.
Result<void> check_bpf_usable();

// Routes libbpf's messages to the host logger, and keeps the last lines of a
// failed load (the verifier's verdict) for the error that names the plugin.
void install_libbpf_logging();
std::string take_libbpf_log_tail(size_t max_lines);

}  // namespace omniprof
