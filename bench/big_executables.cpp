// Unwind storage for big executables: a Python process that has loaded
// libLLVM-14 and libclang-cpp-14 and calls into LLVM, next to a `node` busy
// loop (the scene of tests/e2e/big_executables_test.cpp), recorded with the
// default config. Prints rows stored, shards in use, bytes per row, BPF map
// bytes, the agent's peak RSS and the BPF cost per sample, against a
// baseline from the same run: the agent recording a plain Python busy loop
// (no big executable). With a second omniprof binary (e.g. a build of the
// old fixed layout) both scenes are also recorded with it.
//
//   build/bench/big_executables [SECONDS [OTHER_OMNIPROF]]   (root; default 5)
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"

namespace {

const char* const kLlvm = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1";
const char* const kClang = "/usr/lib/x86_64-linux-gnu/libclang-cpp.so.14";
const char* const kNode = "/usr/bin/node";
const char* const kOutput = "/tmp/omniprof-bench-big.txt";
constexpr double kShardBytes = 131072.0 * 8;  // OMNIPROF_UNWIND_SHARD_BYTES

std::string python() {
  for (const char* p : {"/root/.pyenv/versions/3.12.1/bin/python3", "/usr/bin/python3"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "python3";
}

double counter(const std::string& output, const std::string& name) {
  return omniprof::bench::stat_counter(output, name);  // not printed: zero
}

struct Figures {
  bool ok = false;
  double rss_mb = 0, map_mb = 0, rows = 0, shards = 0, tables = 0, no_space = 0, no_table = 0, outermost = 0,
         ns_per_sample = 0, samples = 0;
};

Figures record(const std::string& omniprof, bool big, int seconds) {
  std::string life = std::to_string(seconds + 60);
  std::vector<pid_t> load;
  std::vector<std::string> py = {python(), OMNIPROF_LLVM_CALLS_SCRIPT, life};
  if (big) {
    py.push_back(kLlvm);
    py.push_back(kClang);
  }
  load.push_back(omniprof::bench::spawn(py));
  if (big) load.push_back(omniprof::bench::spawn({kNode, "-e", "const end = Date.now() + " + life + "000; let x = 0; while (Date.now() < end) x++;"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  std::vector<std::string> args = {omniprof, "record", "--bpf-stats", "-d", std::to_string(seconds), "-o",
                                   "/tmp/omniprof-bench-big.pb.gz"};
  for (pid_t pid : load) {
    args.push_back("-p");
    args.push_back(std::to_string(pid));
  }
  pid_t agent = omniprof::bench::spawn(args, kOutput);
  int status = 0;
  rusage usage{};
  wait4(agent, &status, 0, &usage);
  for (pid_t pid : load) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  std::ifstream in(kOutput);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  output = "\n" + output;
  Figures f;
  f.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  f.rss_mb = usage.ru_maxrss / 1024.0;
  f.map_mb = counter(output, "host\\.bpf_map_bytes") / (1024.0 * 1024.0);
  f.rows = counter(output, "native\\.unwind_rows_stored");
  f.tables = counter(output, "native\\.unwind_tables_stored");
  f.shards = counter(output, "host\\.unwind_shards");
  f.no_space = counter(output, "host\\.executable_no_space");
  f.no_table = counter(output, "native\\.no_table");
  f.outermost = counter(output, "native\\.stop_outermost");
  f.samples = counter(output, "samples_recorded");
  f.ns_per_sample = counter(output, "bpf\\.ns_per_recorded_sample");
  return f;
}

void print(const char* agent, const char* scene, const Figures& f) {
  char per_row[32] = "-";
  if (f.rows > 0 && f.shards > 0) std::snprintf(per_row, sizeof(per_row), "%.2f", f.shards * kShardBytes / f.rows);
  std::printf("%-6s %-6s %9.0f %7.0f %7.0f %7s %8.1f %8.1f %9.0f %9.0f %8.1f%% %9.0f %8.0f%s\n", agent, scene,
              f.rows, f.tables, f.shards, per_row, f.map_mb, f.rss_mb, f.no_space, f.no_table,
              f.samples > 0 ? 100.0 * f.outermost / f.samples : 0.0, f.ns_per_sample, f.samples,
              f.ok ? "" : "  (record failed)");
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = argc > 1 ? std::max(3, atoi(argv[1])) : 5;
  std::string other = argc > 2 ? argv[2] : "";
  for (const char* f : {kLlvm, kClang, kNode}) {
    if (access(f, R_OK) != 0) {
      std::fprintf(stderr, "missing %s (scripts/install-deps.sh)\n", f);
      return 1;
    }
  }
  std::printf("big executables: python + libLLVM-14 + libclang-cpp-14, node; default config; %d s per record\n",
              seconds);
  std::printf("rows/tables: native.unwind_{rows,tables}_stored; B/row: shards x 1 MiB / rows; maps MB: "
              "host.bpf_map_bytes;\nRSS: agent peak; no_space: host.executable_no_space; no_table: "
              "native.no_table;\nwhole: walks ending at the outermost frame / samples; ns/smpl: "
              "bpf.ns_per_recorded_sample\n");
  std::printf("%-6s %-6s %9s %7s %7s %7s %8s %8s %9s %9s %9s %9s %8s\n", "agent", "scene", "rows", "tables",
              "shards", "B/row", "maps MB", "RSS MB", "no_space", "no_table", "whole", "ns/smpl", "samples");
  struct Agent {
    const char* name;
    std::string binary;
  };
  std::vector<Agent> agents = {{"this", OMNIPROF_BINARY}};
  if (!other.empty()) agents.push_back({"other", other});
  for (const auto& agent : agents) {
    print(agent.name, "plain", record(agent.binary, false, seconds));
    print(agent.name, "big", record(agent.binary, true, seconds));
  }
  unlink(kOutput);
  unlink("/tmp/omniprof-bench-big.pb.gz");
  return 0;
}
