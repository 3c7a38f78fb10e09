// End-to-end: the "big executables" scene of a developer machine or CI
// runner, with the default config. A Python process that has loaded
// libLLVM-14 (~0.9M unwind rows) and libclang-cpp-14 (~1M) and calls into
// LLVM, next to a `node` busy loop (~0.4M): more than the old fixed unwind
// space (8 shards, 1M rows) held. The unwind storage must grow to hold all
// of it, and the walks through LLVM must reach the bottom of the stack.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
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

// A counter of `omniprof record`'s output, -1 when not printed (zero).
long long counter(const std::string& output, const std::string& name) {
  std::smatch m;
  std::regex line("\\n\\s*" + std::regex_replace(name, std::regex("\\."), "\\.") + "\\s+(\\d+)");
  return std::regex_search(output, m, line) ? std::stoll(m[1]) : -1;
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
  // Loads both libraries and calls into LLVM in a loop.
  BackgroundProcess python_process({py, OMNIPROF_TEST_SOURCE_DIR "/workloads/llvm_calls.py", "30", kLlvm, kClang});
  BackgroundProcess node_process({kNode, "-e", "const end = Date.now() + 30000; let x = 0; while (Date.now() < end) x++;"});
  usleep(1000 * 1000);  // both libraries mapped

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
  int64_t python_samples = 0, whole = 0, in_llvm = 0, in_llvm_whole = 0;
  std::string counterexample;
  for (const auto& t : traces) {
    auto pid = t.labels.find("pid");
    if (pid == t.labels.end() || pid->second != std::to_string(python_process.pid())) continue;
    bool bottom = false, llvm = false;
    for (const auto& f : t.frames) {
      bottom |= f == "main" || f == "_start";
      llvm |= f.rfind("llvm::", 0) == 0 || f.rfind("LLVM", 0) == 0;
    }
    python_samples += t.count;
    whole += bottom ? t.count : 0;
    in_llvm += llvm ? t.count : 0;
    in_llvm_whole += llvm && bottom ? t.count : 0;
    if (!bottom && counterexample.empty()) {
      for (const auto& f : t.frames) counterexample += "\n  " + f;
    }
  }
  std::printf("python: %lld of %lld samples whole, in libLLVM %lld of %lld; %lld rows in %lld shards\n",
              static_cast<long long>(whole), static_cast<long long>(python_samples),
              static_cast<long long>(in_llvm_whole), static_cast<long long>(in_llvm), rows, shards);
  ASSERT_GT(python_samples, 40) << "too few samples of the Python process to judge\n" << result.out;
  // Samples taken before the tables were built walk by frame pointers only;
  // the rest must reach the bottom of the stack.
  EXPECT_GE(whole * 100, python_samples * 80)
      << whole << " of " << python_samples << " samples reach main or _start; one that does not:" << counterexample;
  ASSERT_GT(in_llvm, 8) << "too few samples in libLLVM to judge";
  EXPECT_GE(in_llvm_whole * 100, in_llvm * 80) << in_llvm_whole << " of " << in_llvm << " samples in libLLVM";
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
  BackgroundProcess python_process({py, OMNIPROF_TEST_SOURCE_DIR "/workloads/llvm_calls.py", "30", kLlvm, kClang});
  usleep(1000 * 1000);
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
