#include "e2e_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <iterator>
#include <regex>
#include <mutex>
#include <sstream>
#include <thread>

#include "bpf/bpf_support.h"

namespace omniprof::e2e {

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

std::string bpf_unusable_reason() {
  auto r = check_bpf_usable();
  return r ? std::string() : r.error().message;
}

bool have_go() {
  static const bool available = run_command({"go", "version"}).exit_code == 0;
  return available;
}

namespace {

// The agent, pprof and the other tools a test runs to judge: they run ahead
// of the workloads they judge. Under emulation (the kernel-matrix guests,
// two vCPUs shared by up to nine busy workloads) record's start-up, loading
// the BPF programs and building unwind tables, took four times as long
// competing with them for the CPUs. The workloads keep the test's own
// priority, so what is measured (who runs how much) is as before.
constexpr int kJudgeNice = -10;
void run_ahead_of_workloads() {
  // Not root: left as it is (setpriority fails with EACCES, harmlessly).
  setpriority(PRIO_PROCESS, 0, kJudgeNice);
}

std::string slurp_fd(int fd) {
  std::string out;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) out.append(buffer, static_cast<size_t>(n));
  return out;
}

std::vector<char*> to_argv(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& args) {
  CommandResult result;
  std::string out_path = temp_dir("cmd") + "/out", err_path = out_path + ".err";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out, 1);
    dup2(err, 2);
    run_ahead_of_workloads();
    auto argv = to_argv(args);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  int out = open(out_path.c_str(), O_RDONLY), err = open(err_path.c_str(), O_RDONLY);
  result.out = slurp_fd(out);
  result.err = slurp_fd(err);
  close(out);
  close(err);
  return result;
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& args, Role role) {
  pid_ = fork();
  if (pid_ == 0) {
    if (role == Role::kJudge) run_ahead_of_workloads();
    auto argv = to_argv(args);
    execvp(argv[0], argv.data());
    _exit(127);
  }
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void BackgroundProcess::signal(int sig) { kill(pid_, sig); }

std::optional<int> BackgroundProcess::poll() {
  if (reaped_) return std::nullopt;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  reaped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int BackgroundProcess::wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {

bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  return (stat >> pid_field >> comm >> state) && state != "Z";
}

}  // namespace

namespace {

// True once the file at LOG_PATH has a line holding one of NEEDLES, false if
// PID ends first or LIMIT passes.
bool wait_for_log_line(pid_t pid, const std::string& log_path, const std::vector<std::string>& needles,
                       std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream log(log_path);
    for (std::string line; std::getline(log, line);) {
      for (const auto& needle : needles) {
        if (line.find(needle) != std::string::npos) return true;
      }
    }
    if (!process_alive(pid)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

bool wait_for_recording(pid_t pid, const std::string& log_path, std::chrono::seconds limit) {
  return wait_for_log_line(pid, log_path, {"unwind tables ready", "unwind tables not "}, limit);
}

bool wait_for_sampling_stopped(pid_t pid, const std::string& log_path, std::chrono::seconds limit) {
  return wait_for_log_line(pid, log_path, {"sampling stopped"}, limit);
}

bool wait_for_mapping(pid_t pid, const std::string& path, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(maps, line);) {
      if (line.find(path) != std::string::npos) return true;
    }
    if (!process_alive(pid)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

namespace {

std::vector<std::string> record_in_shell(const std::string& binary, const std::vector<std::string>& args,
                                         const std::string& log, const std::vector<std::string>& environment) {
  // The arguments are paths, numbers and settings chosen by the tests:
  // quoting with single quotes is enough.
  std::string command = "exec";
  if (!environment.empty()) command += " env";
  for (const auto& e : environment) command += " '" + e + "'";
  command += " '" + binary + "' record";
  for (const auto& a : args) command += " '" + a + "'";
  command += " > '" + log + "' 2>&1";
  return {"/bin/sh", "-c", command};
}

}  // namespace

BackgroundRecord::BackgroundRecord(const std::string& binary, const std::vector<std::string>& args,
                                   const std::string& log, const std::vector<std::string>& environment)
    : log_(log), process_(record_in_shell(binary, args, log, environment), BackgroundProcess::Role::kJudge) {}

bool BackgroundRecord::wait_until_recording(std::chrono::seconds limit) {
  return wait_for_recording(process_.pid(), log_, limit);
}

bool BackgroundRecord::wait_until_sampling_stopped(std::chrono::seconds limit) {
  return wait_for_sampling_stopped(process_.pid(), log_, limit);
}

int BackgroundRecord::wait() { return process_.wait(); }

std::string BackgroundRecord::output() const {
  std::ifstream in(log_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<PprofTrace> traces_of_pid(const std::vector<PprofTrace>& traces, pid_t pid) {
  std::vector<PprofTrace> out;
  for (const auto& t : traces) {
    auto it = t.labels.find("pid");
    if (it != t.labels.end() && it->second == std::to_string(pid)) out.push_back(t);
  }
  return out;
}

namespace {

// The pprof that `go tool pprof` runs: GOTOOLDIR/pprof, started directly
// (`go tool` finds it, then execs it: under emulation the go command's own
// start-up cost a second or two per call, and a test reads its profile
// several times). `go tool pprof` when the tool directory has none.
std::vector<std::string> pprof_command() {
  static const std::vector<std::string> command = [] {
    std::string home = temp_dir("gohome");
    setenv("HOME", home.c_str(), 0);
    setenv("GOCACHE", (home + "/cache").c_str(), 0);
    setenv("GOFLAGS", "-mod=mod", 0);
    CommandResult tool_dir = run_command({"go", "env", "GOTOOLDIR"});
    std::string dir = tool_dir.out.substr(0, tool_dir.out.find_last_not_of("\n") + 1);
    std::string pprof = dir + "/pprof";
    if (tool_dir.exit_code == 0 && !dir.empty() && access(pprof.c_str(), X_OK) == 0) {
      return std::vector<std::string>{pprof};
    }
    return std::vector<std::string>{"go", "tool", "pprof"};
  }();
  return command;
}

// `go tool pprof ARGS`, with a private HOME and Go cache.
CommandResult go_pprof(const std::vector<std::string>& args) {
  std::vector<std::string> argv = pprof_command();
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// What follows the leading blanks of `line`.
std::string_view after_blanks(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && is_space(line[i])) ++i;
  return line.substr(i);
}

std::string_view trim_end(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// "-----------+------...": the line between two blocks.
bool is_separator(std::string_view line) {
  const size_t plus = line.find('+');
  if (plus == 0 || plus == std::string_view::npos || plus + 1 == line.size()) return false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (i != plus && line[i] != '-') return false;
  }
  return true;
}

// "  key:  value" or "  key:  [value]": a label line of a block.
bool parse_label(std::string_view line, std::string* key, std::string* value) {
  std::string_view rest = after_blanks(line);
  size_t i = 0;
  auto key_char = [](char c, bool first) {
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (!first && (is_digit(c) || c == '.'));
  };
  while (i < rest.size() && key_char(rest[i], i == 0)) ++i;
  if (i == 0 || i + 1 >= rest.size() || rest[i] != ':' || !is_space(rest[i + 1])) return false;
  std::string_view text = trim_end(after_blanks(rest.substr(i + 1)));
  if (!text.empty() && text.front() == '[') text.remove_prefix(1);
  if (!text.empty() && text.back() == ']') text.remove_suffix(1);
  if (text.find(']') != std::string_view::npos) return false;
  *key = std::string(rest.substr(0, i));
  *value = std::string(text);
  return true;
}

// "  N   leaf" (a count) or "  10.10ms   leaf" (CPU time): a block's first
// frame. `*count` is N, or 1 for a time (the user's default view, counted
// once).
bool parse_first_frame(std::string_view line, int64_t* count, std::string* leaf) {
  std::string_view rest = after_blanks(line);
  size_t i = 0;
  while (i < rest.size() && (is_digit(rest[i]) || rest[i] == '.')) ++i;
  if (i == 0) return false;
  const bool all_digits = rest.substr(0, i).find('.') == std::string_view::npos;
  size_t unit = i;
  while (unit < rest.size() && rest[unit] >= 'a' && rest[unit] <= 'z') ++unit;
  const bool is_time = unit > i && rest[unit - 1] == 's';
  if (!(all_digits && unit == i) && !is_time) return false;
  if (unit >= rest.size() || !is_space(rest[unit])) return false;
  std::string_view frame = after_blanks(rest.substr(unit));
  if (frame.empty()) return false;
  *count = is_time ? 1 : std::stoll(std::string(rest.substr(0, i)));
  *leaf = std::string(frame);
  return true;
}

// Parsed by hand: std::regex took a second per profile here and twenty in an
// emulated guest, where every interpreter test reads several.
std::vector<PprofTrace> parse_traces(const CommandResult& result, std::string* error) {
  std::vector<PprofTrace> traces;
  if (result.exit_code != 0) {
    if (error) *error = "go tool pprof failed: " + result.err;
    return traces;
  }
  // Blocks are separated by lines of dashes; in a block, "  key:  value"
  // lines are labels, then "  N   leaf" starts the stack and indented
  // names follow.
  PprofTrace current;
  bool in_block = false;
  auto flush = [&] {
    if (in_block && current.count > 0) traces.push_back(std::move(current));
    current = PprofTrace{};
  };
  std::string key, value;
  std::string_view out = result.out;
  while (!out.empty()) {
    const size_t end = out.find('\n');
    std::string_view line = out.substr(0, end);
    out = end == std::string_view::npos ? std::string_view() : out.substr(end + 1);
    if (is_separator(line)) {
      flush();
      in_block = true;
      continue;
    }
    if (!in_block) continue;
    if (current.count == 0) {
      int64_t count = 0;
      std::string leaf;
      if (parse_label(line, &key, &value)) {
        current.labels[key] = value;
      } else if (parse_first_frame(line, &count, &leaf)) {
        current.count = count;
        current.frames.push_back(std::move(leaf));
      }
    } else if (!line.empty() && is_space(line.front())) {
      std::string_view frame = after_blanks(line);
      if (!frame.empty()) current.frames.emplace_back(frame);
    }
  }
  flush();
  if (traces.empty() && error) *error = "no traces in go tool pprof output: " + result.out.substr(0, 2000);
  return traces;
}

}  // namespace

CommandResult run_go_pprof(const std::vector<std::string>& options, const std::string& profile_path) {
  std::vector<std::string> args = options;
  args.push_back(profile_path);
  return go_pprof(args);
}

std::vector<PprofTrace> read_traces_with_go(const std::string& profile_path, std::string* error,
                                            const std::vector<std::string>& options) {
  std::vector<std::string> args = {"-traces", "-sample_index=samples", "-symbolize=none"};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(profile_path);
  return parse_traces(go_pprof(args), error);
}

std::vector<PprofTrace> read_traces_as_user(const std::string& profile_path, std::string* error,
                                            const std::vector<std::string>& options) {
  std::vector<std::string> args = {"-traces"};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(profile_path);
  return parse_traces(go_pprof(args), error);
}

std::vector<PprofTopRow> read_top_as_user(const std::string& profile_path, std::string* error,
                                          const std::vector<std::string>& options, std::string* output) {
  std::vector<std::string> args = {"-top", "-nodecount=100000", "-nodefraction=0"};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(profile_path);
  CommandResult result = go_pprof(args);
  if (output) *output = result.out;
  std::vector<PprofTopRow> rows;
  if (result.exit_code != 0) {
    if (error) *error = "go tool pprof -top failed: " + result.err;
    return rows;
  }
  // "     1.20s 85.71% 85.71%      1.20s 85.71%  burn"
  static const std::regex row(R"(^\s*\S+\s+([0-9.]+)%\s+[0-9.]+%\s+\S+\s+([0-9.]+)%\s+(.*)$)");
  std::istringstream in(result.out);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, row)) rows.push_back({std::stod(m[1]), std::stod(m[2]), m[3]});
  }
  if (rows.empty() && error) *error = "no rows in go tool pprof -top output: " + result.out.substr(0, 2000);
  return rows;
}

FrameLocation split_frame_location(const std::string& frame) {
  // pprof appends " file:line"; an inlined frame also gets " (inline)".
  std::string_view text = frame;
  constexpr std::string_view kInline = " (inline)";
  if (text.size() > kInline.size() && text.substr(text.size() - kInline.size()) == kInline) {
    text.remove_suffix(kInline.size());
  }
  const size_t space = text.rfind(' ');
  const size_t colon = text.rfind(':');
  if (space == std::string_view::npos || space == 0 || is_space(text[space - 1]) || colon == std::string_view::npos ||
      colon < space + 2 || colon + 1 == text.size()) {
    return FrameLocation{frame, "", 0};
  }
  for (size_t i = colon + 1; i < text.size(); ++i) {
    if (!is_digit(text[i])) return FrameLocation{frame, "", 0};
  }
  for (size_t i = space + 1; i < colon; ++i) {
    if (is_space(text[i])) return FrameLocation{frame, "", 0};
  }
  return FrameLocation{std::string(text.substr(0, space)), std::string(text.substr(space + 1, colon - space - 1)),
                       std::stoi(std::string(text.substr(colon + 1)))};
}

ChainCount count_chain(const std::vector<PprofTrace>& traces, const std::vector<std::string>& chain) {
  ChainCount count;
  for (const auto& t : traces) {
    if (chain.empty() || t.frames.empty() || t.frames.front() != chain.front()) continue;
    count.leaf += t.count;
    if (std::search(t.frames.begin(), t.frames.end(), chain.begin(), chain.end()) != t.frames.end()) {
      count.whole += t.count;
    } else if (count.counterexample.empty()) {
      for (const auto& f : t.frames) count.counterexample += f + " <- ";
    }
  }
  return count;
}

namespace {

// The directories temp_dir made, removed at the end of a run that passed:
// thousands of recordings' profiles piled up in /tmp over repeated runs.
class TempDirs : public ::testing::Environment {
 public:
  void add(std::string dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.push_back(std::move(dir));
  }
  void TearDown() override {
    const char* keep = std::getenv("OMNIPROF_KEEP_TEST_DIRS");
    if ((keep && *keep && std::string(keep) != "0") || !::testing::UnitTest::GetInstance()->Passed()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& dir : dirs_) {
      std::error_code ignored;  // a directory a test removed itself, or one still busy: left
      std::filesystem::remove_all(dir, ignored);
    }
    dirs_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> dirs_;
};

TempDirs& temp_dirs() {
  // gtest owns and deletes the environment.
  static TempDirs* dirs = static_cast<TempDirs*>(::testing::AddGlobalTestEnvironment(new TempDirs));
  return *dirs;
}
// Registered before RUN_ALL_TESTS, as gtest wants its environments.
[[maybe_unused]] const bool temp_dirs_registered = (temp_dirs(), true);

}  // namespace

std::string temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/omniprof-e2e-" + prefix + "-XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  if (!dir) return std::string("/tmp");
  temp_dirs().add(dir);
  return std::string(dir);
}

std::string workload(const std::string& name) { return std::string(OMNIPROF_WORKLOADS_DIR) + "/" + name; }

namespace {

// utime + stime of a /proc stat file, in seconds; -1 where unreadable.
double stat_cpu_seconds(const std::string& path) {
  std::ifstream stat(path);
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t comm_end = text.rfind(')');
  if (comm_end == std::string::npos) return -1;
  std::istringstream fields(text.substr(comm_end + 2));  // from field 3, the state
  std::string field;
  for (int i = 3; i < 14 && fields >> field; ++i) {
    // fields 3 to 13 skipped: utime and stime are 14 and 15 (proc(5))
  }
  long long utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return -1;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

double cpu_seconds(pid_t pid) { return stat_cpu_seconds("/proc/" + std::to_string(pid) + "/stat"); }

long long counter(const std::string& output, const std::string& name) {
  std::smatch m;
  std::regex line("\\n\\s*" + std::regex_replace(name, std::regex("\\."), "\\.") + "\\s+(\\d+)");
  return std::regex_search(output, m, line) ? std::stoll(m[1]) : -1;
}

std::map<pid_t, double> thread_cpu_seconds(pid_t pid) {
  std::map<pid_t, double> threads;
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(task_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string tid = it->path().filename().string();
    const double seconds = stat_cpu_seconds(it->path().string() + "/stat");
    if (seconds >= 0) threads[static_cast<pid_t>(std::stol(tid))] = seconds;
  }
  return threads;
}

}  // namespace omniprof::e2e
