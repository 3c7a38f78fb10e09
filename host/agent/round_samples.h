// RoundSamples: the samples of one profiling round, moved out of BPF maps
// into host memory every drain (about once a second), so stack_counts never
// has to hold a whole round and a stack is read once however often it recurs.
#pragma once

#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "bpf/bpf_maps.h"
#include "omniprof/support/result.h"

namespace omniprof {

struct StackKeyHash {
  size_t operator()(const omniprof_stack_key& k) const;
};
struct StackKeyEqual {
  bool operator()(const omniprof_stack_key& a, const omniprof_stack_key& b) const {
    return std::memcmp(&a, &b, sizeof(a)) == 0;
  }
};

struct RoundSamples {
  std::unordered_map<omniprof_stack_key, uint64_t, StackKeyHash, StackKeyEqual> counts;
  std::unordered_map<uint64_t, StackFrames> stacks;
  uint64_t missing_stacks = 0;  // a count referenced a stack no longer in stack_traces

  uint64_t total() const;
  void clear();
};

// Moves stack_counts into `round` and copies the stacks they reference.
Result<void> drain_into(BpfMaps& maps, RoundSamples& round);

}  // namespace omniprof
