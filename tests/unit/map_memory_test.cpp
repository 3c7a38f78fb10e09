// host.bpf_map_bytes (host/bpf/map_memory.h) on real maps: root only
// (CAP_BPF), skipped otherwise, failed in CI (CI=true) where the runner is
// root.
#include "bpf/map_memory.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "omniprof/support/unique_fd.h"

namespace omniprof {
namespace {

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// The memlock line of the fd's fdinfo, read here independently.
uint64_t fdinfo_memlock(int fd) {
  std::string path = "/proc/self/fdinfo/" + std::to_string(fd);
  FILE* in = std::fopen(path.c_str(), "r");
  if (!in) return 0;
  char line[256];
  uint64_t memlock = 0;
  while (std::fgets(line, sizeof(line), in)) {
    if (std::strncmp(line, "memlock:", 8) == 0) memlock = std::strtoull(line + 8, nullptr, 10);
  }
  std::fclose(in);
  return memlock;
}

// Maps made and closed change the figure by their own memlock; a map held
// by two fds counts once; a map seen before is not read again.
TEST(BpfMapMemory, CountsEachHeldMapOnceAndReadsItsFdinfoOnce) {
  UniqueFd probe(bpf_map_create(BPF_MAP_TYPE_ARRAY, "mem_probe", 4, 8, 1, nullptr));
  if (!probe.valid()) {
    if (in_ci()) FAIL() << "CI runs as root";
    GTEST_SKIP() << "creating BPF maps needs root";
  }
  probe.reset();
  BpfMapMemory meter;
  auto before = meter.measure();
  ASSERT_TRUE(before) << before.error().message;
  const uint64_t reads_before = meter.fdinfo_reads();

  UniqueFd big(bpf_map_create(BPF_MAP_TYPE_ARRAY, "mem_big", 4, 4096, 256, nullptr));
  UniqueFd small(bpf_map_create(BPF_MAP_TYPE_HASH, "mem_small", 8, 8, 64, nullptr));
  ASSERT_TRUE(big.valid() && small.valid());
  const uint64_t big_bytes = fdinfo_memlock(big.get()), small_bytes = fdinfo_memlock(small.get());
  ASSERT_GT(big_bytes, 256u * 4096u);
  ASSERT_GT(small_bytes, 0u);
  UniqueFd big_again(dup(big.get()));
  ASSERT_TRUE(big_again.valid());

  auto with = meter.measure();
  ASSERT_TRUE(with);
  EXPECT_EQ(*with, *before + big_bytes + small_bytes);
  EXPECT_EQ(meter.fdinfo_reads(), reads_before + 2) << "one read per new map, not per fd";

  auto again = meter.measure();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *with);
  EXPECT_EQ(meter.fdinfo_reads(), reads_before + 2) << "a map seen before is not read again";

  big.reset();
  auto one_fd_left = meter.measure();
  ASSERT_TRUE(one_fd_left);
  EXPECT_EQ(*one_fd_left, *with) << "still held by its second fd";
  big_again.reset();
  small.reset();
  auto after = meter.measure();
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, *before);
}

}  // namespace
}  // namespace omniprof
