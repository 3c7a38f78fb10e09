// BPF cost per sample of an interpreter unwinder (pyperf, rbperf), from the
// kernel's own run-time statistics (omniprof record --bpf-stats): a process
// 30 interpreter frames deep (tests/workloads/python_recursion.py,
// ruby_recursion.rb), one copy per CPU, on each interpreter given (CPython's
// frame layouts differ: 2.7 to 3.10 walk PyFrameObjects, 3.11+
// _PyInterpreterFrames). Baseline from the same run: the same processes with
// the runtime's plugin disabled (runtimes.RUNTIME: false), so only the native
// walk of the same stacks runs; the difference is the interpreter's walk. Tail calls run inside the program that made them, so the
// kernel times the whole chain (entry, native, python, STOP) as the entry
// program: per-sample figures, not per-program ones. The entry program also
// runs for every sample of the machine's other processes, which it drops
// after a pid check: that cost, measured in the same run with only an idle
// process selected, is taken out before dividing by the samples recorded,
// so a busy machine does not inflate the figures.
//
//   build/bench/interpreter_unwind_cost RUNTIME [SECONDS [INTERPRETER...]]
//   (root; RUNTIME python or ruby; default 5 s; default interpreters: pyenv's
//   2.7.18, 3.10.13, 3.11.7, 3.12.1, 3.13.0 and Debian's python3.14 and
//   python3.15 / Debian's ruby3.1)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "interpreter_bench.h"

namespace {

using omniprof::bench::stat_counter;

constexpr int kDepth = 30;

struct Cost {
  double ns_per_sample = -1, samples = 0, native_frames = 0, interpreter_frames = 0, interpreter_walks = 0;
  double entry_runs = 0, ns_per_entry_run = 0;
};

// Records one copy of `argv` per CPU with --bpf-stats.
// ns_per_sample: BPF run time less `dropped_run_ns` per run that recorded
// nothing, per sample recorded.
Cost measure(const std::vector<std::string>& argv, int seconds, const std::string& config, double dropped_run_ns,
             const std::string& runtime) {
  std::string output = omniprof::bench::record_copies_per_cpu(OMNIPROF_BINARY, argv, seconds, config);
  Cost cost;
  cost.samples = stat_counter(output, "samples_recorded");
  cost.entry_runs = stat_counter(output, "bpf\\.entry_runs");
  cost.ns_per_entry_run = stat_counter(output, "bpf\\.ns_per_entry_run");
  if (cost.samples > 0) {
    double run_ns = cost.entry_runs * cost.ns_per_entry_run - (cost.entry_runs - cost.samples) * dropped_run_ns;
    cost.ns_per_sample = run_ns / cost.samples;
  }
  cost.native_frames = stat_counter(output, "native\\.frames");
  cost.interpreter_frames = stat_counter(output, runtime + "\\.frames");
  cost.interpreter_walks = stat_counter(output, runtime + "\\.samples");
  return cost;
}

double per_sample(double value, double samples) { return samples > 0 ? value / samples : 0; }

}  // namespace

int main(int argc, char** argv) {
  const auto runtimes = omniprof::bench::interpreter_runtimes();
  const auto* runtime = argc > 1 ? omniprof::bench::find_interpreter_runtime(runtimes, argv[1]) : nullptr;
  if (!runtime) {
    std::fprintf(stderr, "usage: interpreter_unwind_cost python|ruby [SECONDS [INTERPRETER...]]\n");
    return 2;
  }
  int seconds = argc > 2 ? std::max(2, atoi(argv[2])) : 5;
  std::vector<std::string> interpreters;
  for (int i = 3; i < argc; ++i) interpreters.push_back(argv[i]);
  if (interpreters.empty()) interpreters = runtime->default_interpreters;
  const std::string without = "/tmp/omniprof-bench-no-" + runtime->name + ".yaml";
  std::ofstream(without) << "runtimes:\n  " << runtime->name << ": false\n";
  std::printf("BPF cost per sample (kernel run time / samples recorded), %d %s frames deep, %d s each\n", kDepth,
              runtime->name.c_str(), seconds);
  // Only sleeping processes selected: every run of the entry program drops
  // its sample (another process, or an idle CPU).
  const double dropped_run_ns =
      measure({"sleep", std::to_string(seconds + 30)}, seconds, without, 0, runtime->name).ns_per_entry_run;
  std::printf("entry program run that drops its sample: %.0f ns (subtracted below)\n", dropped_run_ns);
  std::printf("(x native: ns/sample against the native-only walk of the same stacks; issue 19's goal <= 2x)\n");
  std::printf("%-40s %9s %9s %12s %12s %9s %13s %13s %9s\n", "interpreter", "int fr/s", "nat fr/s", "ns/sample",
              "native-only", "x native", "interp ns", "ns/int frame", "samples");
  for (const std::string& interpreter : interpreters) {
    if (access(interpreter.c_str(), X_OK) != 0) {
      std::printf("%-40s not installed\n", interpreter.c_str());
      continue;
    }
    // A short spin at the bottom: samples land at every depth of the
    // walk's cost, not only in the deepest frame.
    const std::vector<std::string> args = {interpreter, runtime->recursion_script, std::to_string(kDepth),
                                           std::to_string(seconds + 30), "2000"};
    Cost with = measure(args, seconds, "", dropped_run_ns, runtime->name);
    Cost base = measure(args, seconds, without, dropped_run_ns, runtime->name);
    double frames = per_sample(with.interpreter_frames, with.samples);
    double interpreter_ns = with.ns_per_sample - base.ns_per_sample;
    std::printf("%-40s %9.1f %9.1f %12.0f %12.0f %8.2fx %13.0f %13.0f %9.0f\n", interpreter.c_str(), frames,
                per_sample(with.native_frames, with.samples), with.ns_per_sample, base.ns_per_sample,
                base.ns_per_sample > 0 ? with.ns_per_sample / base.ns_per_sample : 0, interpreter_ns,
                frames > 0 ? interpreter_ns / frames : 0, with.samples);
    std::fflush(stdout);
  }
  unlink(without.c_str());
  return 0;
}
