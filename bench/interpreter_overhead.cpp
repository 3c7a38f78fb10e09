// Throughput of an interpreter workload with and without the agent: one copy
// per CPU of tests/workloads/python_recursion.py or ruby_recursion.rb (30
// frames deep, a short spin at the bottom) counts its recursions per second,
// without the agent,
// under `omniprof record` (whole machine) at 19 Hz and at 99 Hz, in
// interleaved rounds of the same run: the median of each, and the spread of
// the rounds, which shows the noise.
// The agent is started first and given a few seconds to describe the
// machine, so its start-up is not charged to the workload.
//
//   build/bench/interpreter_overhead RUNTIME [SECONDS [INTERPRETER [ROUNDS]]]
//   (root; RUNTIME python or ruby; default 10 s, the runtime's last default
//   interpreter (pyenv's 3.13.0, Debian's ruby3.1), 3 rounds)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "interpreter_bench.h"

namespace {

using omniprof::bench::spawn;

// Sum over the copies of their recursions per second; 0 if one failed.
double throughput(const std::string& interpreter, const std::string& script, int seconds, int hz) {
  pid_t agent = 0;
  if (hz > 0) {
    agent = spawn({OMNIPROF_BINARY, "record", "-F", std::to_string(hz), "-d", std::to_string(seconds + 120), "-o",
                   "/tmp/omniprof-bench-interpreter-overhead.pb.gz"});
    std::this_thread::sleep_for(std::chrono::seconds(4));
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<std::pair<pid_t, std::string>> copies;
  for (long c = 0; c < cpus; ++c) {
    std::string out = "/tmp/omniprof-bench-interpreter-overhead-" + std::to_string(c) + ".txt";
    copies.push_back({spawn({interpreter, script, "30", std::to_string(seconds), "2000"},
                            out.c_str()),
                      out});
  }
  double total = 0;
  bool ok = true;
  for (const auto& [pid, out] : copies) {
    int status = 0;
    waitpid(pid, &status, 0);
    std::ifstream in(out);
    std::string key;
    double rate = 0;
    ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0 && (in >> key >> rate) && key == "recursions_per_second";
    total += rate;
    unlink(out.c_str());
  }
  if (agent > 0) {
    kill(agent, SIGINT);
    waitpid(agent, nullptr, 0);
    unlink("/tmp/omniprof-bench-interpreter-overhead.pb.gz");
  }
  return ok ? total : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto runtimes = omniprof::bench::interpreter_runtimes();
  const auto* runtime = argc > 1 ? omniprof::bench::find_interpreter_runtime(runtimes, argv[1]) : nullptr;
  if (!runtime) {
    std::fprintf(stderr, "usage: interpreter_overhead python|ruby [SECONDS [INTERPRETER [ROUNDS]]]\n");
    return 2;
  }
  int seconds = argc > 2 ? std::max(3, atoi(argv[2])) : 10;
  std::string interpreter = argc > 3 ? argv[3] : runtime->default_interpreters.back();
  int rounds = argc > 4 ? std::max(1, atoi(argv[4])) : 3;
  if (access(interpreter.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "%s not installed\n", interpreter.c_str());
    return 1;
  }
  std::printf("%s, %ld copies, 30 frames deep, %d s per measurement, %d rounds\n", interpreter.c_str(),
              sysconf(_SC_NPROCESSORS_ONLN), seconds, rounds);
  struct Row {
    const char* name;
    int hz;
    std::vector<double> rates;
  };
  std::vector<Row> rows = {{"no agent", 0, {}}, {"agent 19 Hz", 19, {}}, {"agent 99 Hz", 99, {}}};
  // Rounds interleave the conditions, so that a change of the machine's load
  // during the run spreads over all of them; the median of each is shown.
  for (int round = 0; round < rounds; ++round) {
    for (Row& row : rows) row.rates.push_back(throughput(interpreter, runtime->recursion_script, seconds, row.hz));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double baseline = median(rows[0].rates);
  std::printf("%-14s %16s %12s %24s\n", "", "recursions/s", "vs baseline", "rounds (min .. max)");
  for (const Row& row : rows) {
    auto [low, high] = std::minmax_element(row.rates.begin(), row.rates.end());
    std::printf("%-14s %16.0f %+11.2f%% %11.0f .. %-11.0f\n", row.name, median(row.rates),
                baseline > 0 ? 100.0 * (median(row.rates) - baseline) / baseline : 0.0, *low, *high);
  }
  return 0;
}
