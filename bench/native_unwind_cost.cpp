// BPF cost per sample of native unwinding, from the kernel's own run-time
// statistics (omniprof record --bpf-stats): a process recursing 10, 60 and
// 120 frames deep with ~600-byte frames, built -fomit-frame-pointer, so
// every frame is recovered from unwind tables. Baseline from the same run:
// the same process with the native plugin disabled (entry program and STOP
// only: kernel stack, storing, counting), so the difference is the walk; and
// the same recursion built with frame pointers and no call-frame information
// of its own (tests/workloads: recursion_fp_only), which the native walk
// crosses by frame pointers alone, for issue 19's goal: a DWARF walk at most
// 1.5x a frame-pointer walk of the same stack (the "dwarf/fp" line: the
// walks' ratio, the native plugin's part alone, and the whole samples').
//
// With a second omniprof binary (e.g. a build of an earlier commit), each
// depth is also measured with it, in the same run, for a before/after.
//
//   build/bench/native_unwind_cost [SECONDS [OTHER_OMNIPROF]]   (root; default 5)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_support.h"

namespace {

long counter(const std::string& output, const std::string& name) {
  return static_cast<long>(omniprof::bench::stat_counter(output, name, -1));
}

struct Cost {
  long ns_per_sample = -1;
  long samples = -1;
  long frames = -1;
  long entry_runs = -1;
};

Cost measure(const std::string& omniprof, const std::string& workload, int depth, int seconds,
             const std::string& config) {
  std::string output = omniprof::bench::record_copies_per_cpu(
      omniprof, {workload, std::to_string(seconds + 10), std::to_string(depth)}, seconds, config);
  Cost cost;
  cost.ns_per_sample = counter(output, "bpf\\.ns_per_recorded_sample");
  cost.entry_runs = counter(output, "bpf\\.entry_runs");
  cost.samples = counter(output, "samples_recorded");
  cost.frames = counter(output, "native\\.frames");
  return cost;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = argc > 1 ? std::max(2, atoi(argv[1])) : 5;
  std::string other = argc > 2 ? argv[2] : "";
  std::string no_native = "/tmp/omniprof-bench-no-native.yaml";
  std::ofstream(no_native) << "runtimes:\n  native: false\n";
  std::printf("BPF cost per sample (kernel run time / samples recorded), %d s per measurement\n", seconds);
  std::printf("%-6s %6s %-6s %12s %12s %12s %10s %14s %10s %10s\n", "agent", "depth", "walk", "frames/smpl",
              "ns/sample", "baseline ns", "walk ns", "walk ns/frame", "samples", "entry runs");
  std::vector<std::pair<const char*, std::string>> agents = {{"this", OMNIPROF_BINARY}};
  if (!other.empty()) agents.push_back({"other", other});
  struct Walk {
    const char* name;
    const char* workload;
  };
  const Walk walks[] = {{"dwarf", OMNIPROF_RECURSION_WORKLOAD}, {"fp", OMNIPROF_RECURSION_FP_WORKLOAD}};
  for (int depth : {10, 60, 120}) {
    // Which agent goes first alternates, so that a change of the machine's
    // load during the run does not always favour the same one.
    if (agents.size() > 1 && depth != 10) std::swap(agents[0], agents[1]);
    for (const auto& [name, binary] : agents) {
      double walk_ns[2] = {0, 0}, sample_ns[2] = {0, 0};
      for (int w = 0; w < 2; ++w) {
        Cost with = measure(binary, walks[w].workload, depth, seconds, "");
        Cost base = measure(binary, walks[w].workload, depth, seconds, no_native);
        double frames = with.samples > 0 ? static_cast<double>(with.frames) / with.samples : 0;
        walk_ns[w] = static_cast<double>(with.ns_per_sample - base.ns_per_sample);
        sample_ns[w] = static_cast<double>(with.ns_per_sample);
        double per_frame = frames > 0 ? walk_ns[w] / frames : 0;
        std::printf("%-6s %6d %-6s %12.1f %12ld %12ld %10.0f %14.0f %10ld %10ld\n", name, depth, walks[w].name,
                    frames, with.ns_per_sample, base.ns_per_sample, walk_ns[w], per_frame, with.samples,
                    with.entry_runs);
        std::fflush(stdout);
      }
      std::printf("%-6s %6d dwarf/fp: walk %.2fx, whole sample %.2fx (goal: walk <= 1.5x)\n", name, depth,
                  walk_ns[1] > 0 ? walk_ns[0] / walk_ns[1] : 0, sample_ns[1] > 0 ? sample_ns[0] / sample_ns[1] : 0);
      std::fflush(stdout);
    }
  }
  unlink(no_native.c_str());
  return 0;
}
