// End-to-end, against the kernel: the host's side of growing unwind storage.
// BpfMaps creates the inner maps of unwind_shards on request, within the
// budget the config sets, keeps their fds (so host.bpf_map_bytes sees them)
// and refuses past the budget with OMNIPROF_ERR_NO_SPACE, as a plugin sees
// through omniprof_host_api.create_inner_map.
#include <bpf/bpf.h>

#include <string>

#include "bpf/bpf_maps.h"
#include "bpf/bpf_support.h"
#include "e2e_support.h"

namespace omniprof::e2e {
namespace {

TEST(InnerMapsTest, ShardsAreCreatedOnRequestWithinTheBudget) {
  OMNIPROF_REQUIRE_BPF();
  auto maps = BpfMaps::open();
  ASSERT_TRUE(maps) << maps.error().message;
  MapSizes sizes;
  sizes.unwind_memory_mb = 3;
  ASSERT_TRUE((*maps)->adjust_map_sizes(sizes));
  auto loaded = (*maps)->load();
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ((*maps)->inner_map_budget(OMNIPROF_MAP_UNWIND_SHARDS), 3u);
  EXPECT_EQ((*maps)->inner_maps(OMNIPROF_MAP_UNWIND_SHARDS), 0u) << "nothing before it is asked for";

  bpf_map_info outer{};
  uint32_t len = sizeof(outer);
  ASSERT_EQ(bpf_obj_get_info_by_fd((*maps)->map_fd(OMNIPROF_MAP_UNWIND_SHARDS), &outer, &len), 0);
  EXPECT_EQ(outer.type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  EXPECT_EQ(outer.max_entries, 3u);

  std::string reason;
  int fds[3] = {-1, -1, -1};
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_EQ((*maps)->create_inner_map(OMNIPROF_MAP_UNWIND_SHARDS, i, &fds[i], &reason), OMNIPROF_OK) << reason;
    bpf_map_info shard{};
    len = sizeof(shard);
    ASSERT_EQ(bpf_obj_get_info_by_fd(fds[i], &shard, &len), 0);
    EXPECT_EQ(shard.type, BPF_MAP_TYPE_ARRAY);
    EXPECT_EQ(shard.max_entries, OMNIPROF_ROWS_PER_SHARD);
    EXPECT_EQ(shard.value_size, sizeof(omniprof_unwind_row));
    // In the outer map, where the walker finds it.
    uint32_t id = 0;
    ASSERT_EQ(bpf_map_lookup_elem((*maps)->map_fd(OMNIPROF_MAP_UNWIND_SHARDS), &i, &id), 0);
    EXPECT_EQ(id, shard.id);
  }
  EXPECT_EQ((*maps)->inner_maps(OMNIPROF_MAP_UNWIND_SHARDS), 3u);

  // Rows written through the fd the host returned are the ones in the map.
  omniprof_unwind_row row{0x1234, 7, 0};
  uint32_t key = OMNIPROF_ROWS_PER_SHARD - 1;
  ASSERT_EQ(bpf_map_update_elem(fds[2], &key, &row, BPF_ANY), 0);
  omniprof_unwind_row back{};
  ASSERT_EQ(bpf_map_lookup_elem(fds[2], &key, &back), 0);
  EXPECT_EQ(back.pc_offset, 0x1234u);

  // Asking again for a shard that exists gives the same map.
  int again = -1;
  EXPECT_EQ((*maps)->create_inner_map(OMNIPROF_MAP_UNWIND_SHARDS, 1, &again, &reason), OMNIPROF_OK);
  EXPECT_EQ(again, fds[1]);
  EXPECT_EQ((*maps)->inner_maps(OMNIPROF_MAP_UNWIND_SHARDS), 3u);

  // Past the budget: refused, and said why.
  int refused = -1;
  reason.clear();
  EXPECT_EQ((*maps)->create_inner_map(OMNIPROF_MAP_UNWIND_SHARDS, 3, &refused, &reason), OMNIPROF_ERR_NO_SPACE);
  EXPECT_EQ(refused, -1);
  EXPECT_NE(reason.find("budget"), std::string::npos) << reason;
  EXPECT_EQ((*maps)->inner_maps(OMNIPROF_MAP_UNWIND_SHARDS), 3u);

  // A map that is no map-of-maps, or no fd to write to.
  EXPECT_EQ((*maps)->create_inner_map(OMNIPROF_MAP_STACK_COUNTS, 0, &refused, &reason),
            OMNIPROF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ((*maps)->create_inner_map(OMNIPROF_MAP_UNWIND_SHARDS, 0, nullptr, &reason),
            OMNIPROF_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace omniprof::e2e
