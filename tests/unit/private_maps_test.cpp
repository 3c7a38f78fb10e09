// The SDK's helpers for a plugin's own BPF maps (sdk/include/omniprof/
// private_maps.hpp) on real maps: root only (CAP_BPF), skipped otherwise,
// failed in CI (CI=true) where the runner is root.
#include "omniprof/private_maps.hpp"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "omniprof/support/unique_fd.h"

namespace omniprof {
namespace {

struct Key {
  uint32_t pid;
  uint32_t reserved;
  uint64_t address;
};

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// A hash map of Key to uint64_t, as OMNIPROF_SEEN_MAP's two are.
UniqueFd hash_map(const char* name) {
  return UniqueFd(bpf_map_create(BPF_MAP_TYPE_HASH, name, sizeof(Key), sizeof(uint64_t), 64, nullptr));
}

// What the walk does in omniprof_note_seen: the key goes into both maps.
void note(int seen, int fresh, Key key, uint64_t value) {
  ASSERT_EQ(bpf_map_update_elem(seen, &key, &value, BPF_NOEXIST), 0);
  ASSERT_EQ(bpf_map_update_elem(fresh, &key, &value, BPF_ANY), 0);
}

// take_fresh hands over what was noted since the last call, once; what the
// plugin refuses (its process not known yet) leaves the seen map too, so
// that the walk notes it again, while what it took stays seen.
TEST(PrivateMapsTest, TakeFreshHandsEachObjectOverOnceAndForgetsTheRefusedOnes) {
  if (geteuid() != 0) {
    if (in_ci()) FAIL() << "CI runs as root";
    GTEST_SKIP() << "creating BPF maps needs root";
  }
  UniqueFd seen = hash_map("test_seen"), fresh = hash_map("test_seen_fresh");
  ASSERT_TRUE(seen.valid() && fresh.valid()) << "bpf_map_create: " << std::strerror(errno);
  note(seen.get(), fresh.get(), {10, 0, 0x1000}, 1);
  note(seen.get(), fresh.get(), {10, 0, 0x2000}, 2);
  note(seen.get(), fresh.get(), {11, 0, 0x3000}, 3);  // a process the plugin does not know

  auto known = [](const Key& k) { return k.pid == 10; };
  auto taken = sdk::take_fresh<Key, uint64_t>(seen.get(), fresh.get(), 64, known);
  std::sort(taken.begin(), taken.end(), [](const auto& a, const auto& b) { return a.first.address < b.first.address; });
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].first.address, 0x1000u);
  EXPECT_EQ(taken[0].second, 1u);
  EXPECT_EQ(taken[1].first.address, 0x2000u);
  EXPECT_EQ(taken[1].second, 2u);

  uint64_t value = 0;
  Key taken_key{10, 0, 0x1000}, refused_key{11, 0, 0x3000};
  EXPECT_EQ(bpf_map_lookup_elem(seen.get(), &taken_key, &value), 0) << "a taken object must stay seen";
  EXPECT_NE(bpf_map_lookup_elem(seen.get(), &refused_key, &value), 0) << "a refused object must be noted again";
  EXPECT_NE(bpf_map_lookup_elem(fresh.get(), &taken_key, &value), 0) << "the fresh map must be drained";

  // Nothing new: nothing handed over again.
  EXPECT_TRUE((sdk::take_fresh<Key, uint64_t>(seen.get(), fresh.get(), 64, known)).empty());
}

}  // namespace
}  // namespace omniprof
