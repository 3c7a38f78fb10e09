// End-to-end: the "big executables" scene of a developer machine or CI
// runner, with the default config. A Python process that has loaded
// libLLVM-14 (~0.9M unwind rows) and libclang-cpp-14 (~1M) and calls into
// LLVM, next to a `node` busy loop (~0.4M): more than the old fixed unwind
// space (8 shards, 1M rows) held. The unwind storage must grow to hold all
// of it, and the walks through LLVM must reach the bottom of the stack.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_support.h"
#include "omniprof/bpf/abi.h"

namespace omniprof::e2e {
namespace {

const char* const kLlvm = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1";
const char* const kClang = "/usr/lib/x86_64-linux-gnu/libclang-cpp.so.14";
const char* const kNode = "/usr/bin/node";

std::string python() {
  for (const char* p : {"/root/.pyenv/versions/3.12.1/bin/python3", "/usr/bin/python3"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// llvm_calls.py has loaded both libraries (ctypes.CDLL, in this order).
::testing::AssertionResult wait_for_libraries(pid_t pid) {
  for (const char* library : {kLlvm, kClang}) {
    // /proc/PID/maps names the file, not the symlink the test names it by
    // (libclang-cpp.so.14 is in /usr/lib/llvm-14/lib).
    std::error_code ec;
    const std::string mapped = std::filesystem::canonical(library, ec).string();
    if (!wait_for_mapping(pid, ec ? std::string(library) : mapped, std::chrono::seconds(120))) {
      return ::testing::AssertionFailure() << "pid " << pid << " never mapped " << library;
    }
  }
  return ::testing::AssertionSuccess();
}

// How many of a process's samples reach the bottom of the stack (main or
// _start), of all and of those in libLLVM, with one that does not.
struct WholeWalks {
  int64_t samples = 0, whole = 0, in_llvm = 0, in_llvm_whole = 0;
  std::string counterexample;
};
WholeWalks judge_whole_walks(const std::vector<PprofTrace>& traces, pid_t pid) {
  WholeWalks w;
  for (const auto& t : traces_of_pid(traces, pid)) {
    bool bottom = false, llvm = false;
    for (const auto& f : t.frames) {
      bottom |= f == "main" || f == "_start";
      llvm |= f.rfind("llvm::", 0) == 0 || f.rfind("LLVM", 0) == 0;
    }
    w.samples += t.count;
    w.whole += bottom ? t.count : 0;
    w.in_llvm += llvm ? t.count : 0;
    w.in_llvm_whole += llvm && bottom ? t.count : 0;
    if (!bottom && w.counterexample.empty()) {
      for (const auto& f : t.frames) w.counterexample += "\n  " + f;
    }
  }
  return w;
}

// `record` keeps only samples taken once the tables are stored: every walk
// of the Python process must reach the bottom of its stack, bar a few (a
// sample in the dynamic loader or at a thread's first instruction), and so
// must those through libLLVM.
void expect_whole_walks(const WholeWalks& w, const CommandResult& result) {
  ASSERT_GT(w.samples, 40) << "too few samples of the Python process to judge\n" << result.out;
  EXPECT_GE(w.whole * 100, w.samples * 99)
      << w.whole << " of " << w.samples << " samples reach main or _start; one that does not:" << w.counterexample
      << "\n" << result.err;
  ASSERT_GT(w.in_llvm, 8) << "too few samples in libLLVM to judge";
  EXPECT_GE(w.in_llvm_whole * 100, w.in_llvm * 99) << w.in_llvm_whole << " of " << w.in_llvm << " samples in libLLVM";
}

TEST(BigExecutablesTest, DefaultConfigHoldsLlvmClangAndNodeAndWalksThroughThem) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  std::string py = python();
  for (const std::string& needed : {std::string(kLlvm), std::string(kClang), std::string(kNode), py}) {
    // Installed by scripts/install-deps.sh (clang and llvm bring the
    // libraries; nodejs, python3).
    if (needed.empty() || access(needed.c_str(), R_OK) != 0) {
      if (in_ci()) FAIL() << "missing in CI: " << (needed.empty() ? "python3" : needed);
      GTEST_SKIP() << "missing: " << (needed.empty() ? "python3" : needed);
    }
  }
  std::string dir = temp_dir("big");
  // Loads both libraries and calls into LLVM in a loop. Both outlive the
  // recording by far (killed at the end of the test): in an emulated guest
  // `record` spends half a minute building their tables before its clock
  // starts, and the counters it prints at the end are of the tables still
  // stored, which an exit would unload.
  BackgroundProcess python_process({py, OMNIPROF_TEST_SOURCE_DIR "/workloads/llvm_calls.py", "300", kLlvm, kClang});
  BackgroundProcess node_process({kNode, "-e", "const end = Date.now() + 300000; let x = 0; while (Date.now() < end) x++;"});
  // Both libraries mapped (seconds on a cold page cache): `record` builds
  // the tables of what they map at its start before its clock starts.
  ASSERT_TRUE(wait_for_libraries(python_process.pid()));

  std::string out = dir + "/profile.pb.gz";
  auto result = run_command({OMNIPROF_BINARY, "record", "-d", "4", "-p", std::to_string(python_process.pid()), "-p",
                             std::to_string(node_process.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;

  // Every table found room: nothing refused, and the space grew past the
  // old fixed 8 shards to hold LLVM, clang and node whole.
  EXPECT_EQ(counter(result.out, "host.executable_no_space"), -1) << result.out << result.err;
  EXPECT_EQ(counter(result.out, "host.executable_load_failures"), -1) << result.out << result.err;
  EXPECT_EQ(counter(result.out, "native.no_shard"), -1) << result.out;
  long long rows = counter(result.out, "native.unwind_rows_stored");
  EXPECT_GT(rows, 2'000'000) << result.out;
  long long shards = counter(result.out, "host.unwind_shards");
  EXPECT_GE(shards * OMNIPROF_ROWS_PER_SHARD, rows) << result.out;
  EXPECT_GT(shards, 8) << result.out;
  EXPECT_LE(shards, counter(result.out, "host.unwind_shard_budget")) << result.out;

  std::string error;
  auto traces = read_traces_with_go(out, &error);
  ASSERT_FALSE(traces.empty()) << error;
  WholeWalks w = judge_whole_walks(traces, python_process.pid());
  std::printf("python: %lld of %lld samples whole, in libLLVM %lld of %lld; %lld rows in %lld shards\n",
              static_cast<long long>(w.whole), static_cast<long long>(w.samples),
              static_cast<long long>(w.in_llvm_whole), static_cast<long long>(w.in_llvm), rows, shards);
  expect_whole_walks(w, result);
}

// The first run on a fresh machine: libLLVM's table (~1.4M rows) is built
// from a cold page cache, which takes seconds. `record` says how far the
// tables are, starts its clock once they are stored, and then every walk
// of the Python process, through libLLVM too, reaches the bottom of its
// stack.
TEST(BigExecutablesTest, RecordOnColdPageCacheWaitsForTablesAndWalksWhole) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  std::string py = python();
  if (py.empty() || access(kLlvm, R_OK) != 0 || access(kClang, R_OK) != 0) {
    if (in_ci()) FAIL() << "python3 or libLLVM-14/libclang-cpp-14 missing in CI";
    GTEST_SKIP() << "python3 or libLLVM-14/libclang-cpp-14 missing";
  }
  // Lives far past the test (killed at its end): in an emulated guest the
  // wait for its libraries, the cold page cache and record's table load took
  // 78-94 s, and 60 s of life ended it before record's clock (no sample).
  BackgroundProcess python_process({py, OMNIPROF_TEST_SOURCE_DIR "/workloads/llvm_calls.py", "600", kLlvm, kClang});
  ASSERT_TRUE(wait_for_libraries(python_process.pid()));
  // Cold: the libraries' pages leave the page cache (those the process has
  // touched stay mapped; the unwind sections it never reads do not).
  sync();
  {
    std::ofstream drop("/proc/sys/vm/drop_caches");
    drop << "3\n";
    drop.flush();
    if (!drop) {
      if (in_ci()) FAIL() << "cannot write /proc/sys/vm/drop_caches (root needed)";
      GTEST_SKIP() << "cannot write /proc/sys/vm/drop_caches (root needed)";
    }
  }
  std::string dir = temp_dir("cold");
  std::string out = dir + "/profile.pb.gz";
  auto result = run_command(
      {OMNIPROF_BINARY, "record", "-d", "3", "-F", "199", "-p", std::to_string(python_process.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("loading unwind tables: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("unwind tables ready: "), std::string::npos) << result.err;
  std::string error;
  auto traces = read_traces_with_go(out, &error);
  ASSERT_FALSE(traces.empty()) << error;
  WholeWalks w = judge_whole_walks(traces, python_process.pid());
  std::printf("cold cache: %lld of %lld samples whole, in libLLVM %lld of %lld; walks that met a table being "
              "built (all dropped with the start-up): %lld\n",
              static_cast<long long>(w.whole), static_cast<long long>(w.samples),
              static_cast<long long>(w.in_llvm_whole), static_cast<long long>(w.in_llvm),
              counter(result.out, "native.walks_table_building"));
  expect_whole_walks(w, result);
}

// `run` does not wait: a process that loads libLLVM while the agent runs
// has its table built while it is sampled, and the walks that meet that
// table before it is stored are counted apart (native.walks_table_building,
// logged with the round's counters), not taken for files without unwind
// information.
TEST(BigExecutablesTest, RunCountsWalksThatMeetATableBeingBuilt) {
  OMNIPROF_REQUIRE_BPF();
  std::string py = python();
  if (py.empty() || access(kLlvm, R_OK) != 0 || access(kClang, R_OK) != 0) {
    if (in_ci()) FAIL() << "python3 or libLLVM-14/libclang-cpp-14 missing in CI";
    GTEST_SKIP() << "python3 or libLLVM-14/libclang-cpp-14 missing";
  }
  std::string dir = temp_dir("building");
  const std::string go = dir + "/go", log_path = dir + "/run.log";
  // Loads the libraries once told to (after the agent runs), then calls
  // into LLVM for the rest of its life.
  BackgroundProcess workload({py, OMNIPROF_TEST_SOURCE_DIR "/workloads/llvm_calls.py", "600", kLlvm, kClang, go});
  // Only the workload, sampled often, so that its walks during the build are many.
  std::ofstream(dir + "/omniprof.yaml") << "round_seconds: 2\nsampling:\n  frequency_hz: 499\noutput:\n  directory: "
                                        << dir << "/profiles\npids: [" << workload.pid() << "]\n";
  BackgroundProcess agent({"/bin/sh", "-c", "exec \"$0\" run --config \"$1\" >\"$2\" 2>&1", OMNIPROF_BINARY,
                           dir + "/omniprof.yaml", log_path},
                          BackgroundProcess::Role::kJudge);
  auto log_text = [&] {
    std::ifstream in(log_path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  // Waits for `what` in the log while the agent runs, up to `limit`.
  std::optional<int> exited;
  auto wait_for_log = [&](const std::string& what, std::chrono::seconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline && !exited && !(exited = agent.poll())) {
      if (log_text().find(what) != std::string::npos) return true;
      usleep(100 * 1000);
    }
    return log_text().find(what) != std::string::npos;
  };
  ASSERT_TRUE(wait_for_log(" sampling ", std::chrono::seconds(120))) << "omniprof run never sampled\n" << log_text();
  // The table is built from a cold page cache: seconds of walks meet it.
  sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  std::ofstream(go) << "go\n";
  // Rounds end every 2 s; the counter shows in the first one after such a
  // walk (minutes in a QEMU guest without KVM, seconds here).
  const bool counted = wait_for_log("native.walks_table_building=", std::chrono::seconds(300));
  ASSERT_FALSE(exited) << "omniprof run exited " << *exited << "\n" << log_text();
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0) << log_text();
  EXPECT_TRUE(counted) << log_text();
}

// A budget too small for the scene: what fits is stored, libLLVM (8 shards'
// worth) is refused as never fitting, nothing grows past the budget, and
// the agent goes on sampling.
TEST(BigExecutablesTest, SmallBudgetRefusesWhatCannotFitAndKeepsSampling) {
  OMNIPROF_REQUIRE_BPF();
  std::string py = python();
  if (py.empty() || access(kLlvm, R_OK) != 0 || access(kClang, R_OK) != 0) {
    if (in_ci()) FAIL() << "python3 or libLLVM-14/libclang-cpp-14 missing in CI";
    GTEST_SKIP() << "python3 or libLLVM-14/libclang-cpp-14 missing";
  }
  std::string dir = temp_dir("big-budget");
  std::string config = dir + "/omniprof.yaml";
  std::ofstream(config) << "maps:\n  unwind_memory_mb: 3\n";
  // Outlives the recording (killed at the end): the counters are of what is stored when it ends.
  BackgroundProcess python_process({py, OMNIPROF_TEST_SOURCE_DIR "/workloads/llvm_calls.py", "300", kLlvm, kClang});
  ASSERT_TRUE(wait_for_libraries(python_process.pid()));
  auto result = run_command({OMNIPROF_BINARY, "record", "-d", "2", "--config", config, "-p",
                             std::to_string(python_process.pid()), "-o", dir + "/profile.pb.gz"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(counter(result.out, "host.unwind_shard_budget"), 3) << result.out;
  long long shards = counter(result.out, "host.unwind_shards");
  EXPECT_GE(shards, 1) << result.out;
  EXPECT_LE(shards, 3) << result.out;
  EXPECT_GT(counter(result.out, "native.unwind_rows_stored"), 0) << result.out;  // libc, libpython, ...
  EXPECT_LE(counter(result.out, "native.unwind_rows_stored"), 3 * OMNIPROF_ROWS_PER_SHARD) << result.out;
  EXPECT_GT(counter(result.out, "host.executable_load_failures"), 0) << result.out;
  EXPECT_NE(result.err.find("libLLVM-14.so.1"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("fit maps.unwind_memory_mb"), std::string::npos) << result.err;
  EXPECT_GT(counter(result.out, "samples_recorded"), 0) << result.out;
}

}  // namespace
}  // namespace omniprof::e2e
