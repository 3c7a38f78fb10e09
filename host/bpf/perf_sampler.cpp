#include "bpf/perf_sampler.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace omniprof {

Result<std::vector<int>> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    while (!part.empty() && isspace(static_cast<unsigned char>(part.back()))) part.pop_back();
    if (part.empty()) continue;
    int first = 0, last = 0;
    char dash = 0;
    std::istringstream ps(part);
    if (!(ps >> first)) return make_error(fmt::format("bad CPU list entry '{}'", part));
    last = first;
    if (ps >> dash) {
      if (dash != '-' || !(ps >> last) || last < first) {
        return make_error(fmt::format("bad CPU range '{}'", part));
      }
    }
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  if (cpus.empty()) return make_error(fmt::format("empty CPU list '{}'", text));
  return cpus;
}

Result<std::vector<int>> online_cpus() {
  const char* path = "/sys/devices/system/cpu/online";
  std::ifstream in(path);
  std::string text;
  if (!in || !std::getline(in, text)) return make_error(fmt::format("cannot read {}", path));
  return parse_cpu_list(text);
}

Result<UniqueFd> open_cpu_clock_event(int cpu, uint32_t frequency_hz) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = frequency_hz;
  int fd = static_cast<int>(syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    int err = errno;
    return make_error(fmt::format("perf_event_open(cpu-clock, cpu {}, {} Hz): {}", cpu,
                                  frequency_hz, strerror(err)));
  }
  return UniqueFd(fd);
}

PerfSampler::PerfSampler(PerfSampler&& other) noexcept
    : links_(std::move(other.links_)) {
  other.links_.clear();
}

PerfSampler::~PerfSampler() {
  for (bpf_link* link : links_) bpf_link__destroy(link);
}

Result<PerfSampler> PerfSampler::attach(bpf_program* entry, uint32_t frequency_hz) {
  auto cpus = online_cpus();
  if (!cpus) return cpus.error();
  PerfSampler sampler;
  for (int cpu : *cpus) {
    auto fd = open_cpu_clock_event(cpu, frequency_hz);
    if (!fd) return fd.error();
    bpf_link* link = bpf_program__attach_perf_event(entry, fd->get());
    if (!link) {
      int err = errno;
      return make_error(fmt::format("cannot attach the entry program to cpu {}: {}", cpu, strerror(err)));
    }
    // The link owns the descriptor from here on (see links_).
    (void)fd->release();
    sampler.links_.push_back(link);
  }
  return sampler;
}

}  // namespace omniprof
