// Start-up cost: what `omniprof record -d 1` costs in CPU (user and system,
// from wait4's rusage) on this machine as it is; what it had cost when it
// logged "sampling N CPUs" (its first sample can come from then) and
// "unwind tables ready" (samples recorded from then), from /proc/PID/stat,
// whose utime and stime count the threads gone too, in clock ticks (10 ms);
// and what each BPF object
// and program cost the kernel to load (verified and compiled), from
// `omniprof plugins` (host/bpf/load_cost.h: the kernel's own load times).
// Issue 19's target: <= 0.3 s CPU to the first sample.
//
// Baselines in the same run: each binary also with the interpreter plugins
// off (runtimes python and ruby false: the native walk alone), and any
// further binaries given (e.g. an earlier commit's install tree,
// /tmp/base/bin/omniprof), measured in turns with this build's.
//
//   build/bench/startup_cost [RUNS [BINARY...]]   (root; RUNS default 5, medians shown)
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_support.h"

namespace {

double median(std::vector<double> values) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double seconds_of(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

struct Run {
  double user = 0, system = 0, wall = 0;
  // CPU (user + system) when the log said so; -1 if it never did.
  double to_sampling = -1, to_tables_ready = -1;
  bool ok = false;
};

// utime + stime of a process, its exited threads included, in seconds; -1
// when it is gone.
double stat_cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t comm_end = text.rfind(')');
  if (comm_end == std::string::npos) return -1;
  std::istringstream fields(text.substr(comm_end + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // After the comm: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

Run record_once(const std::string& binary, const std::string& config) {
  std::vector<std::string> argv = {binary, "record", "-d", "1", "-o", "/tmp/omniprof-startup-cost.pb.gz"};
  if (!config.empty()) argv.insert(argv.end(), {"--config", config});
  const char* log_path = "/tmp/omniprof-startup-cost.log";
  unlink(log_path);  // not the last run's lines
  auto began = std::chrono::steady_clock::now();
  pid_t pid = omniprof::bench::spawn(argv, "/dev/null", log_path);
  int status = 0;
  rusage usage{};
  Run run;
  // Watches the log every 2 ms for the two lines, reading the agent's CPU
  // when each appears (at most 2 ms late).
  std::ifstream log;
  std::string pending;
  while (run.to_tables_ready < 0) {
    if (waitpid(pid, &status, WNOHANG | WNOWAIT | __WALL) == pid) break;
    if (!log.is_open()) log.open(log_path);
    if (log.is_open()) {
      log.clear();
      std::string chunk((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      pending += chunk;
      if (run.to_sampling < 0 && pending.find("info sampling ") != std::string::npos) {
        run.to_sampling = stat_cpu_seconds(pid);
      }
      if (pending.find("info unwind tables ready") != std::string::npos) run.to_tables_ready = stat_cpu_seconds(pid);
    }
    usleep(2000);
  }
  if (wait4(pid, &status, 0, &usage) != pid) return run;
  run.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  run.user = seconds_of(usage.ru_utime);
  run.system = seconds_of(usage.ru_stime);
  run.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return run;
}

// From `plugins`' "... loaded in T ms: maps and set-up M ms, PROGRAM P ms
// (N instructions verified), ..." lines: "OBJECT whole", "OBJECT maps and
// set-up" and "OBJECT PROGRAM" in ms, and "OBJECT PROGRAM insns".
std::map<std::string, double> load_costs(const std::string& binary, const std::string& config) {
  std::string command = binary + " plugins" + (config.empty() ? "" : " --config " + config) + " 2>/dev/null";
  std::string out = omniprof::bench::run_shell(command);
  std::map<std::string, double> costs;
  std::string object;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(start, end - start);
    start = end + 1;
    if (line.rfind("loaded ", 0) == 0) {
      size_t name = line.find_first_not_of(' ', 7);
      object = line.substr(name, line.find(' ', name) - name);
      continue;
    }
    size_t at = line.find("loaded in ");
    if (at == std::string::npos) continue;
    if (line.rfind("host ", 0) == 0) object = "host";
    std::smatch m;
    std::string rest = line.substr(at);
    if (!std::regex_search(rest, m, std::regex("^loaded in ([0-9.]+) ms: maps and set-up ([0-9.]+) ms(.*)$"))) continue;
    costs[object + " whole"] = std::stod(m[1]);
    costs[object + " maps and set-up"] = std::stod(m[2]);
    std::string programs = m[3];
    const std::regex program(R"(, ([a-z_0-9]+) ([0-9.]+) ms( \(([0-9]+) instructions verified\))?)");
    for (auto it = std::sregex_iterator(programs.begin(), programs.end(), program); it != std::sregex_iterator(); ++it) {
      costs[object + " " + (*it)[1].str()] = std::stod((*it)[2]);
      if ((*it)[4].matched) costs[object + " " + (*it)[1].str() + " insns"] = std::stod((*it)[4]);
    }
  }
  return costs;
}

}  // namespace

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "startup_cost: needs root (BPF)\n");
    return 1;
  }
  const int runs = argc > 1 ? std::max(1, atoi(argv[1])) : 5;
  std::vector<std::string> binaries = {OMNIPROF_BINARY};
  for (int i = 2; i < argc; ++i) binaries.push_back(argv[i]);
  const std::string native_only = "/tmp/omniprof-startup-native-only.yaml";
  std::ofstream(native_only) << "runtimes:\n  python: false\n  ruby: false\n";

  struct Case {
    std::string label, binary, config;
    std::vector<Run> runs;
    std::map<std::string, std::vector<double>> costs;
  };
  std::vector<Case> cases;
  for (const auto& binary : binaries) {
    cases.push_back({binary, binary, "", {}, {}});
    cases.push_back({binary + " (native only)", binary, native_only, {}, {}});
  }
  // In turns, so that a change of the machine's load during the run does not
  // always fall on the same case.
  for (int r = 0; r < runs; ++r) {
    for (auto& c : cases) {
      c.runs.push_back(record_once(c.binary, c.config));
      for (const auto& [key, value] : load_costs(c.binary, c.config)) c.costs[key].push_back(value);
    }
  }
  unlink(native_only.c_str());

  std::printf("omniprof record -d 1: CPU of the whole command (start-up, 1 s at 99 Hz, writing), median of %d;\n"
              "its CPU when sampling began (\"to sampling\": issue 19's start-up to the first sample, goal <= 0.3 s)\n"
              "and when its unwind tables were ready (samples recorded from then)\n",
              runs);
  std::printf("%-52s %7s %7s %7s %7s %11s %11s %6s\n", "binary", "user s", "sys s", "CPU s", "wall s", "to sampling",
              "tables rdy", "ok");
  for (const auto& c : cases) {
    std::vector<double> user, system, cpu, wall, to_sampling, to_tables_ready;
    int ok = 0;
    for (const Run& run : c.runs) {
      user.push_back(run.user);
      system.push_back(run.system);
      cpu.push_back(run.user + run.system);
      wall.push_back(run.wall);
      if (run.to_sampling >= 0) to_sampling.push_back(run.to_sampling);
      if (run.to_tables_ready >= 0) to_tables_ready.push_back(run.to_tables_ready);
      ok += run.ok;
    }
    std::printf("%-52s %7.3f %7.3f %7.3f %7.3f %11.2f %11.2f %3d/%-2d\n", c.label.c_str(), median(user), median(system),
                median(cpu), median(wall), median(to_sampling), median(to_tables_ready), ok, runs);
  }
  std::printf("\nBPF load, ms (median of %d; omniprof plugins; program: verifier + JIT, from the kernel's load times)\n",
              runs);
  for (const auto& c : cases) {
    std::printf("%s\n", c.label.c_str());
    if (c.costs.empty()) {
      std::printf("  (this binary does not say what its BPF load cost)\n");
      continue;
    }
    for (const auto& [key, values] : c.costs) {
      if (key.size() > 6 && key.compare(key.size() - 6, 6, " insns") == 0) continue;
      auto insns = c.costs.find(key + " insns");
      if (insns != c.costs.end()) {
        std::printf("  %-50s %9.1f ms %10.0f instructions verified\n", key.c_str(), median(values),
                    median(insns->second));
      } else {
        std::printf("  %-50s %9.1f ms\n", key.c_str(), median(values));
      }
    }
  }
  return 0;
}
