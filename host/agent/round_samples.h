// RoundSamples: the samples of one profiling round, moved out of BPF maps
// into host memory at every drain (each second in `record`, as the maps
// fill in `run`), so stack_counts never has to hold a whole round and a
// stack is read once however often it recurs.
#pragma once

#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "bpf/bpf_maps.h"
#include "omniprof/support/result.h"
#include "process/process_snapshot.h"

namespace omniprof {

// A stored stack as the profile shows it: leaf first, interpreter frames
// (OMNIPROF_FRAME_SPLICED) already moved to their place among the native ones.
struct StackFrames {
  std::vector<omniprof_frame> frames;
};

// Puts each spliced frame right after the first `after` unspliced frames,
// keeping the order of both (see omniprof_unwind_state in abi.h); a spliced
// frame flagged OMNIPROF_FRAME_REPLACES_MARK takes the place of the
// `after`-th unspliced frame, which is left out.
std::vector<omniprof_frame> splice_interpreter_frames(const std::vector<omniprof_frame>& stored);

struct StackKeyHash {
  size_t operator()(const omniprof_stack_key& k) const;
};
struct StackKeyEqual {
  bool operator()(const omniprof_stack_key& a, const omniprof_stack_key& b) const {
    return std::memcmp(&a, &b, sizeof(a)) == 0;
  }
};

template <typename T>
using StackKeyMap = std::unordered_map<omniprof_stack_key, T, StackKeyHash, StackKeyEqual>;

// Where the figures of settle_times go (agent stats).
struct SampleTimeStats {
  uint64_t untimed = 0;     // samples sent without their times (a time lost or late)
  uint64_t unmatched = 0;   // times that matched no counted sample, dropped
};

struct RoundSamples {
  StackKeyMap<uint64_t> counts;
  std::unordered_map<uint64_t, StackFrames> stacks;
  uint64_t missing_stacks = 0;  // a count referenced a stack no longer in stack_traces
  // Each sample's time (CLOCK_MONOTONIC ns), by key, when BPF records them
  // (BpfMaps::record_sample_times). After settle_times: for each key either
  // exactly counts[key] times, in order and in ns since the Unix epoch, or
  // none.
  StackKeyMap<std::vector<uint64_t>> times;
  // The image a sample of a process that exec'd in the round ran in, chosen
  // by the drain that brought it (pin_images); a key not here is named with
  // its process's image at the round's close.
  StackKeyMap<std::shared_ptr<const ProcessSnapshot>> images;

  uint64_t total() const;
  // For each counted key of a process in `recent` (ProcessTracker::
  // recent_images) not chosen yet: the image its user stack ran in
  // (KnownProcesses::image_for, by the stack's native addresses and the
  // thread's name), when that is an image an exec replaced.
  void pin_images(const KnownProcesses& recent);
  // Makes `times` agree with `counts` at the round's close (`close_ns`,
  // CLOCK_MONOTONIC, taken before its last drain). A time is written after
  // its count, and the host reads counts before times, so at a drain a key
  // may have a time whose count the next drain will see (kept for the next
  // round, the latest first), or a count whose time the next read will see
  // (the key goes untimed this round, and that late time is dropped next
  // round). A time carried once that still matches no count is dropped.
  // `unix_minus_mono_ns`: CLOCK_REALTIME - CLOCK_MONOTONIC at the close.
  void settle_times(uint64_t close_ns, int64_t unix_minus_mono_ns, SampleTimeStats& stats);
  // Starts the next round, keeping the times settle_times carried over.
  void clear();

 private:
  struct Owed {
    uint64_t count = 0;     // late times still to come for the closed round
    uint64_t close_ns = 0;  // taken before that round's close
  };
  StackKeyMap<std::vector<uint64_t>> carried_;  // times of the next round's counts
  StackKeyMap<Owed> owed_;
  StackKeyMap<size_t> carried_in_;  // of `times`, how many settle_times carried in
};

// Moves stack_counts into `round` and copies the stacks they reference
// (spliced), then the sample times recorded since the last drain.
Result<void> drain_into(BpfMaps& maps, RoundSamples& round);

}  // namespace omniprof
