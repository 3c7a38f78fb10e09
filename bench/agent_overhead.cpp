// Agent overhead benchmark: what `omniprof record` costs while profiling the
// whole machine, idle and with every core busy, at 19 Hz and 99 Hz.
//
// Figures per measurement:
//   steady  CPU seconds per wall second of the agent process from a third
//           of the run to 2 s before its end (no start-up, which takes
//           longer on a machine crowded with busy processes, and no final
//           symbolization): the always-on cost.
//   total   the same over the whole run, start-up and writing included.
//   RSS     peak resident memory of the agent process.
//   BPF     mean run time of each omniprof BPF program per run, from the
//           kernel's own statistics (kernel.bpf_stats_enabled): the cost
//           paid inside the sampled processes. Tail calls run inside the
//           program that made them, so omniprof_entry's figure is the whole
//           walk of one sample (entry, native slot, STOP).
// Baseline from the same run: `perf record -a -g` at the same frequency,
// measured the same way (the tool users reach for first).
//
//   build/bench/agent_overhead [SECONDS [SCENARIO]]   (root; default 20 s,
//   at least 8; SCENARIO idle, busy or 50procs, default all). The 50procs
//   runs last three times as long: on two cores shared with 50 busy
//   processes the agent's start-up (describing them, building their unwind
//   tables) stretches over ~20 s of wall time, which must not count as
//   steady state.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"

namespace {

using omniprof::bench::process_cpu_seconds;
using omniprof::bench::spawn;

using Clock = std::chrono::steady_clock;

struct Usage {
  double steady_cpu_per_s = 0;
  double total_cpu_per_s = 0;
  double max_rss_mb = 0;
  double bpf_map_mb = 0;  // kernel memory of the agent's BPF maps (omniprof only)
  std::map<std::string, double> bpf_ns_per_run;
  bool ok = false;
};

// run_time_ns / run_cnt of the BPF programs whose names start with a prefix.
std::map<std::string, double> bpf_program_costs(const std::vector<std::string>& prefixes) {
  std::map<std::string, double> costs;
  FILE* pipe = popen("bpftool prog show 2>/dev/null", "r");
  if (!pipe) return costs;
  std::string text;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) text.append(buffer, n);
  pclose(pipe);
  static const std::regex entry(R"(name (\S+)[^\n]*run_time_ns (\d+) run_cnt (\d+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), entry); it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    double runs = std::stod((*it)[3]);
    for (const auto& prefix : prefixes) {
      if (name.rfind(prefix, 0) == 0 && runs > 0) costs[name] = std::stod((*it)[2]) / runs;
    }
  }
  return costs;
}

Usage measure(const std::vector<std::string>& args, int seconds, bool bpf) {
  auto start = Clock::now();
  const char* output_path = "/tmp/omniprof-bench-output.txt";
  pid_t pid = spawn(args, output_path);
  int warmup = std::max(3, seconds / 3);
  std::this_thread::sleep_for(std::chrono::seconds(warmup));
  double cpu_a = process_cpu_seconds(pid);
  auto t_a = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds - warmup - 2));
  double cpu_b = process_cpu_seconds(pid);
  auto t_b = Clock::now();
  Usage u;
  if (bpf) u.bpf_ns_per_run = bpf_program_costs({"omniprof_", "native_unwind"});
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  double wall = std::chrono::duration<double>(Clock::now() - start).count();
  double total_cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
                     usage.ru_stime.tv_usec / 1e6;
  u.steady_cpu_per_s = (cpu_b - cpu_a) / std::chrono::duration<double>(t_b - t_a).count();
  u.total_cpu_per_s = total_cpu / wall;
  u.max_rss_mb = usage.ru_maxrss / 1024.0;
  u.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::ifstream output(output_path);
  std::string line;
  while (std::getline(output, line)) {
    std::smatch m;
    static const std::regex map_bytes(R"(^\s*host\.bpf_map_bytes\s+(\d+))");
    if (std::regex_search(line, m, map_bytes)) u.bpf_map_mb = std::stod(m[1]) / (1024.0 * 1024.0);
  }
  unlink(output_path);
  return u;
}

void print_row(const char* load, int hz, const char* tool, const Usage& u, const std::string& extra) {
  std::printf("%-7s %4d  %-9s %9.3f%% %9.3f%% %8.1f %8.1f  %s%s\n", load, hz, tool, 100 * u.steady_cpu_per_s,
              100 * u.total_cpu_per_s, u.max_rss_mb, u.bpf_map_mb, extra.c_str(), u.ok ? "" : "  (run failed)");
}

}  // namespace

int main(int argc, char** argv) {
  int base_seconds = argc > 1 ? std::max(8, atoi(argv[1])) : 20;
  std::string only = argc > 2 ? argv[2] : "";
  std::string omniprof = OMNIPROF_BINARY;
  std::string busy = OMNIPROF_BUSY_WORKLOAD;
  int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  bool have_perf = system("perf --version >/dev/null 2>&1") == 0;
  std::ofstream("/proc/sys/kernel/bpf_stats_enabled") << "1";

  std::printf("agent overhead: %d s per measurement (50procs: %d s), %d CPUs; %% of one core\n", base_seconds,
              base_seconds * 3, cpus);
  std::printf("%-7s %4s  %-9s %10s %10s %8s %8s  %s\n", "load", "Hz", "tool", "steady", "total", "RSS MB",
              "maps MB", "BPF ns/run, or ratio to perf");
  // idle; every core busy; 50 processes of seven different -fomit-frame-pointer
  // programs (each needing unwind tables), sharing the cores.
  const std::vector<std::string> fifty = {OMNIPROF_WORKLOADS "/chain_nofp", OMNIPROF_WORKLOADS "/chain_nofp_nopie",
                                          OMNIPROF_WORKLOADS "/chain_nofp_static", OMNIPROF_WORKLOADS "/threads_nofp",
                                          OMNIPROF_WORKLOADS "/recursion_nofp", OMNIPROF_WORKLOADS "/chain_nofp_shared",
                                          OMNIPROF_WORKLOADS "/dlopen_nofp"};
  for (const char* scenario : {"idle", "busy", "50procs"}) {
    std::vector<pid_t> load;
    std::string name = scenario;
    if (!only.empty() && only != name) continue;
    int seconds = name == "50procs" ? base_seconds * 3 : base_seconds;
    std::string lifetime = std::to_string(seconds * 4 + 30);
    if (name == "busy") {
      for (int i = 0; i < cpus; ++i) load.push_back(spawn({busy, lifetime}));
    } else if (name == "50procs") {
      for (int i = 0; i < 50; ++i) load.push_back(spawn({fifty[i % fifty.size()], lifetime}));
    }
    if (!load.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const char* load_name = scenario;
    for (int hz : {19, 99}) {
      if (name == "50procs" && hz != 19) continue;
      Usage ours = measure({omniprof, "record", "-F", std::to_string(hz), "-d", std::to_string(seconds),
                            "-o", "/tmp/omniprof-bench.pb.gz"},
                           seconds, true);
      std::string bpf;
      for (const auto& [name, ns] : ours.bpf_ns_per_run) bpf += name + "=" + std::to_string(static_cast<long>(ns)) + " ";
      print_row(load_name, hz, "omniprof", ours, bpf);
      if (!have_perf) continue;
      Usage perf = measure({"perf", "record", "-a", "-g", "-F", std::to_string(hz), "-o",
                            "/tmp/omniprof-bench.perf.data", "--", "sleep", std::to_string(seconds)},
                           seconds, false);
      char ratio[96];
      std::snprintf(ratio, sizeof(ratio), "omniprof/perf: steady %.2f, RSS %.2f",
                    perf.steady_cpu_per_s > 0 ? ours.steady_cpu_per_s / perf.steady_cpu_per_s : 0.0,
                    ours.max_rss_mb / perf.max_rss_mb);
      print_row(load_name, hz, "perf", perf, ratio);
    }
    for (pid_t pid : load) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  unlink("/tmp/omniprof-bench.pb.gz");
  unlink("/tmp/omniprof-bench.perf.data");
  return 0;
}
