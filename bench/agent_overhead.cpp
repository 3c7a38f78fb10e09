// Agent overhead benchmark: what omniprof costs while profiling the whole
// machine, at 19 Hz and 99 Hz, beside `perf record -a -g` at the same
// frequency in the same run (the tool users reach for first), measured the
// same way.
//
// Scenes:
//   idle     nothing running; `omniprof record`.
//   busy     one busy native process per CPU; `omniprof record`.
//   50procs  50 processes of seven -fomit-frame-pointer programs (each
//            needing unwind tables) sharing the cores; `omniprof record`,
//            19 Hz only. Runs three times as long: on two cores shared with
//            50 busy processes the agent's start-up (describing them,
//            building their unwind tables) stretches over ~20 s of wall
//            time, which must not count as steady state.
//   interp   the scene of issue 19: two busy Python processes
//            (python_recursion.py 30 deep, python_folding.py burn) and two
//            busy Ruby processes (ruby_recursion.rb 100 deep, ruby_mixed.rb),
//            profiled by `omniprof run`, not record: `run` is the always-on
//            mode a deployed agent uses (its defaults: 19 Hz, 10 s rounds,
//            each round symbolized and written), so its steady cost and
//            memory over many rounds are what such a machine pays. Config
//            written to a temporary directory: round_seconds 10, the python,
//            ruby and native runtimes on, 19 or 99 Hz; no --rounds, stopped
//            with SIGTERM at the end of the measurement. Each
//            measurement lasts three times SECONDS, at least 60 s, with a
//            warm-up of a third of it, at least 15 s and at most 60 s: `run`
//            builds the interpreters' unwind tables at start-up. An hour of
//            rounds at 19 Hz, its RSS slope over 59 minutes:
//            `agent_overhead 1200 interp@19`. Skipped, with a line saying why, when
//            python3 or ruby is missing (Python: pyenv's 3.12.1 if present,
//            else python3 on PATH).
//
// Figures per measurement (of the agent process, or perf's):
//   steady   CPU seconds per wall second from the warm-up (a third of the
//            measurement; interp: at least 15 s) to 2 s before its end (no
//            start-up, which takes longer on a machine crowded with busy
//            processes, and no final symbolization): the always-on cost.
//   total    the same over the whole run, start-up and writing included.
//   RSS end  VmRSS at the end of the steady window.
//   RSS peak peak resident memory (ru_maxrss).
//   maps MB  kernel memory of omniprof's BPF maps (host.bpf_map_bytes, the
//            last value printed: record's counters on stdout, or run's last
//            round line on stderr).
//   MB/min   RSS slope: least squares over VmRSS sampled every 5 s in the
//            steady window ("-" with fewer than 3 samples).
//   BPF      mean run time of each of the agent's BPF programs (those it
//            holds open) per run, from the kernel's own statistics
//            (kernel.bpf_stats_enabled), read at the end of the steady
//            window: the cost paid inside the sampled processes. Tail calls
//            run inside the program that made them, so omniprof_entry's
//            figure is the whole walk of one sample (entry, the native and
//            interpreter slots, STOP).
//
//   build/bench/agent_overhead [SECONDS [SCENARIO[@HZ] [BINARY...]]]
//     (root; SECONDS default 20, at least 8; SCENARIO idle, busy, 50procs,
//     interp, or all (also ""), default all; @HZ: that frequency only, not
//     19 and 99; perf's measurement lasts at most 10 minutes, its rate
//     needing no longer; BINARY: omniprof binaries to
//     measure, default the build's own, e.g. a copy of an older build's
//     install tree, /tmp/base/bin/omniprof, beside build/bin/omniprof; its
//     plugins load from ../lib relative to it.) With several binaries, each
//     is measured the same way in the same run and gets its own row, labelled
//     with its path. At each frequency they are measured one after another,
//     then perf; in the interp scene, with more than one binary, in the order
//     B1..Bn, perf, Bn..B1 (each binary's row is the mean of its two
//     measurements, both steady figures shown), so that a drift of the
//     machine's load over the run weighs on all alike.
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"

namespace {

using omniprof::bench::process_cpu_seconds;
using omniprof::bench::spawn;
using omniprof::bench::status_bytes;

using Clock = std::chrono::steady_clock;

struct Usage {
  double steady_cpu_per_s = 0;
  double total_cpu_per_s = 0;
  double end_rss_mb = 0;  // VmRSS at the end of the steady window
  double max_rss_mb = 0;
  double bpf_map_mb = 0;  // kernel memory of the agent's BPF maps (omniprof only)
  double rss_slope_mb_per_min = NAN;
  std::map<std::string, double> bpf_ns_per_run;
  std::vector<double> steady_passes;  // each measurement's steady figure, when averaged
  bool ok = false;
};

// How to run one measurement.
struct Measurement {
  std::vector<std::string> args;
  int seconds = 0;
  int warmup = 0;                  // 0: a third of `seconds`, at least 3
  bool bpf = false;                // read the omniprof BPF programs' statistics
  bool stop_with_sigterm = false;  // `omniprof run`: SIGTERM at `seconds`
};

// The ids of the BPF programs process `pid` holds open (fdinfo's prog_id).
std::set<std::string> bpf_program_ids(pid_t pid) {
  std::set<std::string> ids;
  const std::string proc = "/proc/" + std::to_string(pid);
  DIR* fds = opendir((proc + "/fd").c_str());
  if (!fds) return ids;
  while (dirent* entry = readdir(fds)) {
    if (entry->d_name[0] == '.') continue;
    char target[64] = {};
    if (readlink((proc + "/fd/" + entry->d_name).c_str(), target, sizeof(target) - 1) <= 0) continue;
    if (std::string(target) != "anon_inode:bpf-prog") continue;
    std::ifstream fdinfo(proc + "/fdinfo/" + entry->d_name);
    std::string line;
    while (std::getline(fdinfo, line)) {
      if (line.rfind("prog_id:", 0) == 0) ids.insert(std::to_string(std::strtoull(line.c_str() + 8, nullptr, 10)));
    }
  }
  closedir(fds);
  return ids;
}

// run_time_ns / run_cnt of the BPF programs of process `pid` (those it holds
// open, so that another omniprof running on the machine is not counted; all
// of that name when it holds none) whose names start with a prefix.
std::map<std::string, double> bpf_program_costs(pid_t pid, const std::vector<std::string>& prefixes) {
  std::map<std::string, double> costs;
  const std::set<std::string> ids = bpf_program_ids(pid);
  FILE* pipe = popen("bpftool prog show 2>/dev/null", "r");
  if (!pipe) return costs;
  std::string text;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) text.append(buffer, n);
  pclose(pipe);
  static const std::regex entry(R"((\d+): [^\n]*name (\S+)[^\n]*run_time_ns (\d+) run_cnt (\d+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), entry); it != std::sregex_iterator(); ++it) {
    if (!ids.empty() && !ids.count((*it)[1])) continue;
    std::string name = (*it)[2];
    double runs = std::stod((*it)[4]);
    for (const auto& prefix : prefixes) {
      if (name.rfind(prefix, 0) == 0 && runs > 0) costs[name] = std::stod((*it)[3]) / runs;
    }
  }
  return costs;
}

// MB per minute, least squares over (seconds, MB) samples; NAN with fewer than 3.
double slope_mb_per_min(const std::vector<std::pair<double, double>>& samples) {
  double n = 0, st = 0, sr = 0, stt = 0, str = 0;
  for (const auto& [t, mb] : samples) {
    if (mb <= 0) continue;
    n += 1;
    st += t;
    sr += mb;
    stt += t * t;
    str += t * mb;
  }
  double d = n * stt - st * st;
  return n >= 3 && d > 0 ? 60 * (n * str - st * sr) / d : NAN;
}

// The last host.bpf_map_bytes in the file at `path`, in MB: record prints
// "  host.bpf_map_bytes  N" among its counters, run "... host.bpf_map_bytes=N ..."
// in each round's log line.
double last_bpf_map_mb(const std::string& path) {
  std::ifstream output(path);
  std::string line;
  double mb = 0;
  static const std::regex map_bytes(R"((?:^|\s)host\.bpf_map_bytes(?:\s+|=)(\d+))");
  while (std::getline(output, line)) {
    for (auto it = std::sregex_iterator(line.begin(), line.end(), map_bytes); it != std::sregex_iterator(); ++it) {
      mb = std::stod((*it)[1]) / (1024.0 * 1024.0);
    }
  }
  return mb;
}

Usage measure(const Measurement& m) {
  const char* stdout_path = "/tmp/omniprof-bench-output.txt";
  const char* stderr_path = "/tmp/omniprof-bench-stderr.txt";
  auto start = Clock::now();
  auto at = [&](double s) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  auto since_start = [&](Clock::time_point t) { return std::chrono::duration<double>(t - start).count(); };
  pid_t pid = spawn(m.args, stdout_path, stderr_path);
  const std::string pid_text = std::to_string(pid);
  int warmup = m.warmup > 0 ? m.warmup : std::max(3, m.seconds / 3);
  std::this_thread::sleep_for(at(warmup) - Clock::now());
  double cpu_a = process_cpu_seconds(pid);
  auto t_a = Clock::now();
  // VmRSS every 5 s in the steady window, and at its end.
  std::vector<std::pair<double, double>> rss;
  const auto steady_end = at(m.seconds - 2);
  for (double t = warmup; at(t) < steady_end; t += 5) {
    std::this_thread::sleep_until(at(t));
    rss.emplace_back(since_start(Clock::now()), status_bytes("VmRSS:", pid_text) / (1024.0 * 1024.0));
  }
  std::this_thread::sleep_until(steady_end);
  double cpu_b = process_cpu_seconds(pid);
  auto t_b = Clock::now();
  Usage u;
  u.end_rss_mb = status_bytes("VmRSS:", pid_text) / (1024.0 * 1024.0);
  rss.emplace_back(since_start(t_b), u.end_rss_mb);
  u.rss_slope_mb_per_min = slope_mb_per_min(rss);
  if (m.bpf) u.bpf_ns_per_run = bpf_program_costs(pid, {"omniprof_", "native_unwind"});
  if (m.stop_with_sigterm) {
    std::this_thread::sleep_until(at(m.seconds));
    kill(pid, SIGTERM);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  double wall = since_start(Clock::now());
  double total_cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
                     usage.ru_stime.tv_usec / 1e6;
  u.steady_cpu_per_s = (cpu_b - cpu_a) / std::chrono::duration<double>(t_b - t_a).count();
  u.total_cpu_per_s = total_cpu / wall;
  u.max_rss_mb = usage.ru_maxrss / 1024.0;
  u.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  u.bpf_map_mb = std::max(last_bpf_map_mb(stdout_path), last_bpf_map_mb(stderr_path));
  unlink(stdout_path);
  unlink(stderr_path);
  return u;
}

// The mean of several measurements of one binary (peak RSS: the highest).
Usage mean_usage(const std::vector<Usage>& runs) {
  if (runs.size() == 1) return runs[0];
  Usage u;
  u.ok = true;
  double n = static_cast<double>(runs.size());
  int slopes = 0;
  double slope_sum = 0;
  for (const Usage& r : runs) {
    u.steady_cpu_per_s += r.steady_cpu_per_s / n;
    u.total_cpu_per_s += r.total_cpu_per_s / n;
    u.end_rss_mb += r.end_rss_mb / n;
    u.max_rss_mb = std::max(u.max_rss_mb, r.max_rss_mb);
    u.bpf_map_mb += r.bpf_map_mb / n;
    if (!std::isnan(r.rss_slope_mb_per_min)) {
      slope_sum += r.rss_slope_mb_per_min;
      ++slopes;
    }
    for (const auto& [name, ns] : r.bpf_ns_per_run) u.bpf_ns_per_run[name] += ns / n;
    u.steady_passes.push_back(r.steady_cpu_per_s);
    u.ok = u.ok && r.ok;
  }
  u.rss_slope_mb_per_min = slopes ? slope_sum / slopes : NAN;
  return u;
}

int g_tool_width = 9;

void print_header() {
  std::printf("%-7s %4s  %-*s %9s %9s %8s %8s %8s %8s  %s\n", "load", "Hz", g_tool_width, "tool", "steady", "total",
              "RSS end", "RSS peak", "maps MB", "MB/min", "BPF ns/run; omniprof/perf");
}

void print_row(const char* load, int hz, const std::string& tool, const Usage& u, const std::string& extra) {
  char slope[32] = "-";
  if (!std::isnan(u.rss_slope_mb_per_min)) {
    double rounded = std::round(u.rss_slope_mb_per_min * 100) / 100;
    std::snprintf(slope, sizeof(slope), "%+.2f", rounded == 0 ? 0.0 : rounded);  // no "-0.00"
  }
  std::string passes;
  if (u.steady_passes.size() > 1) {
    passes = "passes";
    for (double s : u.steady_passes) {
      char one[32];
      std::snprintf(one, sizeof(one), " %.3f%%", 100 * s);
      passes += one;
    }
    passes += "; ";
  }
  std::string notes = passes + extra + (u.ok ? "" : "  (run failed)");
  while (!notes.empty() && notes.back() == ' ') notes.pop_back();
  std::printf("%-7s %4d  %-*s %8.3f%% %8.3f%% %8.1f %8.1f %8.1f %8s%s%s\n", load, hz, g_tool_width, tool.c_str(),
              100 * u.steady_cpu_per_s, 100 * u.total_cpu_per_s, u.end_rss_mb, u.max_rss_mb, u.bpf_map_mb, slope,
              notes.empty() ? "" : "  ", notes.c_str());
  std::fflush(stdout);
}

std::string bpf_costs_text(const Usage& u) {
  std::string bpf;
  for (const auto& [name, ns] : u.bpf_ns_per_run) bpf += name + "=" + std::to_string(static_cast<long>(ns)) + " ";
  return bpf;
}

std::string perf_ratio(const Usage& ours, const Usage& perf) {
  char ratio[96];
  std::snprintf(ratio, sizeof(ratio), "steady %.2f, RSS peak %.2f",
                perf.steady_cpu_per_s > 0 ? ours.steady_cpu_per_s / perf.steady_cpu_per_s : 0.0,
                perf.max_rss_mb > 0 ? ours.max_rss_mb / perf.max_rss_mb : 0.0);
  return ratio;
}

bool runs(const std::string& command) { return system((command + " >/dev/null 2>&1").c_str()) == 0; }

// `omniprof run`'s config for the interp scene; returns its path.
std::string write_run_config(const std::string& dir, int hz) {
  std::string path = dir + "/config-" + std::to_string(hz) + ".yaml";
  std::ofstream(path) << "round_seconds: 10\n"
                      << "sampling:\n  frequency_hz: " << hz << "\n"
                      << "output:\n  directory: " << dir << "/profiles\n"
                      << "runtimes: {python: true, ruby: true, native: true}\n";
  return path;
}

// `run`'s start-up (the interpreters' tables) is over within 15 s; an
// hour-long measurement's slope is taken over all but its first minute.
int interp_warmup(int seconds) { return std::max(15, std::min(seconds / 3, 60)); }

// perf's steady rate needs no hour: an hour-long measurement has ten minutes
// of perf beside it.
constexpr int kLongestPerfSeconds = 600;

}  // namespace

int main(int argc, char** argv) {
  int base_seconds = argc > 1 ? std::max(8, atoi(argv[1])) : 20;
  auto usage = [] {
    std::fprintf(stderr, "usage: agent_overhead [SECONDS [idle|busy|50procs|interp|all[@HZ] [BINARY...]]]\n");
    return 2;
  };
  std::string only = argc > 2 ? argv[2] : "";
  // SCENARIO@HZ: that frequency only (an hour-long run of one); 0: 19 and 99.
  int only_hz = 0;
  if (auto at = only.find('@'); at != std::string::npos) {
    only_hz = atoi(only.c_str() + at + 1);
    only.erase(at);
    if (only_hz <= 0) return usage();
  }
  if (only == "all") only.clear();
  std::vector<std::string> binaries;
  for (int i = 3; i < argc; ++i) binaries.push_back(argv[i]);
  const bool labelled = !binaries.empty();
  if (binaries.empty()) binaries.push_back(OMNIPROF_BINARY);
  auto label = [&](const std::string& binary) { return labelled ? binary : std::string("omniprof"); };
  for (const auto& binary : binaries) g_tool_width = std::max<int>(g_tool_width, label(binary).size());
  for (const auto& binary : binaries) {
    if (access(binary.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "agent_overhead: %s is not an executable\n", binary.c_str());
      return 2;
    }
  }
  const std::vector<std::string> scenarios = {"idle", "busy", "50procs", "interp"};
  if (!only.empty() && std::find(scenarios.begin(), scenarios.end(), only) == scenarios.end()) return usage();
  std::string busy = OMNIPROF_BUSY_WORKLOAD;
  int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  bool have_perf = runs("perf --version");
  std::ofstream("/proc/sys/kernel/bpf_stats_enabled") << "1";
  const int long_seconds = base_seconds * 3;
  const int interp_seconds = std::max(60, base_seconds * 3);

  std::printf("agent overhead: %d s per measurement (50procs: %d s, interp: %d s), %d CPUs; CPU in %% of one core,"
              " memory in MB\n",
              base_seconds, long_seconds, interp_seconds, cpus);
  print_header();
  // idle; every core busy; 50 processes of seven different -fomit-frame-pointer
  // programs (each needing unwind tables), sharing the cores; the interpreters.
  const std::vector<std::string> fifty = {OMNIPROF_WORKLOADS "/chain_nofp", OMNIPROF_WORKLOADS "/chain_nofp_nopie",
                                          OMNIPROF_WORKLOADS "/chain_nofp_static", OMNIPROF_WORKLOADS "/threads_nofp",
                                          OMNIPROF_WORKLOADS "/recursion_nofp", OMNIPROF_WORKLOADS "/chain_nofp_shared",
                                          OMNIPROF_WORKLOADS "/dlopen_nofp"};
  for (const std::string& name : scenarios) {
    std::vector<pid_t> load;
    if (!only.empty() && only != name) continue;
    const bool interp = name == "interp";
    int seconds = interp ? interp_seconds : name == "50procs" ? long_seconds : base_seconds;
    // Every measurement of the scene, with room to spare (SIGKILLed at its end).
    int measurements = static_cast<int>(2 * binaries.size()) + 1;
    std::string lifetime = std::to_string(2 * measurements * (seconds + 15) + 60);
    std::string run_dir;
    if (name == "busy") {
      for (int i = 0; i < cpus; ++i) load.push_back(spawn({busy, lifetime}));
    } else if (name == "50procs") {
      for (int i = 0; i < 50; ++i) load.push_back(spawn({fifty[i % fifty.size()], lifetime}));
    } else if (interp) {
      const std::string pyenv = "/root/.pyenv/versions/3.12.1/bin/python3";
      std::string python = access(pyenv.c_str(), X_OK) == 0 ? pyenv : "python3";
      std::string why;
      if (!runs(python + " --version")) why += " no " + python + ";";
      if (!runs("ruby --version")) why += " no ruby on PATH;";
      if (!why.empty()) {
        why.pop_back();
        std::printf("interp: skipped:%s\n", why.c_str());
        continue;
      }
      const std::string w = OMNIPROF_WORKLOADS_SOURCE_DIR;
      load.push_back(spawn({python, w + "/python_recursion.py", "30", lifetime}));
      load.push_back(spawn({python, w + "/python_folding.py", "burn", lifetime}));
      load.push_back(spawn({"ruby", w + "/ruby_recursion.rb", "100", lifetime}));
      load.push_back(spawn({"ruby", w + "/ruby_mixed.rb", lifetime}));
      char dir_template[] = "/tmp/omniprof-bench-interp.XXXXXX";
      if (!mkdtemp(dir_template)) {
        std::perror("mkdtemp");
        continue;
      }
      run_dir = dir_template;
    }
    if (!load.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(interp ? 2000 : 500));
    const char* load_name = name.c_str();
    for (int hz : only_hz ? std::vector<int>{only_hz} : std::vector<int>{19, 99}) {
      if (name == "50procs" && hz != 19 && !only_hz) continue;
      auto ours_measurement = [&](const std::string& binary) {
        Measurement m;
        m.seconds = seconds;
        m.bpf = true;
        if (interp) {
          m.args = {binary, "run", "--config", write_run_config(run_dir, hz)};
          m.warmup = interp_warmup(seconds);
          m.stop_with_sigterm = true;
        } else {
          m.args = {binary, "record", "-F", std::to_string(hz), "-d", std::to_string(seconds),
                    "-o", "/tmp/omniprof-bench.pb.gz"};
        }
        Usage u = measure(m);
        if (!run_dir.empty()) std::filesystem::remove_all(run_dir + "/profiles");
        return u;
      };
      // B1..Bn, perf, and in the interp scene with several binaries Bn..B1.
      std::vector<std::vector<Usage>> ours(binaries.size());
      for (size_t i = 0; i < binaries.size(); ++i) ours[i].push_back(ours_measurement(binaries[i]));
      Usage perf;
      if (have_perf) {
        Measurement m;
        m.seconds = std::min(seconds, kLongestPerfSeconds);
        m.args = {"perf", "record", "-a", "-g", "-F", std::to_string(hz), "-o", "/tmp/omniprof-bench.perf.data",
                  "--", "sleep", std::to_string(m.seconds)};
        if (interp) m.warmup = interp_warmup(m.seconds);
        perf = measure(m);
      }
      if (interp && binaries.size() > 1) {
        for (size_t i = binaries.size(); i-- > 0;) ours[i].push_back(ours_measurement(binaries[i]));
      }
      for (size_t i = 0; i < binaries.size(); ++i) {
        Usage u = mean_usage(ours[i]);
        print_row(load_name, hz, label(binaries[i]), u,
                  bpf_costs_text(u) + (have_perf ? "omniprof/perf: " + perf_ratio(u, perf) : ""));
      }
      if (have_perf) print_row(load_name, hz, "perf", perf, "");
    }
    for (pid_t pid : load) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (!run_dir.empty()) std::filesystem::remove_all(run_dir);
  }
  unlink("/tmp/omniprof-bench.pb.gz");
  unlink("/tmp/omniprof-bench.perf.data");
  return 0;
}
