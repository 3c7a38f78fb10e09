// End-to-end: files the process maps that no path on disk reaches any more.
// A shared library replaced under a running process (a new file renamed over
// it, as every package upgrade does) or deleted, and a program run from a
// memfd: their samples must be unwound and named from the file the process
// runs, read through /proc/PID/map_files. Checked through `go tool pprof`.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_support.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kLibraryChain = {"rl_leaf", "rl_middle", "rl_stage", "main"};

std::string workload_file(const std::string& name) { return std::string(OMNIPROF_WORKLOADS_DIR) + "/" + name; }

// Frames named after a function of the replacement file, with an example.
int64_t samples_with_frames_of_the_new_file(const std::vector<PprofTrace>& traces, std::string* example) {
  int64_t count = 0;
  for (const PprofTrace& trace : traces) {
    for (const std::string& frame : trace.frames) {
      if (frame.starts_with("pad_fn_") || frame == "rl_stage_is_not_here") {
        count += trace.count;
        if (example->empty()) example->append(frame);
        break;
      }
    }
  }
  return count;
}

struct Recorded {
  CommandResult result;
  std::vector<PprofTrace> traces;
  std::string error;  // of reading the profile
};

// `omniprof record` of one process for a few seconds, read back with go.
Recorded record(pid_t pid, const std::string& dir) {
  Recorded recorded;
  const std::string out = dir + "/profile.pb.gz";
  recorded.result =
      run_command({OMNIPROF_BINARY, "record", "-d", "5", "-F", "99", "-p", std::to_string(pid), "-o", out});
  if (recorded.result.exit_code == 0) recorded.traces = read_traces_with_go(out, &recorded.error);
  return recorded;
}

enum class WhatHappens { kReplaced, kDeleted };

class ReplacedFileTest : public ::testing::TestWithParam<WhatHappens> {};

TEST_P(ReplacedFileTest, SamplesAreNamedAndUnwoundFromTheFileTheProcessRuns) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const bool replaced = GetParam() == WhatHappens::kReplaced;
  const std::string dir = temp_dir(replaced ? "replaced" : "deleted");
  const std::string library = dir + "/libreplaced.so";
  fs::copy_file(workload_file("libreplaced_original.so"), library);

  BackgroundProcess target({workload("replaced_lib_nofp"), "120", library});
  ASSERT_TRUE(wait_for_mapping(target.pid(), library, std::chrono::seconds(5))) << "the library was never mapped";
  if (replaced) {
    // New file, then rename: the path names the new file at once, the
    // process keeps the old one, now "(deleted)" in its maps.
    fs::copy_file(workload_file("libreplaced_replacement.so"), library + ".new");
    ASSERT_EQ(std::rename((library + ".new").c_str(), library.c_str()), 0);
  } else {
    ASSERT_TRUE(fs::remove(library));
  }
  ASSERT_TRUE(wait_for_mapping(target.pid(), library + " (deleted)", std::chrono::seconds(2)));

  auto [result, traces, error] = record(target.pid(), dir);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_FALSE(traces.empty()) << error;
  auto [leaf, whole, example] = count_chain(traces, kLibraryChain);
  ASSERT_GT(leaf, 100) << "too few rl_leaf samples: the library's functions lost their names\n" << result.out;
  EXPECT_GE(whole * 100, leaf * 95) << whole << " of " << leaf
                                    << " leaf samples carry the whole chain; one that does not: " << example << "\n"
                                    << result.out;
  std::string new_name;
  EXPECT_EQ(samples_with_frames_of_the_new_file(traces, &new_name), 0)
      << "samples named after the replacement file, e.g. " << new_name;
}

INSTANTIATE_TEST_SUITE_P(LibraryFile, ReplacedFileTest,
                         ::testing::Values(WhatHappens::kReplaced, WhatHappens::kDeleted),
                         [](const ::testing::TestParamInfo<WhatHappens>& info) {
                           return info.param == WhatHappens::kReplaced ? "RenamedOver" : "Deleted";
                         });

// A program copied into memfd_create and fexecve()d: its executable is
// "/memfd:omniprof-memfd (deleted)", reachable through map_files only.
TEST(MemfdExecutableTest, ChainOfAProgramRunFromAMemfdIsNamed) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  BackgroundProcess target({workload("memfd_exec"), workload("chain_nofp"), "120"});
  ASSERT_TRUE(wait_for_mapping(target.pid(), "/memfd:omniprof-memfd (deleted)", std::chrono::seconds(5)));
  auto [result, traces, error] = record(target.pid(), temp_dir("memfd"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_FALSE(traces.empty()) << error;
  auto [leaf, whole, example] = count_chain(traces, {"leaf", "stage_c", "stage_b", "stage_a", "main"});
  ASSERT_GT(leaf, 100) << "too few leaf samples: the memfd executable's functions have no names\n" << result.out;
  EXPECT_GE(whole * 100, leaf * 95) << whole << " of " << leaf << "; one that does not: " << example << "\n"
                                    << result.out;
}

}  // namespace
}  // namespace omniprof::e2e
