// Process churn benchmark: a machine starting about 400 short processes a
// second, recorded whole-machine at 99 Hz. The scene: 4 parallel shell
// loops, each running over and over `sh -c '<short busy loop>'`, `/bin/true`
// and `env true` (3 processes, 4 execs per round), which keep both cores of
// a 2-core machine busy. Most of those processes live a few milliseconds:
// an agent that reads a process from /proc only after its first sample
// finds it gone, and its walks run without its mappings.
//
// Each omniprof binary given (default: this build's) runs
// `omniprof record -F 99 -d SECONDS` (the whole machine: no -p; record has
// no -a) under the churn; then, in the same run and under the same churn,
// `perf record -a -g -F 99 -- sleep SECONDS`, the baseline for sample
// counts and cost. Figures (one column per tool):
//
//   processes started/s  forks on the whole machine per second
//           (/proc/stat `processes`: every fork and clone, so also the
//           tools' own threads, a handful) over the steady window below;
//           also measured for 3 s with no profiler before the first run.
//   samples in profile  the samples of the written profile ("wrote FILE
//           (N samples)"): the SECONDS of the recording clock, idle CPUs
//           not sampled. perf: samples in perf.data whose pid is not 0
//           (`perf script -F pid`); the idle ones are perf.samples_idle.
//   samples recorded (BPF)  samples_recorded: every sample the BPF
//           side stored, including those of record's start-up wait that
//           the profile drops (the stop reasons below count those too).
//   user-space walks  the walks the native unwinder ended: the sum of every
//           native.stop_* counter plus tail_call_limit_truncated (a walk
//           cut by the tail-call budget). bpf/entry.bpf.c's STOP counts one
//           reason per sample: a native walk's, set in
//           omniprof_native_walk_done (an interpreter walk after it ends
//           with reason 0 and keeps it, unless it runs out of tail calls),
//           or, for a sample with no user stack to walk,
//           kernel_thread_samples, user_memory_gone_samples (a process past
//           exit_mm, or in execve between the new image's mm replacing the
//           old and the new image starting: printed on its own row) or
//           user_regs_errors. So this is also samples_recorded minus those
//           three (printed as a check).
//   walks ending at the outermost frame  native.stop_outermost as a % of
//           the user-space walks (goal >= 95%), and as a % of
//           samples_recorded (kernel threads included; the issue first
//           quoted 2779 walks of 5003 samples, 56%). stop_outermost counts
//           an unwind-table row marking the outermost frame and a frame
//           pointer of 0; the latter is also what a frame-pointer guess
//           through code without frame pointers can end on.
//   samples of processes never described  host.samples_of_unknown_processes
//           (samples whose process the round's snapshot does not hold: it
//           was gone before it was read), as a % of the profile's samples.
//           Kernel threads started after record's start-up scan are never
//           read either and count there too (at most kernel_thread_samples).
//   agent CPU  the tool process's own CPU time (all threads' schedstat run
//           time, as agent_overhead measures it) in % of one core: steady,
//           over the window from 2 s after the recording clock started to
//           2 s before it ends (goal <= 2%); total, getrusage of the whole
//           process life (start-up, final naming and writing included)
//           over its wall time.
//   RSS     VmRSS of the tool process, sampled every second: 1 s into the
//           recording clock, at 1/4, 1/2, 3/4 of it and at its end, the peak
//           (ru_maxrss), and the slope in MB per minute (least squares over
//           the steady window's samples).
//   start-up  seconds from starting record to its clock starting (the log
//           line "unwind tables ready"), when samples begin to count.
// Then the counters of every column, side by side.
//
// The recording clock of omniprof starts when record says "unwind tables
// ready"; perf's when it starts. Tools run one after another, in the order
// given, perf last, under the one churn that runs throughout.
//
//   build/bench/process_churn [SECONDS [OMNIPROF...]]   (root; default 30 s,
//   at least 8; OMNIPROF: binaries to measure, default this build's; e.g.
//   `process_churn 30 OLD/bin/omniprof NEW/bin/omniprof` for a before/after)
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
using omniprof::bench::run_shell;
using omniprof::bench::spawn;
using omniprof::bench::stat_counters;
using omniprof::bench::status_bytes;
using Clock = std::chrono::steady_clock;

constexpr int kLoops = 4;
constexpr int kHz = 99;
// Iterations of the busy `sh -c` loop: with it, the four loops start about
// 400 processes a second on this project's quiet 2-core test machine with no
// profiler (the run prints the rate it got).
constexpr int kBusyIterations = 9000;

const char* const kProfile = "/tmp/omniprof-churn.pb.gz";
const char* const kStdout = "/tmp/omniprof-churn.out";
const char* const kStderr = "/tmp/omniprof-churn.err";
const char* const kPerfData = "/tmp/omniprof-churn.perf.data";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Processes (forks and clones) started on the machine since boot.
unsigned long long forks_since_boot() {
  std::ifstream stat("/proc/stat");
  std::string key;
  unsigned long long value = 0;
  while (stat >> key) {
    if (key == "processes" && stat >> value) return value;
    stat.ignore(1 << 20, '\n');
  }
  return 0;
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The churn: kLoops shell loops of short processes, until stop().
struct Churn {
  std::vector<pid_t> loops;
  void start() {
    std::string busy = "i=0; while [ $i -lt " + std::to_string(kBusyIterations) + " ]; do i=$((i+1)); done";
    std::string loop = "while :; do sh -c '" + busy + "'; /bin/true; env true; done";
    for (int i = 0; i < kLoops; ++i) loops.push_back(spawn({"sh", "-c", loop}));
  }
  void stop() {
    for (pid_t pid : loops) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    loops.clear();
  }
};

// One observation of the measured process, every second.
struct Tick {
  double t = 0;  // seconds since it was started
  double cpu_s = 0;
  double rss_mb = 0;
  unsigned long long forks = 0;
};

struct Run {
  std::string name;
  bool ok = false;
  double wall_s = 0;
  double cpu_s = 0;       // getrusage: the whole life
  double peak_rss_mb = 0;  // ru_maxrss
  double clock_start = 0;  // seconds after the start when the recording clock started
  bool clock_start_seen = false;
  int seconds = 0;  // the recording clock's length
  std::vector<Tick> ticks;
  std::string out, err;

  // The first tick at or after t, the last at or before t.
  const Tick* tick_after(double t) const {
    for (const auto& tick : ticks) {
      if (tick.t >= t) return &tick;
    }
    return nullptr;
  }
  const Tick* tick_before(double t) const {
    const Tick* found = nullptr;
    for (const auto& tick : ticks) {
      if (tick.t <= t) found = &tick;
    }
    return found;
  }
  // The steady window: from 2 s after the clock starts to 2 s before it ends.
  std::pair<const Tick*, const Tick*> steady() const {
    const Tick* a = tick_after(clock_start + 2);
    const Tick* b = tick_before(clock_start + seconds - 2);
    if (!a || !b || b->t <= a->t) return {nullptr, nullptr};
    return {a, b};
  }
  double steady_cpu_per_s() const {
    auto [a, b] = steady();
    return a ? (b->cpu_s - a->cpu_s) / (b->t - a->t) : NAN;
  }
  double forks_per_s() const {
    auto [a, b] = steady();
    return a ? (b->forks - a->forks) / (b->t - a->t) : NAN;
  }
  double total_cpu_per_s() const { return wall_s > 0 ? cpu_s / wall_s : NAN; }
  // RSS at a fraction of the recording clock (1 = its end); 0: 1 s after
  // its start (perf's clock starts with the process, before its exec).
  double rss_at(double fraction) const {
    const Tick* tick = fraction == 0 ? tick_after(clock_start + 1) : tick_before(clock_start + fraction * seconds);
    return tick ? tick->rss_mb : NAN;
  }
  // MB per minute, least squares over the steady window's ticks.
  double rss_slope_mb_per_min() const {
    auto [a, b] = steady();
    if (!a) return NAN;
    double n = 0, st = 0, sr = 0, stt = 0, str = 0;
    for (const Tick* tick = a; tick <= b; ++tick) {
      if (tick->rss_mb <= 0) continue;
      n += 1;
      st += tick->t;
      sr += tick->rss_mb;
      stt += tick->t * tick->t;
      str += tick->t * tick->rss_mb;
    }
    double d = n * stt - st * st;
    return n >= 3 && d > 0 ? 60 * (n * str - st * sr) / d : NAN;
  }
};

// When the recording clock started, from what record wrote to stderr so far:
// the log line that ends its start-up wait, else its first progress line
// ("recording: N/S s", printed every 5 s) less N.
bool find_clock_start(const std::string& err, double now, double* clock_start) {
  static const std::regex ready("unwind tables (ready|not waited for|not ready after)");
  if (std::regex_search(err, ready)) {
    *clock_start = now;
    return true;
  }
  std::smatch m;
  static const std::regex progress(R"(recording: (\d+)/\d+ s)");
  if (std::regex_search(err, m, progress)) {
    *clock_start = now - std::stod(m[1]);
    return true;
  }
  return false;
}

// Runs args to its end, observing it every second (CPU, RSS, the machine's
// forks) and, for record, watching its stderr for the clock's start (every
// 100 ms).
Run observe(const std::string& name, const std::vector<std::string>& args, int seconds, bool is_record) {
  Run run;
  run.name = name;
  run.seconds = seconds;
  auto t0 = Clock::now();
  pid_t pid = spawn(args, kStdout, kStderr);
  double next_tick = 0;
  int status = 0;
  rusage usage{};
  for (;;) {
    pid_t done = wait4(pid, &status, WNOHANG, &usage);
    double now = seconds_since(t0);
    if (done == pid) {
      run.wall_s = now;
      break;
    }
    if (is_record && !run.clock_start_seen) {
      run.clock_start_seen = find_clock_start(read_file(kStderr), now, &run.clock_start);
    }
    if (now >= next_tick) {
      Tick tick;
      tick.t = now;
      tick.cpu_s = process_cpu_seconds(pid);
      tick.rss_mb = status_bytes("VmRSS:", std::to_string(pid)) / (1024.0 * 1024.0);
      tick.forks = forks_since_boot();
      run.ticks.push_back(tick);
      next_tick += 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  run.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  run.cpu_s = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
              usage.ru_stime.tv_usec / 1e6;
  run.peak_rss_mb = usage.ru_maxrss / 1024.0;
  run.out = read_file(kStdout);
  run.err = read_file(kStderr);
  unlink(kStdout);
  unlink(kStderr);
  return run;
}

// The figures of one column: name -> value (NAN: not applicable).
using Column = std::map<std::string, double>;

double get(const std::map<std::string, double>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

double percent(double part, double whole) { return whole > 0 ? 100 * part / whole : NAN; }

struct Measured {
  bool is_perf = false;
  Run run;
  Column figures;
  std::map<std::string, double> counters;  // record's, or perf's own figures
};

void common_figures(const Run& run, Column& f) {
  f["forks/s"] = run.forks_per_s();
  f["cpu steady"] = 100 * run.steady_cpu_per_s();
  f["cpu total"] = 100 * run.total_cpu_per_s();
  f["cpu s"] = run.cpu_s;
  f["wall s"] = run.wall_s;
  f["startup s"] = run.clock_start;
  for (auto [key, fraction] : {std::pair{"rss 0", 0.0}, {"rss 1/4", 0.25}, {"rss 1/2", 0.5}, {"rss 3/4", 0.75},
                               {"rss 1", 1.0}}) {
    f[key] = run.rss_at(fraction);
  }
  f["rss peak"] = run.peak_rss_mb;
  f["rss slope"] = run.rss_slope_mb_per_min();
}

Measured measure_record(const std::string& name, const std::string& omniprof, int seconds) {
  Measured m;
  m.run = observe(name,
                  {omniprof, "record", "-F", std::to_string(kHz), "-d", std::to_string(seconds), "-o", kProfile},
                  seconds, true);
  unlink(kProfile);
  m.counters = stat_counters(m.run.out);
  const auto& c = m.counters;
  Column& f = m.figures;
  std::smatch match;
  static const std::regex wrote(R"(wrote \S+ \((\d+) samples\))");
  f["profile samples"] = std::regex_search(m.run.out, match, wrote) ? std::stod(match[1]) : NAN;
  f["recorded"] = get(c, "samples_recorded");
  double walks = get(c, "tail_call_limit_truncated");
  for (const auto& [counter, value] : c) {
    if (counter.rfind("native.stop_", 0) == 0) walks += value;
  }
  f["walks"] = walks;
  f["walks check"] = get(c, "samples_recorded") - get(c, "kernel_thread_samples") -
                     get(c, "user_memory_gone_samples") - get(c, "user_regs_errors");
  f["memory gone"] = get(c, "user_memory_gone_samples");
  f["outermost"] = get(c, "native.stop_outermost");
  f["outermost % walks"] = percent(f["outermost"], walks);
  f["outermost % recorded"] = percent(f["outermost"], f["recorded"]);
  f["unknown"] = get(c, "host.samples_of_unknown_processes");
  f["unknown %"] = percent(f["unknown"], f["profile samples"]);
  common_figures(m.run, f);
  if (!m.run.clock_start_seen) f["startup s"] = NAN;
  return m;
}

Measured measure_perf(int seconds) {
  Measured m;
  m.is_perf = true;
  m.run = observe("perf",
                  {"perf", "record", "-a", "-g", "-F", std::to_string(kHz), "-o", kPerfData, "--", "sleep",
                   std::to_string(seconds)},
                  seconds, false);
  // One line per sample: its pid (0: the idle task).
  std::string pids = run_shell(std::string("perf script -i ") + kPerfData + " -F pid 2>/dev/null");
  double all = 0, idle = 0;
  std::istringstream lines(pids);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    all += 1;
    if (std::strtol(line.c_str(), nullptr, 10) == 0) idle += 1;
  }
  unlink(kPerfData);
  Column& f = m.figures;
  for (const char* key : {"recorded", "walks", "walks check", "memory gone", "outermost", "outermost % walks",
                          "outermost % recorded", "unknown", "unknown %"}) {
    f[key] = NAN;
  }
  f["profile samples"] = all - idle;
  common_figures(m.run, f);
  f["startup s"] = NAN;  // perf samples from its start
  m.counters["perf.samples"] = all;
  m.counters["perf.samples_idle"] = idle;
  std::smatch match;
  static const std::regex wrote(R"(Captured and wrote ([\d.]+) MB)");
  if (std::regex_search(m.run.err, match, wrote)) m.counters["perf.data_kb"] = std::round(std::stod(match[1]) * 1024);
  static const std::regex lost(R"(Lost (\d+) chunks)");
  if (std::regex_search(m.run.err, match, lost)) m.counters["perf.lost_chunks"] = std::stod(match[1]);
  return m;
}

void print_row(const char* label, const std::vector<Measured>& columns, const std::string& key, const char* format,
               const std::string& goal = "") {
  std::printf("%-46s", label);
  for (const auto& column : columns) {
    double v = get(column.figures, key);
    char cell[32] = "-";
    if (!std::isnan(v)) std::snprintf(cell, sizeof(cell), format, v);
    std::printf(" %16s", cell);
  }
  std::printf("%s\n", goal.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = argc > 1 ? std::max(8, atoi(argv[1])) : 30;
  std::vector<std::string> binaries;
  for (int i = 2; i < argc; ++i) binaries.push_back(argv[i]);
  if (binaries.empty()) binaries.push_back(OMNIPROF_BINARY);
  if (geteuid() != 0) {
    std::fprintf(stderr, "process_churn: run as root (omniprof and perf record the whole machine)\n");
    return 1;
  }
  for (const auto& binary : binaries) {
    if (access(binary.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "process_churn: %s: not an executable\n", binary.c_str());
      return 1;
    }
  }
  bool have_perf = system("perf --version >/dev/null 2>&1") == 0;
  int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));

  Churn churn;
  churn.start();
  // The churn alone, no profiler.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto t0 = Clock::now();
  unsigned long long forks0 = forks_since_boot();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  double alone_forks_per_s = (forks_since_boot() - forks0) / seconds_since(t0);

  std::printf("process churn: %d loops of `sh -c` (busy loop of %d), `/bin/true`, `env true`; %d CPUs;\n", kLoops,
              kBusyIterations, cpus);
  std::printf("whole machine at %d Hz for %d s per tool; processes started with no profiler: %.0f/s\n", kHz,
              seconds, alone_forks_per_s);
  std::vector<Measured> columns;
  for (size_t i = 0; i < binaries.size(); ++i) {
    std::string name = binaries.size() > 1 ? "omniprof " + std::string(1, static_cast<char>('A' + i)) : "omniprof";
    std::printf("%s: %s\n", name.c_str(), binaries[i].c_str());
    std::fflush(stdout);
    columns.push_back(measure_record(name, binaries[i], seconds));
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (have_perf) {
    std::printf("perf: perf record -a -g -F %d -- sleep %d\n", kHz, seconds);
    std::fflush(stdout);
    columns.push_back(measure_perf(seconds));
  } else {
    std::printf("perf: not installed, no baseline\n");
  }
  churn.stop();

  std::printf("\n%-46s", "");
  for (const auto& column : columns) std::printf(" %16s", column.run.name.c_str());
  std::printf("\n");
  print_row("processes started/s (whole machine)", columns, "forks/s", "%.0f");
  print_row("record start-up, s (to the clock's start)", columns, "startup s", "%.1f");
  print_row("samples in profile (perf: pid != 0)", columns, "profile samples", "%.0f");
  print_row("samples recorded, BPF (start-up included)", columns, "recorded", "%.0f");
  print_row("no user memory (exiting, or exec past the old mm)", columns, "memory gone", "%.0f");
  print_row("user-space walks (native.stop_* + tail limit)", columns, "walks", "%.0f");
  print_row("  check: recorded - kernel thr. - no mem - regs err", columns, "walks check", "%.0f");
  print_row("walks ending at the outermost frame", columns, "outermost", "%.0f");
  print_row("  % of user-space walks", columns, "outermost % walks", "%.1f%%", "  goal >= 95%");
  print_row("  % of samples recorded", columns, "outermost % recorded", "%.1f%%");
  print_row("samples of processes never described", columns, "unknown", "%.0f");
  print_row("  % of samples in profile", columns, "unknown %", "%.1f%%");
  print_row("agent CPU, steady, % of one core", columns, "cpu steady", "%.2f%%", "  goal <= 2%");
  print_row("agent CPU, total (whole life / wall)", columns, "cpu total", "%.2f%%");
  print_row("  CPU s / wall s", columns, "cpu s", "%.2f");
  print_row("  wall s", columns, "wall s", "%.1f");
  print_row("RSS MB 1 s into the clock", columns, "rss 0", "%.1f");
  print_row("RSS MB at 1/4", columns, "rss 1/4", "%.1f");
  print_row("RSS MB at 1/2", columns, "rss 1/2", "%.1f");
  print_row("RSS MB at 3/4", columns, "rss 3/4", "%.1f");
  print_row("RSS MB at clock end", columns, "rss 1", "%.1f");
  print_row("RSS MB peak", columns, "rss peak", "%.1f");
  print_row("RSS slope, MB/min (steady window)", columns, "rss slope", "%+.2f");
  for (const auto& column : columns) {
    if (!column.run.ok) std::printf("(%s exited with an error)\n", column.run.name.c_str());
  }

  // Every counter any column printed, side by side: record prints only the
  // non-zero ones (0: not printed); "-": the other tool's.
  std::set<std::string> names;
  for (const auto& column : columns) {
    for (const auto& [counter, value] : column.counters) names.insert(counter);
  }
  std::printf("\ncounters\n");
  for (const auto& counter : names) {
    std::printf("  %-44s", counter.c_str());
    for (const auto& column : columns) {
      if (column.is_perf != (counter.rfind("perf.", 0) == 0)) {
        std::printf(" %16s", "-");
      } else {
        std::printf(" %16.0f", get(column.counters, counter));
      }
    }
    std::printf("\n");
  }
  return 0;
}
