// When `run` moves BPF's samples into the round: as the maps fill, not on a
// clock. A drain walks every bucket of stack_counts and stack_traces
// (a batch walk visits the empty ones too), whatever the samples were, so on
// a machine sampled at 19 Hz a drain a second was most of the agent's steady
// cost while the maps held a few hundred entries of their tens of thousands.
//
// BPF counts what it adds (new stack_counts keys, stack_traces fragments,
// samples recorded: sample_times records); the agent reads those three
// counters every second (one batch read) and drains when what the maps
// took in since the last drain passes a quarter of their room, or would pass
// half of it within two more seconds at the last second's rate. Below that a
// second's inflow cannot fill a map before the next check, so no sample is
// dropped that a drain every second would have kept. A map's room is its
// capacity, less, for stack_traces, the fragments the last drain's sweep
// kept (stacks still sampled: a drain keeps them again, so counting them as
// inflow made a drain due at nearly every check on a machine whose stacks
// are many and deep, each such drain freeing nothing). Exited processes
// waiting for a drain before they are forgotten (ProcessTracker::drained)
// make one due too once kExitsWaiting of them wait, so a machine that
// starts and ends many processes keeps their memory as short as before.
#ifndef OMNIPROF_HOST_AGENT_DRAIN_SCHEDULE_H
#define OMNIPROF_HOST_AGENT_DRAIN_SCHEDULE_H

#include <cstddef>
#include <cstdint>

namespace omniprof {

// Why a drain is due before the round's end.
enum class DrainReason {
  kNotDue,
  kMapsFilling,    // stack_counts, stack_traces or sample_times
  kExitsWaiting,   // kExitsWaiting exited processes wait to be forgotten
  kCountersWrong,  // a total went backwards: drained to be safe
};

// BPF's running totals (over every CPU, since load).
struct MapInflow {
  uint64_t count_keys_added = 0;   // OMNIPROF_STAT_COUNT_KEYS_ADDED
  uint64_t fragments_stored = 0;   // OMNIPROF_STAT_FRAGMENTS_STORED
  uint64_t samples_recorded = 0;   // OMNIPROF_STAT_RECORDED
};

class DrainSchedule {
 public:
  // The maps' capacities: stack_counts keys, stack_traces fragments, and
  // sample_times records (0: sample times are not recorded).
  DrainSchedule(uint64_t stack_counts_entries, uint64_t stack_traces_entries, uint64_t sample_time_records);

  // A drain began with BPF's totals as they were just before it; its sweep
  // left `fragments_kept` fragments in stack_traces.
  void drained(const MapInflow& before_drain, uint64_t fragments_kept);

  // Whether to drain now, given BPF's totals now and how many exited
  // processes wait on a drain. Called about once a second: remembers `now`
  // as the last check, whose difference to the next is "the last second".
  DrainReason due(const MapInflow& now, size_t exits_waiting);

  static constexpr size_t kExitsWaiting = 16;

 private:
  // Whether `held` (entries added since the drain, plus any kept), growing
  // by `per_check` each check, reaches a quarter of `capacity` now or half
  // of it within two checks.
  static bool filling(uint64_t held, uint64_t per_check, uint64_t capacity);

  uint64_t stack_counts_entries_;
  uint64_t stack_traces_entries_;
  uint64_t sample_time_records_;
  MapInflow at_drain_;
  MapInflow at_check_;
  uint64_t fragments_kept_ = 0;
};

}  // namespace omniprof

#endif
