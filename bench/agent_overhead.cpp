// Agent overhead benchmark: CPU seconds per wall second and peak RSS of
// `omniprof record` profiling the whole machine, idle and with every core
// busy, at 19 Hz and 99 Hz. Baseline from the same run: `perf record -a -g`
// at the same frequency, measured the same way (the tool users reach for
// first). Prints a table; asserts nothing.
//
//   bench/agent_overhead [SECONDS]   (root; default 20 s per measurement)
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Usage {
  double cpu_seconds = 0;
  double wall_seconds = 0;
  long max_rss_kb = 0;
  int exit_code = -1;
};

pid_t spawn(const std::vector<std::string>& args, bool quiet) {
  pid_t pid = fork();
  if (pid == 0) {
    if (quiet) {
      freopen("/dev/null", "w", stdout);
      freopen("/dev/null", "w", stderr);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

Usage measure(const std::vector<std::string>& args) {
  auto start = std::chrono::steady_clock::now();
  pid_t pid = spawn(args, true);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Usage u;
  u.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  u.cpu_seconds = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
                  usage.ru_stime.tv_usec / 1e6;
  u.max_rss_kb = usage.ru_maxrss;
  u.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return u;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = argc > 1 ? atoi(argv[1]) : 20;
  std::string omniprof = OMNIPROF_BINARY;
  std::string busy = OMNIPROF_BUSY_WORKLOAD;
  int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  bool have_perf = system("perf --version >/dev/null 2>&1") == 0;

  std::printf("agent overhead, %d s per measurement, %d CPUs\n", seconds, cpus);
  std::printf("%-6s %-5s %-9s %12s %10s %10s\n", "load", "Hz", "tool", "CPU s/wall s", "% of core",
              "RSS MB");
  for (bool loaded : {false, true}) {
    std::vector<pid_t> load;
    if (loaded) {
      for (int i = 0; i < cpus; ++i) load.push_back(spawn({busy, std::to_string(seconds * 4 + 30)}, true));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    for (int hz : {19, 99}) {
      Usage ours = measure({omniprof, "record", "-F", std::to_string(hz), "-d", std::to_string(seconds),
                            "-o", "/tmp/omniprof-bench.pb.gz"});
      double ours_rate = ours.cpu_seconds / ours.wall_seconds;
      std::printf("%-6s %-5d %-9s %12.5f %9.3f%% %10.1f%s\n", loaded ? "busy" : "idle", hz, "omniprof",
                  ours_rate, 100 * ours_rate, ours.max_rss_kb / 1024.0,
                  ours.exit_code == 0 ? "" : "  (failed)");
      if (!have_perf) continue;
      Usage perf = measure({"perf", "record", "-a", "-g", "-F", std::to_string(hz), "-o",
                            "/tmp/omniprof-bench.perf.data", "--", "sleep", std::to_string(seconds)});
      double perf_rate = perf.cpu_seconds / perf.wall_seconds;
      std::printf("%-6s %-5d %-9s %12.5f %9.3f%% %10.1f  omniprof/perf CPU = %.2f\n",
                  loaded ? "busy" : "idle", hz, "perf", perf_rate, 100 * perf_rate,
                  perf.max_rss_kb / 1024.0, perf_rate > 0 ? ours_rate / perf_rate : 0.0);
    }
    for (pid_t pid : load) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  unlink("/tmp/omniprof-bench.pb.gz");
  unlink("/tmp/omniprof-bench.perf.data");
  return 0;
}
