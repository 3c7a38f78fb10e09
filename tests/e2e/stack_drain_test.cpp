// End-to-end, against the kernel: a drain moves stack_counts and the stacks
// they reference out of the host's real BPF maps (drain_into), in batches
// where the kernel has them and key by key where it has not (or they are
// hidden with OMNIPROF_HIDE_BPF_FEATURES=map_batch): the same counts, the
// same frames, and a stack no count referenced for two drains deleted with
// all its fragments. The maps are written from here, as omniprof_stop would.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/round_samples.h"
#include "bpf/bpf_maps.h"
#include "e2e_support.h"

namespace omniprof::e2e {
namespace {

omniprof_frame frame_at(uint64_t address) {
  omniprof_frame f{};
  f.address = address;
  f.kind = OMNIPROF_FRAME_NATIVE;
  return f;
}

// Stores `len` frames (addresses base, base + 1, ...) under `id`, a
// fragment of OMNIPROF_FRAGMENT_FRAMES at a time.
void store_stack(int fd, uint64_t id, uint32_t len, uint64_t base) {
  for (uint32_t index = 0; index * OMNIPROF_FRAGMENT_FRAMES < len; ++index) {
    omniprof_stack_fragment_key key{id, index, 0};
    omniprof_stack_fragment fragment{};
    for (uint32_t i = 0; i < OMNIPROF_FRAGMENT_FRAMES && index * OMNIPROF_FRAGMENT_FRAMES + i < len; ++i) {
      fragment.frames[i] = frame_at(base + index * OMNIPROF_FRAGMENT_FRAMES + i);
    }
    ASSERT_EQ(bpf_map_update_elem(fd, &key, &fragment, BPF_ANY), 0) << strerror(errno);
  }
}

omniprof_stack_key count_key(uint32_t pid, uint64_t user_id, uint16_t user_len, uint64_t kernel_id,
                             uint16_t kernel_len) {
  omniprof_stack_key key{};
  key.pid = pid;
  key.tid = pid;
  key.user_stack_id = user_id;
  key.user_stack_len = user_len;
  key.kernel_stack_id = kernel_id;
  key.kernel_stack_len = kernel_len;
  return key;
}

size_t fragments_in_map(int fd) {
  size_t n = 0;
  omniprof_stack_fragment_key key{}, next{};
  for (int err = bpf_map_get_next_key(fd, nullptr, &next); err == 0; err = bpf_map_get_next_key(fd, &key, &next)) {
    ++n;
    key = next;
  }
  return n;
}

class StackDrainTest : public ::testing::TestWithParam<bool> {
 protected:
  // BpfMaps::load reads the variable; the tests after this one see it as
  // it was.
  void SetUp() override {
    if (const char* was = getenv("OMNIPROF_HIDE_BPF_FEATURES")) saved_ = was;
    if (GetParam()) {
      setenv("OMNIPROF_HIDE_BPF_FEATURES", "map_batch", 1);
    } else {
      unsetenv("OMNIPROF_HIDE_BPF_FEATURES");
    }
  }
  void TearDown() override {
    if (saved_) {
      setenv("OMNIPROF_HIDE_BPF_FEATURES", saved_->c_str(), 1);
    } else {
      unsetenv("OMNIPROF_HIDE_BPF_FEATURES");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST_P(StackDrainTest, CountsAndWholeStacksMoveOutAndUnreferencedStacksGoAfterTwoDrains) {
  OMNIPROF_REQUIRE_BPF();
  const bool key_by_key = GetParam();
  auto opened = BpfMaps::open();
  ASSERT_TRUE(opened) << opened.error().message;
  BpfMaps& maps = **opened;
  // Room for more counts than one batch holds (BpfMaps::kCountsBatch).
  MapSizes sizes;
  sizes.stack_counts = 4096;
  sizes.stack_traces = 8192;
  ASSERT_TRUE(maps.adjust_map_sizes(sizes));
  auto loaded = maps.load();
  ASSERT_TRUE(loaded) << loaded.error().message;
  const int counts_fd = maps.map_fd(OMNIPROF_MAP_STACK_COUNTS);
  const int traces_fd = maps.map_fd(OMNIPROF_MAP_STACK_TRACES);

  // 1500 counts (more than a batch) over 300 user stacks of 1 to 40 frames
  // (up to three fragments), all sharing one kernel stack of 5 frames, and
  // a stack whose store failed half-way (fragment 1 only: no count has it).
  constexpr uint64_t kKernelId = 0xfeed;
  ASSERT_NO_FATAL_FAILURE(store_stack(traces_fd, kKernelId, 5, 0xffffffff81000000ULL));
  std::map<uint64_t, uint32_t> user_stacks;  // id -> len
  for (uint64_t s = 0; s < 300; ++s) {
    const uint64_t id = 0x1000 + s;
    const uint32_t len = 1 + static_cast<uint32_t>(s % 40);
    user_stacks[id] = len;
    ASSERT_NO_FATAL_FAILURE(store_stack(traces_fd, id, len, id << 16));
  }
  omniprof_stack_fragment_key orphan{0xdead, 1, 0};
  omniprof_stack_fragment orphan_frames{};
  ASSERT_EQ(bpf_map_update_elem(traces_fd, &orphan, &orphan_frames, BPF_ANY), 0);
  uint64_t expected_total = 0;
  for (uint32_t c = 0; c < 1500; ++c) {
    const uint64_t id = 0x1000 + c % 300;
    omniprof_stack_key key = count_key(1000 + c, id, static_cast<uint16_t>(user_stacks[id]), kKernelId, 5);
    const uint64_t value = 1 + c % 3;
    expected_total += value;
    ASSERT_EQ(bpf_map_update_elem(counts_fd, &key, &value, BPF_ANY), 0) << strerror(errno);
  }
  // A count whose stack is not in the map (deleted under it): counted as
  // missing, its count kept.
  omniprof_stack_key gone = count_key(7, 0xabc, 3, OMNIPROF_STACK_ID_NONE, 0);
  uint64_t one = 1;
  ASSERT_EQ(bpf_map_update_elem(counts_fd, &gone, &one, BPF_ANY), 0);

  RoundSamples round;
  auto drained = drain_into(maps, round);
  ASSERT_TRUE(drained) << drained.error().message;
  EXPECT_EQ(maps.batch_ops_used(), !key_by_key);
  EXPECT_EQ(round.counts.size(), 1501u);
  EXPECT_EQ(round.total(), expected_total + 1);
  EXPECT_EQ(round.missing_stacks, 1u);
  omniprof_stack_key probe{};
  EXPECT_NE(bpf_map_get_next_key(counts_fd, nullptr, &probe), 0) << "stack_counts not empty after the drain";
  // Every stack whole, frame for frame.
  ASSERT_EQ(round.stacks.size(), 301u);
  for (const auto& [id, len] : user_stacks) {
    auto it = round.stacks.find(id);
    ASSERT_NE(it, round.stacks.end()) << "stack " << id;
    ASSERT_EQ(it->second.frames.size(), len) << "stack " << id;
    for (uint32_t i = 0; i < len; ++i) EXPECT_EQ(it->second.frames[i].address, (id << 16) + i) << "stack " << id;
  }
  ASSERT_EQ(round.stacks.at(kKernelId).frames.size(), 5u);
  EXPECT_EQ(round.stacks.at(kKernelId).frames[4].address, 0xffffffff81000004ULL);

  // Referenced this drain: nothing deleted yet. A second drain where only
  // stack 0x1000 (and the kernel stack) is counted: the others are
  // unreferenced once, and stay; the orphan, unreferenced at both drains,
  // goes. A third: the others unreferenced twice, deleted, every fragment;
  // the referenced ones stay.
  const size_t stored = fragments_in_map(traces_fd);
  EXPECT_GT(stored, 301u);
  for (int drain = 2; drain <= 3; ++drain) {
    omniprof_stack_key key = count_key(1, 0x1000, static_cast<uint16_t>(user_stacks[0x1000]), kKernelId, 5);
    ASSERT_EQ(bpf_map_update_elem(counts_fd, &key, &one, BPF_ANY), 0);
    auto again = drain_into(maps, round);
    ASSERT_TRUE(again) << again.error().message;
    if (drain == 2) {
      EXPECT_EQ(fragments_in_map(traces_fd), stored - 1) << "not the orphan alone deleted at the second drain";
      EXPECT_NE(bpf_map_lookup_elem(traces_fd, &orphan, &orphan_frames), 0) << "the orphan fragment stayed";
    }
  }
  EXPECT_EQ(fragments_in_map(traces_fd), 2u) << "stack 0x1000 (1 fragment) and the kernel stack are left";
  omniprof_stack_fragment_key kept{0x1000, 0, 0};
  omniprof_stack_fragment back{};
  EXPECT_EQ(bpf_map_lookup_elem(traces_fd, &kept, &back), 0);
  EXPECT_EQ(round.counts.size(), 1502u);  // the two later counts share one key
  EXPECT_EQ(round.total(), expected_total + 3);
}

// percpu_stats read whole (one batch, or a lookup per counter): each
// counter summed over the CPUs.
TEST_P(StackDrainTest, StatsAreEachCounterSummedOverTheCpus) {
  OMNIPROF_REQUIRE_BPF();
  auto opened = BpfMaps::open();
  ASSERT_TRUE(opened) << opened.error().message;
  BpfMaps& maps = **opened;
  auto loaded = maps.load();
  ASSERT_TRUE(loaded) << loaded.error().message;
  const int cpus = libbpf_num_possible_cpus();
  ASSERT_GT(cpus, 0);
  const int fd = maps.map_fd(OMNIPROF_MAP_PERCPU_STATS);
  for (uint32_t stat : {0u, 3u, static_cast<uint32_t>(OMNIPROF_NUM_STATS - 1)}) {
    std::vector<uint64_t> per_cpu(cpus);
    for (int c = 0; c < cpus; ++c) per_cpu[c] = stat * 1000 + c + 1;
    ASSERT_EQ(bpf_map_update_elem(fd, &stat, per_cpu.data(), BPF_ANY), 0) << strerror(errno);
  }
  auto stats = maps.read_stats();
  ASSERT_TRUE(stats) << stats.error().message;
  ASSERT_EQ(stats->size(), static_cast<size_t>(OMNIPROF_NUM_STATS));
  const uint64_t n = static_cast<uint64_t>(cpus);
  for (uint32_t stat : {0u, 3u, static_cast<uint32_t>(OMNIPROF_NUM_STATS - 1)}) {
    EXPECT_EQ((*stats)[stat], stat * 1000 * n + n * (n + 1) / 2) << "counter " << stat;
  }
  EXPECT_EQ((*stats)[1], 0u);
}

INSTANTIATE_TEST_SUITE_P(Drains, StackDrainTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "KeyByKey" : "Batches"; });

}  // namespace
}  // namespace omniprof::e2e
