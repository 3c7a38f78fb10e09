#include "agent/round_samples.h"

#include <unordered_set>

namespace omniprof {

size_t StackKeyHash::operator()(const omniprof_stack_key& k) const {
  size_t h = std::hash<uint64_t>()(k.user_stack_id);
  h ^= std::hash<uint64_t>()(k.kernel_stack_id) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= (static_cast<uint64_t>(k.pid) << 32 | k.tid) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

uint64_t RoundSamples::total() const {
  uint64_t sum = 0;
  for (const auto& [key, count] : counts) sum += count;
  return sum;
}

void RoundSamples::clear() {
  counts.clear();
  stacks.clear();
  missing_stacks = 0;
}

Result<void> drain_into(BpfMaps& maps, RoundSamples& round) {
  auto drained = maps.drain_stack_counts();
  if (!drained) return drained.error();
  std::unordered_set<uint64_t> referenced;
  for (auto& [key, count] : *drained) {
    for (auto [id, len] : {std::pair<uint64_t, uint32_t>{key.user_stack_id, key.user_stack_len},
                           std::pair<uint64_t, uint32_t>{key.kernel_stack_id, key.kernel_stack_len}}) {
      if (id <= OMNIPROF_STACK_ID_LOST) continue;
      referenced.insert(id);
      if (round.stacks.count(id)) continue;
      auto stack = maps.read_stack(id, len);
      if (stack) {
        round.stacks.emplace(id, std::move(*stack));
      } else {
        round.missing_stacks += count;
      }
    }
    round.counts[key] += count;
  }
  return maps.finalize_profile_loop(referenced);
}

}  // namespace omniprof
