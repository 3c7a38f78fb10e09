// Helpers the benchmark programs share.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace omniprof::bench {

// Starts argv in the background, its stdout to `stdout_path`, its stderr to
// /dev/null.
inline pid_t spawn(const std::vector<std::string>& args, const char* stdout_path = "/dev/null") {
  std::fflush(stdout);  // the child must not inherit unwritten output
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(stdout_path, "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
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

}  // namespace omniprof::bench
