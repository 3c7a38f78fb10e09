// When `run` drains BPF's maps (agent/drain_schedule.h), from BPF's running
// totals alone: not while the maps hold little, at once when what one of
// them took in passes a quarter of its room, or is on its way to half within
// two checks, when
// exited processes pile up, and when the counters go backwards.
#include <gtest/gtest.h>

#include "agent/drain_schedule.h"

namespace omniprof {
namespace {

// stack_counts 10240 keys, stack_traces 32768 fragments, no sample times.
DrainSchedule default_maps() { return DrainSchedule(10240, 32768, 0); }

TEST(DrainScheduleTest, SlowInflowIsNotDrainedForManyChecks) {
  // 19 Hz on two CPUs, a few stacks: each check adds a few keys and fragments.
  DrainSchedule schedule = default_maps();
  schedule.drained({0, 0, 0}, 40);
  MapInflow totals;
  for (int check = 1; check <= 600; ++check) {
    totals.count_keys_added += 3;
    totals.fragments_stored += 5;
    totals.samples_recorded += 38;
    ASSERT_EQ(schedule.due(totals, 0), DrainReason::kNotDue) << "check " << check;
  }
}

TEST(DrainScheduleTest, DueOnceStackCountsHoldsAQuarter) {
  DrainSchedule schedule = default_maps();
  schedule.drained({1000, 0, 1000}, 0);
  MapInflow totals{1000, 0, 1000};
  // 100 keys a check: a quarter (2560) is passed on the 26th check.
  for (int check = 1; check <= 25; ++check) {
    totals.count_keys_added += 100;
    ASSERT_EQ(schedule.due(totals, 0), DrainReason::kNotDue) << "check " << check;
  }
  totals.count_keys_added += 100;
  EXPECT_EQ(schedule.due(totals, 0), DrainReason::kMapsFilling);
  // Drained: the count starts again from there.
  schedule.drained(totals, 0);
  totals.count_keys_added += 100;
  EXPECT_EQ(DrainReason::kNotDue, schedule.due(totals, 0));
}

TEST(DrainScheduleTest, DueBeforeAFastInflowCouldFillHalfAMap) {
  // 1500 keys in one check: not a quarter yet, but two more such checks
  // would pass half of 10240.
  DrainSchedule schedule = default_maps();
  schedule.drained({0, 0, 0}, 0);
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({1000, 0, 0}, 0));  // 1000 + 2 * 1000 < 5120
  EXPECT_EQ(DrainReason::kMapsFilling, schedule.due({2400, 0, 0}, 0));   // 2400 + 2 * 1400 >= 5120
}

TEST(DrainScheduleTest, FragmentsKeptBySweepLeaveLessRoomInStackTraces) {
  // The sweep kept 8000 fragments of stacks still sampled: the room left is
  // 24768, a quarter of it 6192. Kept fragments alone make no drain due (a
  // drain would keep them again).
  DrainSchedule schedule = default_maps();
  schedule.drained({0, 0, 0}, 8000);
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 0, 0}, 0));
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 2000, 0}, 0));  // 2000 + 2 * 2000 < 12384
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 4000, 0}, 0));  // 4000 + 2 * 2000 < 12384
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 5000, 0}, 0));  // 5000 + 2 * 1000 < 12384, < 6192
  EXPECT_EQ(DrainReason::kMapsFilling, schedule.due({0, 6200, 0}, 0));  // a quarter of the room

  // Kept fragments filling most of the map: what is left fills in a few
  // checks, and a drain (whose sweep frees stacks no longer sampled) is due.
  schedule.drained({0, 6200, 0}, 32000);
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 6300, 0}, 0));  // 100 + 2 * 100 < 384
  EXPECT_EQ(DrainReason::kMapsFilling, schedule.due({0, 6400, 0}, 0));  // a quarter of 768
  // No room left at all: due at every check.
  schedule.drained({0, 6400, 0}, 40000);
  EXPECT_EQ(DrainReason::kMapsFilling, schedule.due({0, 6400, 0}, 0));
}

TEST(DrainScheduleTest, SampleTimesCountOnlyWhenRecorded) {
  DrainSchedule without_times(10240, 32768, 0);
  DrainSchedule with_times(10240, 32768, 152);  // four seconds at 19 Hz on two CPUs
  without_times.drained({0, 0, 0}, 0);
  with_times.drained({0, 0, 0}, 0);
  EXPECT_EQ(without_times.due({1, 1, 38}, 0), DrainReason::kNotDue);
  EXPECT_EQ(with_times.due({1, 1, 38}, 0), DrainReason::kMapsFilling);  // a quarter of the ring in a second
}

TEST(DrainScheduleTest, ExitedProcessesWaitingMakeADrainDue) {
  DrainSchedule schedule = default_maps();
  schedule.drained({0, 0, 0}, 0);
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 0, 0}, DrainSchedule::kExitsWaiting - 1));
  EXPECT_EQ(schedule.due({0, 0, 0}, DrainSchedule::kExitsWaiting), DrainReason::kExitsWaiting);
}

TEST(DrainScheduleTest, CountersGoingBackwardsDrain) {
  DrainSchedule schedule = default_maps();
  schedule.drained({500, 500, 500}, 0);
  EXPECT_EQ(schedule.due({400, 500, 500}, 0), DrainReason::kCountersWrong);
}

}  // namespace
}  // namespace omniprof
