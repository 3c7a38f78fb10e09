// Helpers for end-to-end tests: they run the real omniprof binary, real
// workloads and `go tool pprof` as an independent reader of what we wrote.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace omniprof::e2e {

// Empty if BPF and perf events are usable here, else the reason.
std::string bpf_unusable_reason();

// In CI (CI=true) a test that needs BPF fails when BPF is unusable; elsewhere
// it is skipped with one line saying why.
#define OMNIPROF_REQUIRE_BPF()                                                       \
  do {                                                                               \
    std::string reason_ = ::omniprof::e2e::bpf_unusable_reason();                    \
    if (!reason_.empty()) {                                                          \
      if (::omniprof::e2e::in_ci()) FAIL() << "BPF unusable in CI: " << reason_;     \
      GTEST_SKIP() << "BPF unusable here: " << reason_;                              \
    }                                                                                \
  } while (0)

#define OMNIPROF_REQUIRE_GO()                                                        \
  do {                                                                               \
    if (!::omniprof::e2e::have_go()) {                                               \
      if (::omniprof::e2e::in_ci()) FAIL() << "go (golang-go) missing in CI";        \
      GTEST_SKIP() << "go tool pprof unavailable (apt install golang-go)";           \
    }                                                                                \
  } while (0)

bool in_ci();
bool have_go();

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs argv ahead of the workloads (a higher priority: see
// run_ahead_of_workloads), waits, captures stdout and stderr.
CommandResult run_command(const std::vector<std::string>& argv);

// A child process running in the background until the object dies.
class BackgroundProcess {
 public:
  // A workload runs at the test's own priority; a judge (omniprof record or
  // run) ahead of the workloads, as run_command runs everything it starts.
  enum class Role { kWorkload, kJudge };
  explicit BackgroundProcess(const std::vector<std::string>& argv, Role role = Role::kWorkload);
  ~BackgroundProcess();
  pid_t pid() const { return pid_; }
  void signal(int sig);
  int wait();  // exit code
  // The exit code if the process has ended (it is then reaped), else nullopt.
  std::optional<int> poll();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// `BINARY record ARGS` in the background, ahead of the workloads, its
// stdout and stderr in LOG, with ENVIRONMENT ("NAME=VALUE" each) set for it.
// What a test does to a workload once the agent records (wait_for_recording)
// it does after wait_until_recording, not after a guessed delay.
class BackgroundRecord {
 public:
  BackgroundRecord(const std::string& binary, const std::vector<std::string>& args, const std::string& log,
                   const std::vector<std::string>& environment = {});
  pid_t pid() const { return process_.pid(); }
  // wait_for_recording of this agent: false if it ended first or LIMIT
  // passed (emulated guests take a minute or more to load and verify BPF).
  bool wait_until_recording(std::chrono::seconds limit = std::chrono::seconds(120));
  // wait_for_sampling_stopped of this agent.
  bool wait_until_sampling_stopped(std::chrono::seconds limit = std::chrono::seconds(300));
  int wait();  // exit code
  std::string output() const;  // what it has logged so far

 private:
  std::string log_;
  BackgroundProcess process_;
};

// Runs `go tool pprof OPTIONS PROFILE` (with a private GOCACHE and HOME).
CommandResult run_go_pprof(const std::vector<std::string>& options, const std::string& profile_path);

// One sample as `go tool pprof -traces` prints it.
struct PprofTrace {
  std::map<std::string, std::string> labels;  // pid, tid, comm, thread_name
  int64_t count = 0;
  std::vector<std::string> frames;  // leaf first
};
// Reads a profile with `go tool pprof -traces -sample_index=samples`, plus
// `options` (e.g. "-lines": each frame is then "function file:line" where
// the profile has a file and line for it).
std::vector<PprofTrace> read_traces_with_go(const std::string& profile_path, std::string* error,
                                            const std::vector<std::string>& options = {});

// The same as a user reads it: `go tool pprof -traces [options] PROFILE`,
// nothing else (pprof's own demangling and name simplification included).
std::vector<PprofTrace> read_traces_as_user(const std::string& profile_path, std::string* error,
                                            const std::vector<std::string>& options = {});

// One row of `go tool pprof -top`: flat and cumulative percentages of the
// total pprof shows, and the name as printed.
struct PprofTopRow {
  double flat_percent = 0;
  double cum_percent = 0;
  std::string name;
};
// `go tool pprof -top [options] PROFILE` as a user runs it, showing every
// node (-nodecount, -nodefraction=0); its rows, heaviest first; percentages
// are of the whole profile's total, focused or not; empty with `*error` set when pprof fails. `output`
// (optional) gets pprof's whole output, for failure messages.
std::vector<PprofTopRow> read_top_as_user(const std::string& profile_path, std::string* error,
                                          const std::vector<std::string>& options = {},
                                          std::string* output = nullptr);

// A frame of `go tool pprof -traces -lines` split into its function and its
// "file:line" (file empty, line 0 when the frame has none).
struct FrameLocation {
  std::string function;
  std::string file;
  int line = 0;
};
FrameLocation split_frame_location(const std::string& frame);

// True once `omniprof record` (PID, its stderr going to LOG_PATH) records:
// its log says the unwind tables of the processes found at start are ready
// ("unwind tables ready", cli/unwind_table_wait.h), or that it stopped
// waiting for them. Samples taken before are not in the profile, so a
// workload whose whole walks a test judges, or that must run while the clock
// runs, starts after this, not after a guessed delay (start-up takes seconds
// on a cold page cache or a loaded PREEMPT_RT guest). False if PID ends
// first or LIMIT passes.
bool wait_for_recording(pid_t pid, const std::string& log_path, std::chrono::seconds limit);

// True once that `omniprof record` has stopped sampling (its log says
// "sampling stopped"): what it profiled lies between wait_for_recording and
// this. False if PID ends first or LIMIT passes.
bool wait_for_sampling_stopped(pid_t pid, const std::string& log_path, std::chrono::seconds limit);

// True once process PID maps a file whose path contains `path` (a library it
// loads with dlopen), false if it ends first or LIMIT passes.
bool wait_for_mapping(pid_t pid, const std::string& path, std::chrono::seconds limit);

// The traces whose pid label is `pid`.
std::vector<PprofTrace> traces_of_pid(const std::vector<PprofTrace>& traces, pid_t pid);

// Samples whose leaf is chain.front(), and how many of them carry the whole
// chain (leaf first, consecutive frames); one that does not, as an example.
struct ChainCount {
  int64_t leaf = 0;
  int64_t whole = 0;
  std::string counterexample;
};
ChainCount count_chain(const std::vector<PprofTrace>& traces, const std::vector<std::string>& chain);

// A new directory /tmp/omniprof-e2e-PREFIX-XXXXXX. The test binary removes
// the ones it made when it ends with every test passed; a failed run keeps
// them (profiles, logs) to look at, as does OMNIPROF_KEEP_TEST_DIRS=1.
std::string temp_dir(const std::string& prefix);
std::string workload(const std::string& name);

// The CPU time PID has used, in seconds (utime + stime of /proc/PID/stat);
// -1 where unreadable.
double cpu_seconds(pid_t pid);
// The CPU time each live thread of PID has used, in seconds, by tid
// (/proc/PID/task/TID/stat); empty once PID has ended.
std::map<pid_t, double> thread_cpu_seconds(pid_t pid);

// A counter of `omniprof record`'s output ("  NAME   VALUE"), -1 when not
// printed (most counters are printed only when not zero; a few, such as
// host.plugin_ticks_*, always are).
long long counter(const std::string& output, const std::string& name);

}  // namespace omniprof::e2e
