// What a drain of stack_counts costs by the map's size. A drain moves the
// counts out with BPF_MAP_LOOKUP_AND_DELETE_BATCH, which visits every bucket
// of the hash map, empty or not, so part of its cost follows the map's size,
// not the samples in it. On a 2-CPU machine that part is microseconds (this
// bench, beside a whole drain's ~1 ms): fitting the map to the machine
// (config.h, fitted_stack_counts_entries) saves kernel memory, not CPU.
// Each size is loaded as the agent loads it (the real entry
// object and its maps), filled with KEYS counts (distinct stacks), drained;
// the median of ITERATIONS drains is printed, beside the map's former default
// size (OMNIPROF_DEFAULT_STACK_COUNTS), measured in the same run, and the same
// with the map empty.
//
//   build/bench/drain_cost [ITERATIONS [KEYS]]   (root; default 300, 40)
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

#include "bpf/bpf_maps.h"
#include "config/config.h"

namespace {

using omniprof::BpfMaps;

struct Figures {
  double with_keys_us = -1;
  double empty_us = -1;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// Median microseconds of `iterations` drains of a map of `entries`, each
// after storing `keys` counts (none: the empty map).
bool measure(uint32_t entries, int iterations, int keys, Figures& out) {
  auto opened = BpfMaps::open();
  if (!opened) {
    std::fprintf(stderr, "drain_cost: %s\n", opened.error().message.c_str());
    return false;
  }
  BpfMaps& maps = **opened;
  omniprof::MapSizes sizes;
  sizes.stack_counts = entries;
  if (auto r = maps.adjust_map_sizes(sizes); !r) {
    std::fprintf(stderr, "drain_cost: %s\n", r.error().message.c_str());
    return false;
  }
  if (auto r = maps.load(); !r) {
    std::fprintf(stderr, "drain_cost: %s\n", r.error().message.c_str());
    return false;
  }
  const int counts_fd = maps.map_fd(OMNIPROF_MAP_STACK_COUNTS);
  for (int with_keys = 1; with_keys >= 0; --with_keys) {
    std::vector<double> times;
    for (int i = 0; i < iterations; ++i) {
      for (int k = 0; with_keys && k < keys; ++k) {
        omniprof_stack_key key{};
        key.pid = 1000 + static_cast<uint32_t>(k);
        key.tid = key.pid;
        key.user_stack_id = 0x1000 + static_cast<uint64_t>(k);
        key.user_stack_len = 12;
        key.kernel_stack_id = OMNIPROF_STACK_ID_NONE;
        uint64_t value = 1 + static_cast<uint64_t>(k % 5);
        if (bpf_map_update_elem(counts_fd, &key, &value, BPF_ANY) != 0) {
          std::perror("drain_cost: bpf_map_update_elem");
          return false;
        }
      }
      const auto start = std::chrono::steady_clock::now();
      auto drained = maps.drain_stack_counts();
      const auto end = std::chrono::steady_clock::now();
      if (!drained || drained->size() != static_cast<size_t>(with_keys ? keys : 0)) {
        std::fprintf(stderr, "drain_cost: drained %zu counts, stored %d\n", drained ? drained->size() : 0,
                     with_keys ? keys : 0);
        return false;
      }
      times.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    (with_keys ? out.with_keys_us : out.empty_us) = median(times);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::max(10, atoi(argv[1])) : 300;
  const int keys = argc > 2 ? std::max(1, atoi(argv[2])) : 40;
  libbpf_set_print([](enum libbpf_print_level, const char*, va_list) { return 0; });
  const uint32_t cpus = static_cast<uint32_t>(std::max(1, libbpf_num_possible_cpus()));
  std::set<uint32_t> sizes = {omniprof::fitted_stack_counts_entries(cpus, 19, 10),
                              omniprof::fitted_stack_counts_entries(cpus, 99, 10), OMNIPROF_DEFAULT_STACK_COUNTS};
  std::printf("stack_counts drain (BPF_MAP_LOOKUP_AND_DELETE_BATCH), median of %d drains, %u CPUs\n", iterations,
              cpus);
  std::printf("fitted here: %u entries at 19 Hz, %u at 99 Hz (10 s rounds); former default %u (the baseline)\n",
              omniprof::fitted_stack_counts_entries(cpus, 19, 10), omniprof::fitted_stack_counts_entries(cpus, 99, 10),
              OMNIPROF_DEFAULT_STACK_COUNTS);
  std::printf("%10s %26s %18s\n", "entries", "us/drain with keys", "us/drain, empty");
  Figures baseline;
  if (!measure(OMNIPROF_DEFAULT_STACK_COUNTS, iterations, keys, baseline)) return 1;
  for (uint32_t entries : sizes) {
    Figures f = baseline;
    if (entries != OMNIPROF_DEFAULT_STACK_COUNTS && !measure(entries, iterations, keys, f)) return 1;
    std::printf("%10u %15.1f (%3d keys) %15.1f%s\n", entries, f.with_keys_us, keys, f.empty_us,
                entries == OMNIPROF_DEFAULT_STACK_COUNTS ? "   baseline: the former default" : "");
  }
  return 0;
}
