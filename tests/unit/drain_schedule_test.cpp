// When `run` drains BPF's maps (agent/drain_schedule.h), from BPF's running
// totals alone: not while the maps hold little, at once when what one of
// them took in passes a quarter of its room, when exited processes pile up,
// and when the counters go backwards; and the thresholds BPF watches are
// exactly where that happens.
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
    totals.sample_times_recorded += 38;
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

// BPF sends OMNIPROF_EVENT_DRAIN_DUE from thresholds(): one addition short
// of one, no drain is due; at it, one is. Checked for each map, after drains
// that left various room.
TEST(DrainScheduleTest, ThresholdsAreWhereADrainBecomesDue) {
  DrainSchedule schedule(10240, 32768, 152);
  struct Drain {
    MapInflow before;
    uint64_t kept;
  };
  for (const Drain& d : {Drain{{0, 0, 0}, 0}, Drain{{1000, 5000, 300}, 8000}, Drain{{1001, 5001, 301}, 32767},
                         Drain{{7, 9, 11}, 40000}}) {
    schedule.drained(d.before, d.kept);
    const omniprof_drain_thresholds t = schedule.thresholds();
    EXPECT_EQ(t.at[OMNIPROF_INFLOW_COUNT_KEYS], d.before.count_keys_added + 2560);
    const uint64_t room = d.kept < 32768 ? 32768 - d.kept : 0;
    EXPECT_EQ(t.at[OMNIPROF_INFLOW_FRAGMENTS], d.before.fragments_stored + (room + 3) / 4);
    EXPECT_EQ(t.at[OMNIPROF_INFLOW_SAMPLE_TIMES], d.before.sample_times_recorded + 38);
    for (int kind : {OMNIPROF_INFLOW_COUNT_KEYS, OMNIPROF_INFLOW_FRAGMENTS, OMNIPROF_INFLOW_SAMPLE_TIMES}) {
      auto totals_at = [&](uint64_t total) {
        MapInflow now = d.before;
        (kind == OMNIPROF_INFLOW_COUNT_KEYS   ? now.count_keys_added
         : kind == OMNIPROF_INFLOW_FRAGMENTS ? now.fragments_stored
                                              : now.sample_times_recorded) = total;
        return now;
      };
      const uint64_t at = t.at[kind];
      // No room at all in stack_traces: a drain is due whatever else.
      const bool no_fragment_room = t.at[OMNIPROF_INFLOW_FRAGMENTS] == d.before.fragments_stored;
      EXPECT_EQ(schedule.due(totals_at(at), 0), DrainReason::kMapsFilling) << "kind " << kind << " at " << at;
      if (!no_fragment_room && at > (kind == OMNIPROF_INFLOW_COUNT_KEYS   ? d.before.count_keys_added
                : kind == OMNIPROF_INFLOW_FRAGMENTS ? d.before.fragments_stored
                                                     : d.before.sample_times_recorded)) {
        EXPECT_EQ(schedule.due(totals_at(at - 1), 0), DrainReason::kNotDue) << "kind " << kind << " at " << at - 1;
      }
    }
  }
  // Sample times not recorded: never a threshold.
  DrainSchedule without_times(10240, 32768, 0);
  without_times.drained({0, 0, 0}, 0);
  EXPECT_EQ(without_times.thresholds().at[OMNIPROF_INFLOW_SAMPLE_TIMES], ~0ULL);
}

TEST(DrainScheduleTest, FragmentsKeptBySweepLeaveLessRoomInStackTraces) {
  // The sweep kept 8000 fragments of stacks still sampled: the room left is
  // 24768, a quarter of it 6192. Kept fragments alone make no drain due (a
  // drain would keep them again).
  DrainSchedule schedule = default_maps();
  schedule.drained({0, 0, 0}, 8000);
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 0, 0}, 0));
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 2000, 0}, 0));
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 6191, 0}, 0));
  EXPECT_EQ(DrainReason::kMapsFilling, schedule.due({0, 6192, 0}, 0));  // a quarter of the room

  // Kept fragments filling most of the map: what is left fills soon, and a
  // drain (whose sweep frees stacks no longer sampled) is due.
  schedule.drained({0, 6200, 0}, 32000);
  EXPECT_EQ(DrainReason::kNotDue, schedule.due({0, 6300, 0}, 0));
  EXPECT_EQ(DrainReason::kMapsFilling, schedule.due({0, 6392, 0}, 0));  // a quarter of 768
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
  EXPECT_EQ(with_times.due({1, 1, 37}, 0), DrainReason::kNotDue);
  EXPECT_EQ(with_times.due({1, 1, 38}, 0), DrainReason::kMapsFilling);  // a quarter of the ring
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
