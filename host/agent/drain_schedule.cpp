#include "agent/drain_schedule.h"

namespace omniprof {

DrainSchedule::DrainSchedule(uint64_t stack_counts_entries, uint64_t stack_traces_entries, uint64_t sample_time_records)
    : stack_counts_entries_(stack_counts_entries),
      stack_traces_entries_(stack_traces_entries),
      sample_time_records_(sample_time_records) {}

void DrainSchedule::drained(const MapInflow& before_drain, uint64_t fragments_kept) {
  at_drain_ = before_drain;
  at_check_ = before_drain;
  fragments_kept_ = fragments_kept;
}

bool DrainSchedule::filling(uint64_t held, uint64_t per_check, uint64_t capacity) {
  return 4 * held >= capacity || 2 * (held + 2 * per_check) >= capacity;
}

DrainReason DrainSchedule::due(const MapInflow& now, size_t exits_waiting) {
  // Totals only grow; a smaller one (counters read wrong) drains to be safe.
  auto since = [](uint64_t now_total, uint64_t then_total, bool& wrong) {
    if (now_total < then_total) wrong = true;
    return now_total >= then_total ? now_total - then_total : 0;
  };
  bool wrong = false;
  const uint64_t keys = since(now.count_keys_added, at_drain_.count_keys_added, wrong);
  const uint64_t fragments = since(now.fragments_stored, at_drain_.fragments_stored, wrong);
  const uint64_t samples = since(now.samples_recorded, at_drain_.samples_recorded, wrong);
  const uint64_t keys_per_check = since(now.count_keys_added, at_check_.count_keys_added, wrong);
  const uint64_t fragments_per_check = since(now.fragments_stored, at_check_.fragments_stored, wrong);
  const uint64_t samples_per_check = since(now.samples_recorded, at_check_.samples_recorded, wrong);
  at_check_ = now;
  if (wrong) return DrainReason::kCountersWrong;
  // The fragments a sweep kept are not inflow: they belong to stacks still
  // sampled, and a drain now would keep them again. What the inflow can
  // fill is the room they leave.
  const uint64_t fragment_room = stack_traces_entries_ > fragments_kept_ ? stack_traces_entries_ - fragments_kept_ : 0;
  if (filling(keys, keys_per_check, stack_counts_entries_) ||
      filling(fragments, fragments_per_check, fragment_room) ||
      (sample_time_records_ > 0 && filling(samples, samples_per_check, sample_time_records_))) {
    return DrainReason::kMapsFilling;
  }
  if (exits_waiting >= kExitsWaiting) return DrainReason::kExitsWaiting;
  return DrainReason::kNotDue;
}

}  // namespace omniprof
