// What the interpreter tests (python_test.cpp, ruby_test.cpp) share beside
// the samples (profile_samples.h): the interpreters they run, the scripts
// they start, and waiting for a workload's result file.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_support.h"
#include "profile_samples.h"

namespace omniprof::e2e {

struct Interpreter {
  std::string name;  // cpython_3_12, debian_ruby_3_1
  std::string path;
};

// gtest prints the parameter of a failed test with this.
inline void PrintTo(const Interpreter& interpreter, std::ostream* out) { *out << interpreter.path; }

// "name=path,name=path" (tests/CMakeLists.txt: OMNIPROF_PYTHON_INTERPRETERS, ...).
inline std::vector<Interpreter> parse_interpreters(const std::string& text) {
  std::vector<Interpreter> list;
  std::istringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    auto eq = entry.find('=');
    if (eq != std::string::npos) list.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
  }
  return list;
}

// A workload script of the source tree (tests/workloads/NAME).
inline std::string script(const std::string& name) {
  return std::string(OMNIPROF_TEST_SOURCE_DIR) + "/workloads/" + name;
}

inline std::string slurp(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// Waits up to `limit` for a file the workload renames into place when whole.
inline bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// What `omniprof record` of some processes left: its exit status, what it
// printed, and the profile's samples (empty, with `error`, if go cannot
// read it).
struct RecordedProfile {
  int status = -1;
  std::string output;
  std::vector<Sample> samples;  // of the profile with every native frame kept
  std::string error;
  // The same samples as `record` writes them by default (the interpreter's
  // internals folded into its frames): what a user opens.
  std::string folded_profile;
};

// What a test does while `omniprof record` runs: `started` once its clock
// starts, `stopped` once it has stopped sampling (a workload's own sampler
// counts over the same window as the profile).
struct RecordingHooks {
  std::function<void()> started;
  std::function<void()> stopped;
};

// Records `pids` for `seconds` at 199 Hz, with `environment` (e.g.
// {"OMNIPROF_HIDE_BPF_FEATURES=bpf_loop"}) set for the agent. The stacks are
// judged with every native frame (--keep-interpreter-internals); the folded
// view of the same samples is written beside (--other-view-output).
inline RecordedProfile record_pids(const std::vector<pid_t>& pids, const std::string& seconds,
                                   const std::vector<std::string>& environment = {},
                                   const RecordingHooks& hooks = {}) {
  const std::string dir = temp_dir("record");
  const std::string profile = dir + "/profile.pb.gz", log = dir + "/record.log";
  const std::string folded = dir + "/profile-folded.pb.gz";
  std::vector<std::string> args = {"-d", seconds, "-F", "199", "--keep-interpreter-internals"};
  for (pid_t pid : pids) args.insert(args.end(), {"-p", std::to_string(pid)});
  args.insert(args.end(), {"-o", profile, "--other-view-output", folded});
  BackgroundRecord record(OMNIPROF_BINARY, args, log, environment);
  RecordedProfile recorded;
  recorded.folded_profile = folded;
  // Emulated guests take a minute or more to load and verify BPF.
  const auto limit = std::chrono::seconds(300);
  if (hooks.started && record.wait_until_recording(limit)) hooks.started();
  if (hooks.stopped && record.wait_until_sampling_stopped(limit)) hooks.stopped();
  recorded.status = record.wait();
  recorded.output = record.output();
  if (recorded.status == 0) recorded.samples = read_samples(profile, &recorded.error);
  return recorded;
}

// `function`'s share (percent) of process `pid`'s flat time in user space in
// `go tool pprof -top -tagfocus=pid=PID -ignore='^\[kernel\.kallsyms\]$'
// PROFILE`, run as a user runs it; -1 with `*output` saying why when pprof
// shows nothing of the process. pprof's percentages are of the whole
// profile: the share is the function's flat over the flat of every row shown
// for the process. Samples in the kernel (-ignore matches the kernel's
// mapping) are left out: interrupt returns and scheduling are the kernel's
// time, not the interpreter's, and on a busy (or emulated) machine they are
// a fifth of it.
inline double flat_share_in_top(const std::string& profile, pid_t pid, const std::string& function,
                                std::string* output) {
  std::string error;
  auto rows = read_top_as_user(profile, &error,
                               {"-tagfocus=pid=" + std::to_string(pid), "-ignore=^\\[kernel\\.kallsyms\\]$"}, output);
  double flat = 0, total = 0;
  for (const auto& row : rows) {
    total += row.flat_percent;
    if (row.name == function) flat = row.flat_percent;
  }
  if (total <= 0) {
    *output += error;
    return -1;
  }
  return flat * 100 / total;
}

// How far (in percentage points) a function's share of `samples` samples
// may lie from the share its thread's own CPU clock gives, `expected_percent`:
// 5 points, or four standard errors of a share counted in that many samples
// when that is wider. Sampling is a count: at 500 samples (a TCG guest's
// recording) a 45% share's standard error is 2.2 points, so a fixed 5 would
// fail about one check in sixty for no fault of the profiler; at the host's
// thousands of samples the 5 points hold.
inline double share_tolerance_points(double expected_percent, int64_t samples) {
  const double p = std::clamp(expected_percent / 100, 0.0, 1.0);
  const double standard_error = 100 * std::sqrt(p * (1 - p) / static_cast<double>(std::max<int64_t>(samples, 1)));
  return std::max(5.0, 4 * standard_error);
}

// Of the samples `selected` picks, how many (by count) `whole` accepts, and
// one it does not, as text.
struct Judged {
  int64_t total = 0;
  int64_t whole = 0;
  std::string counterexample;
};
template <typename Selected, typename Whole>
Judged judge(const std::vector<Sample>& samples, Selected&& selected, Whole&& whole) {
  Judged judged;
  for (const Sample& s : samples) {
    if (!selected(s)) continue;
    judged.total += s.count;
    if (whole(s)) {
      judged.whole += s.count;
    } else if (judged.counterexample.empty()) {
      judged.counterexample = s.text();
    }
  }
  return judged;
}

}  // namespace omniprof::e2e
