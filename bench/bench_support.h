// Helpers the benchmark programs share.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace omniprof::bench {

// Starts argv in the background, its stdout to `stdout_path`, its stderr to
// `stderr_path`.
inline pid_t spawn(const std::vector<std::string>& args, const char* stdout_path = "/dev/null",
                   const char* stderr_path = "/dev/null") {
  std::fflush(stdout);  // the child must not inherit unwritten output
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(stdout_path, "w", stdout) || !freopen(stderr_path, "w", stderr)) _exit(126);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Runs a shell command, returns its stdout.
inline std::string run_shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// CPU time of a live process, all threads, in seconds: the first field of
// each thread's schedstat is its run time in nanoseconds (utime/stime in
// /proc/PID/stat count whole clock ticks, too coarse for an agent that runs
// a few milliseconds a second). Read directly, not through a shell: a
// benchmark that counts the processes started must not start its own.
inline double process_cpu_seconds(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(dir.c_str());
  if (!tasks) return 0;
  double total_ns = 0;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream schedstat(dir + "/" + entry->d_name + "/schedstat");
    unsigned long long run_ns = 0;
    if (schedstat >> run_ns) total_ns += run_ns;
  }
  closedir(tasks);
  return total_ns / 1e9;
}

// A "VmRSS:" or "VmHWM:" figure of /proc/PROCESS/status ("self" or a pid),
// in bytes; 0 when the process or the field is gone.
inline size_t status_bytes(const char* field, const std::string& process = "self") {
  std::ifstream status("/proc/" + process + "/status");
  std::string line;
  const size_t length = std::strlen(field);
  while (std::getline(status, line)) {
    if (line.compare(0, length, field) == 0) return std::strtoull(line.c_str() + length, nullptr, 10) * 1024;
  }
  return 0;
}

// Starts one copy of argv per CPU, so that (almost) every sample is one of
// theirs (idle and filtered-out samples would otherwise share the BPF run
// time), records them with `OMNIPROF record --bpf-stats -d SECONDS`, with
// `config` if not empty, kills them; returns what record printed.
inline std::string record_copies_per_cpu(const std::string& omniprof, const std::vector<std::string>& argv,
                                         int seconds, const std::string& config) {
  std::vector<pid_t> pids;
  std::string pid_args;
  for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); ++c) {
    pids.push_back(spawn(argv));
    pid_args += " -p " + std::to_string(pids.back());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::string output = run_shell(omniprof + " record --bpf-stats -d " + std::to_string(seconds) + pid_args +
                                 " -o /tmp/omniprof-bench-bpf-stats.pb.gz" +
                                 (config.empty() ? "" : " --config " + config) + " 2>/dev/null");
  for (pid_t pid : pids) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  unlink("/tmp/omniprof-bench-bpf-stats.pb.gz");
  return output;
}

// A counter from the list `omniprof record` prints at the end ("  name  N");
// `missing` when it was not printed (record prints only non-zero ones).
inline double stat_counter(const std::string& output, const std::string& name, double missing = 0) {
  std::smatch m;
  if (std::regex_search(output, m, std::regex("\\n\\s*" + name + "\\s+(\\d+)"))) return std::stod(m[1]);
  return missing;
}

// Every counter `omniprof record` printed at the end (the lines after
// "counters:"), by name.
inline std::map<std::string, double> stat_counters(const std::string& output) {
  std::map<std::string, double> counters;
  const std::string header = "\ncounters:\n";
  size_t start = output.find(header);
  if (start == std::string::npos) return counters;
  std::istringstream lines(output.substr(start + header.size()));
  std::string line;
  static const std::regex counter_line(R"(^\s+(\S+)\s+(\d+)\s*$)");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, counter_line)) counters[m[1]] = std::stod(m[2]);
  }
  return counters;
}

}  // namespace omniprof::bench
