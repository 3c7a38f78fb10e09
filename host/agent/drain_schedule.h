// When `run` moves BPF's samples into the round: as the maps fill, not on a
// clock. A drain walks every bucket of stack_counts and stack_traces (a batch
// walk visits the empty ones too), whatever the samples were, so on a machine
// sampled at 19 Hz a drain a second was most of the agent's steady cost while
// the maps held a few hundred entries of their tens of thousands.  BPF keeps
// running totals of what it adds (new stack_counts keys, stack_traces
// fragments, sample_times records: inflow_totals) and a drain is due once what
// one map took in since the last drain passes a quarter of its room. The agent
// does not look every second to find out: thresholds() gives the totals at
// which that happens, BPF sends OMNIPROF_EVENT_DRAIN_DUE when one is passed (on
// a ring the draining thread itself waits on), and the agent looks then (and at
// the round's end). The maps are sized for seconds of inflow
// (fitted_stack_traces_entries: four seconds of new deep stacks on every CPU),
// so the three quarters of room left outlast the event's milliseconds on the
// way and the drain. A map's room is its capacity, less, for stack_traces, the
// fragments the last drain's sweep kept (stacks still sampled: a drain keeps
// them again, so counting them as inflow made a drain due at nearly every look
// on a machine whose stacks are many and deep, each such drain freeing
// nothing). Exited processes waiting for a drain before they are forgotten
// (ProcessTracker::drained) make one due too once kExitsWaiting of them wait
// (the event thread tells the agent), so a machine that starts and ends many
// processes keeps their memory as short as before.
#ifndef OMNIPROF_HOST_AGENT_DRAIN_SCHEDULE_H
#define OMNIPROF_HOST_AGENT_DRAIN_SCHEDULE_H

#include <cstddef>
#include <cstdint>

#include "omniprof/bpf/abi.h"

namespace omniprof {

// Why a drain is due before the round's end.
enum class DrainReason {
  kNotDue,
  kMapsFilling,    // stack_counts, stack_traces or sample_times
  kExitsWaiting,   // kExitsWaiting exited processes wait to be forgotten
  kCountersWrong,  // a total went backwards: drained to be safe
};

// BPF's running totals (over every CPU, since load: inflow_totals).
struct MapInflow {
  uint64_t count_keys_added = 0;       // OMNIPROF_INFLOW_COUNT_KEYS
  uint64_t fragments_stored = 0;       // OMNIPROF_INFLOW_FRAGMENTS
  uint64_t sample_times_recorded = 0;  // OMNIPROF_INFLOW_SAMPLE_TIMES (0 unless recorded)
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
  // processes wait on a drain.
  DrainReason due(const MapInflow& now, size_t exits_waiting) const;

  // The totals from which due() says kMapsFilling (~0: never, for sample
  // times not recorded): what BPF watches (arm_drain_thresholds).
  omniprof_drain_thresholds thresholds() const;

  static constexpr size_t kExitsWaiting = 16;

 private:
  // How many entries added since the drain make a quarter of `room`.
  static uint64_t quarter(uint64_t room) { return (room + 3) / 4; }
  uint64_t fragment_room() const;

  uint64_t stack_counts_entries_;
  uint64_t stack_traces_entries_;
  uint64_t sample_time_records_;
  MapInflow at_drain_;
  uint64_t fragments_kept_ = 0;
};

}  // namespace omniprof

#endif
