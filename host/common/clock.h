// A clock read as one count of nanoseconds. CLOCK_MONOTONIC is the clock of
// BPF's times (bpf_ktime_get_ns) and of the kernel's process records, so the
// host's times compared with theirs are read on it too.
#pragma once

#include <time.h>

#include <cstdint>

namespace omniprof {

inline uint64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t monotonic_ns() { return clock_ns(CLOCK_MONOTONIC); }

}  // namespace omniprof
