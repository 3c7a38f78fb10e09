// PerfSampler: one software cpu-clock perf event per online CPU, each running
// the host's entry program. Frequency mode, so the kernel keeps the rate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/support/unique_fd.h"

struct bpf_program;
struct bpf_link;

namespace omniprof {

// Parses a CPU list such as "0-3,5,7-8" (/sys/devices/system/cpu/online).
Result<std::vector<int>> parse_cpu_list(const std::string& text);
Result<std::vector<int>> online_cpus();

class PerfSampler {
 public:
  ~PerfSampler();
  PerfSampler(PerfSampler&&) noexcept;
  PerfSampler& operator=(PerfSampler&&) = delete;
  PerfSampler(const PerfSampler&) = delete;

  static Result<PerfSampler> attach(bpf_program* entry, uint32_t frequency_hz);
  size_t cpu_count() const { return links_.size(); }

 private:
  PerfSampler() = default;
  // One link per CPU. Each owns its perf event's descriptor: libbpf closes
  // it in bpf_link__destroy, so nothing else may (a second close would take
  // whatever another thread opened under that number meanwhile).
  std::vector<bpf_link*> links_;
};

// Opens one sampling event, for the usability check and for attach().
Result<UniqueFd> open_cpu_clock_event(int cpu, uint32_t frequency_hz);

}  // namespace omniprof
