// End-to-end: programs built -O2 -fomit-frame-pointer, as distro code is,
// walked whole by the native plugin's unwind tables in BPF. Checked through
// `go tool pprof` on the written profile.
#include <algorithm>
#include <string>
#include <vector>

#include "e2e_support.h"

namespace omniprof::e2e {
namespace {

struct Workload {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> chain;  // leaf first, consecutive frames every leaf sample must carry
};

std::vector<std::string> recursion_chain(int depth) {
  std::vector<std::string> chain = {"leaf"};
  for (int i = 0; i < depth; ++i) chain.push_back("recurse");
  chain.push_back("main");
  return chain;
}

const std::vector<std::string> kChain = {"leaf", "stage_c", "stage_b", "stage_a", "main"};

class DwarfUnwindTest : public ::testing::TestWithParam<Workload> {};

TEST_P(DwarfUnwindTest, NinetyFivePercentOfLeafSamplesCarryTheWholeChain) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const Workload& w = GetParam();
  std::vector<std::string> argv = {workload(w.name)};
  argv.insert(argv.end(), w.args.begin(), w.args.end());
  BackgroundProcess target(argv);
  std::string out = temp_dir(w.name) + "/profile.pb.gz";
  auto result = run_command({OMNIPROF_BINARY, "record", "-d", "5", "-F", "99", "-p",
                             std::to_string(target.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("native.dwarf_frames"), std::string::npos) << result.out;

  std::string error;
  auto traces = read_traces_with_go(out, &error);
  ASSERT_FALSE(traces.empty()) << error;
  int64_t leaf = 0, whole = 0;
  std::string example;
  for (const auto& t : traces) {
    if (t.frames.empty() || t.frames.front() != "leaf") continue;
    leaf += t.count;
    if (std::search(t.frames.begin(), t.frames.end(), w.chain.begin(), w.chain.end()) != t.frames.end()) {
      whole += t.count;
    } else if (example.empty()) {
      for (const auto& f : t.frames) example += f + " <- ";
    }
  }
  ASSERT_GT(leaf, 100) << "too few leaf samples to judge";
  EXPECT_GE(whole * 100, leaf * 95) << whole << " of " << leaf
                                    << " leaf samples carry the whole chain; one that does not: " << example
                                    << "\n" << result.out;
}

INSTANTIATE_TEST_SUITE_P(
    Workloads, DwarfUnwindTest,
    ::testing::Values(Workload{"chain_nofp", {"20"}, kChain},
                      Workload{"chain_nofp_nopie", {"20"}, kChain},
                      Workload{"chain_nofp_static", {"20"}, kChain},
                      Workload{"chain_nofp_shared", {"20"}, kChain},
                      Workload{"threads_nofp", {"20"}, {"leaf", "stage_c", "stage_b", "stage_a", "worker"}},
                      Workload{"recursion_nofp", {"20", "60"}, recursion_chain(60)}),
    [](const ::testing::TestParamInfo<Workload>& info) { return info.param.name; });

}  // namespace
}  // namespace omniprof::e2e
