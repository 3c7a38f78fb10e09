#include <gtest/gtest.h>

#include "bpf/perf_sampler.h"

namespace omniprof {
namespace {

TEST(CpuListTest, ParsesRangesAndSingles) {
  auto cpus = parse_cpu_list("0-3,5,7-8\n");
  ASSERT_TRUE(cpus) << cpus.error().message;
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 5, 7, 8}));
}

TEST(CpuListTest, RejectsMalformedLists) {
  for (const char* bad : {"", "a", "3-1", "1-", "0-x"}) {
    auto cpus = parse_cpu_list(bad);
    EXPECT_FALSE(cpus) << "accepted '" << bad << "'";
  }
}

TEST(CpuListTest, ThisMachineHasOnlineCpus) {
  auto cpus = online_cpus();
  ASSERT_TRUE(cpus) << cpus.error().message;
  EXPECT_FALSE(cpus->empty());
}

}  // namespace
}  // namespace omniprof
