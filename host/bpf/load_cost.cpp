#include "bpf/load_cost.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <time.h>

#include <algorithm>

namespace omniprof {

ObjectLoadCost object_load_cost(bpf_object* object, uint64_t began, uint64_t ended) {
  ObjectLoadCost cost;
  cost.total_ns = ended > began ? ended - began : 0;
  struct Loaded {
    std::string name;
    uint64_t load_time;
    uint32_t verified_insns;
  };
  std::vector<Loaded> loaded;
  bpf_program* program = nullptr;
  bpf_object__for_each_program(program, object) {
    int fd = bpf_program__fd(program);
    if (fd < 0) continue;
    bpf_prog_info info{};
    uint32_t length = sizeof(info);
    // A kernel older than the header fills what it knows and leaves the
    // rest zero (verified_insns: 5.16).
    if (bpf_obj_get_info_by_fd(fd, &info, &length) != 0) continue;
    loaded.push_back({bpf_program__name(program), info.load_time, info.verified_insns});
  }
  std::sort(loaded.begin(), loaded.end(), [](const Loaded& a, const Loaded& b) { return a.load_time < b.load_time; });
  if (loaded.empty()) {
    cost.before_programs_ns = cost.total_ns;
    return cost;
  }
  cost.before_programs_ns = loaded.front().load_time > began ? loaded.front().load_time - began : 0;
  for (size_t i = 0; i < loaded.size(); ++i) {
    const uint64_t until = i + 1 < loaded.size() ? loaded[i + 1].load_time : ended;
    cost.programs.push_back(
        {loaded[i].name, until > loaded[i].load_time ? until - loaded[i].load_time : 0, loaded[i].verified_insns});
  }
  return cost;
}

std::string describe_load_cost(const ObjectLoadCost& cost) {
  auto ms = [](uint64_t ns) { return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6); };
  std::vector<ProgramLoadCost> programs = cost.programs;
  std::stable_sort(programs.begin(), programs.end(),
                   [](const ProgramLoadCost& a, const ProgramLoadCost& b) { return a.ns > b.ns; });
  std::string text = fmt::format("{}: maps and set-up {}", ms(cost.total_ns), ms(cost.before_programs_ns));
  for (const ProgramLoadCost& p : programs) {
    text += fmt::format(", {} {}", p.name, ms(p.ns));
    if (p.verified_insns) text += fmt::format(" ({} instructions verified)", p.verified_insns);
  }
  return text;
}

}  // namespace omniprof
