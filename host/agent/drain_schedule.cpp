#include "agent/drain_schedule.h"

namespace omniprof {

DrainSchedule::DrainSchedule(uint64_t stack_counts_entries, uint64_t stack_traces_entries, uint64_t sample_time_records)
    : stack_counts_entries_(stack_counts_entries),
      stack_traces_entries_(stack_traces_entries),
      sample_time_records_(sample_time_records) {}

void DrainSchedule::drained(const MapInflow& before_drain, uint64_t fragments_kept) {
  at_drain_ = before_drain;
  fragments_kept_ = fragments_kept;
}

uint64_t DrainSchedule::fragment_room() const {
  // The fragments a sweep kept are not inflow: they belong to stacks still
  // sampled, and a drain now would keep them again. What the inflow can
  // fill is the room they leave.
  return stack_traces_entries_ > fragments_kept_ ? stack_traces_entries_ - fragments_kept_ : 0;
}

DrainReason DrainSchedule::due(const MapInflow& now, size_t exits_waiting) const {
  // Totals only grow; a smaller one (counters read wrong) drains to be safe.
  if (now.count_keys_added < at_drain_.count_keys_added || now.fragments_stored < at_drain_.fragments_stored ||
      now.sample_times_recorded < at_drain_.sample_times_recorded) {
    return DrainReason::kCountersWrong;
  }
  if (now.count_keys_added - at_drain_.count_keys_added >= quarter(stack_counts_entries_) ||
      now.fragments_stored - at_drain_.fragments_stored >= quarter(fragment_room()) ||
      (sample_time_records_ > 0 &&
       now.sample_times_recorded - at_drain_.sample_times_recorded >= quarter(sample_time_records_))) {
    return DrainReason::kMapsFilling;
  }
  if (exits_waiting >= kExitsWaiting) return DrainReason::kExitsWaiting;
  return DrainReason::kNotDue;
}

omniprof_drain_thresholds DrainSchedule::thresholds() const {
  omniprof_drain_thresholds t{};
  for (uint64_t& at : t.at) at = ~0ULL;
  t.at[OMNIPROF_INFLOW_COUNT_KEYS] = at_drain_.count_keys_added + quarter(stack_counts_entries_);
  t.at[OMNIPROF_INFLOW_FRAGMENTS] = at_drain_.fragments_stored + quarter(fragment_room());
  if (sample_time_records_ > 0) {
    t.at[OMNIPROF_INFLOW_SAMPLE_TIMES] = at_drain_.sample_times_recorded + quarter(sample_time_records_);
  }
  return t;
}

}  // namespace omniprof
