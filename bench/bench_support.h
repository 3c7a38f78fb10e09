// Helpers the benchmark programs share.
#pragma once

#include <unistd.h>

#include <cstdio>
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

}  // namespace omniprof::bench
