// Helpers the benchmark programs share.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>
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

// A counter from the list `omniprof record` prints at the end ("  name  N");
// `missing` when it was not printed (record prints only non-zero ones).
inline double stat_counter(const std::string& output, const std::string& name, double missing = 0) {
  std::smatch m;
  if (std::regex_search(output, m, std::regex("\\n\\s*" + name + "\\s+(\\d+)"))) return std::stod(m[1]);
  return missing;
}

}  // namespace omniprof::bench
