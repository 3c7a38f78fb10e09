// End-to-end, against the kernel: process_info is created unpreallocated
// exactly where the kernel lets perf_event programs read such a map (the
// host's probe), and either way it holds maps.processes entries, no more:
// the one past them is refused with an error naming the map and the pid,
// and a deleted entry makes room again.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <iostream>
#include <string>

#include "bpf/bpf_maps.h"
#include "bpf/bpf_support.h"
#include "e2e_support.h"

namespace omniprof::e2e {
namespace {

TEST(MapMemoryTest, ProcessInfoIsUnpreallocatedWhereTheKernelAllowsAndHoldsItsSizeEitherWay) {
  OMNIPROF_REQUIRE_BPF();
  const bool unpreallocated = perf_event_programs_take_unpreallocated_maps();
  std::cout << "perf_event programs take unpreallocated maps on this kernel: " << (unpreallocated ? "yes" : "no")
            << "\n";
  auto opened = BpfMaps::open();
  ASSERT_TRUE(opened) << opened.error().message;
  BpfMaps& maps = **opened;
  MapSizes sizes;
  sizes.processes = 1024;
  ASSERT_TRUE(maps.adjust_map_sizes(sizes));
  auto loaded = maps.load();
  ASSERT_TRUE(loaded) << loaded.error().message;
  const int fd = maps.map_fd(OMNIPROF_MAP_PROCESS_INFO);
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  ASSERT_EQ(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
  EXPECT_EQ((info.map_flags & BPF_F_NO_PREALLOC) != 0, unpreallocated) << "flags " << info.map_flags;
  EXPECT_EQ(info.max_entries, 1024u);

  omniprof_process_info process{};
  for (int32_t pid = 1; pid <= 1024; ++pid) {
    auto written = maps.write_process_info(pid, process);
    ASSERT_TRUE(written) << written.error().message;
  }
  auto refused = maps.write_process_info(1025, process);
  ASSERT_FALSE(refused) << "a 1025th process written in a map of 1024";
  EXPECT_NE(refused.error().message.find("process_info for pid 1025"), std::string::npos) << refused.error().message;
  maps.delete_process_info(7);
  auto again = maps.write_process_info(1025, process);
  EXPECT_TRUE(again) << again.error().message;
  omniprof_process_info back{};
  uint32_t key = 1025;
  EXPECT_EQ(bpf_map_lookup_elem(fd, &key, &back), 0);
}

}  // namespace
}  // namespace omniprof::e2e
