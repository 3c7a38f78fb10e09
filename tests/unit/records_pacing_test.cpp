// When the event thread reads the process records: at each record on a
// machine starting a process now and then, on a clock in a storm of them
// (agent/records_pacing.h). No kernel: times and counts are given.
#include "agent/records_pacing.h"

#include <gtest/gtest.h>

namespace omniprof {
namespace {

using std::chrono::milliseconds;
using std::chrono::microseconds;
using Clock = RecordsPacing::Clock;

// Records at `per_second` for `duration`, read every `every` (as the thread
// reads them in a storm, or at each wake-up); returns the time after.
Clock::time_point feed(RecordsPacing& pacing, Clock::time_point t, int per_second, milliseconds duration,
                       microseconds every = microseconds(1000)) {
  const int reads = static_cast<int>(std::chrono::duration_cast<microseconds>(duration) / every);
  double owed = 0;
  for (int i = 0; i < reads; ++i) {
    t += every;
    owed += per_second * std::chrono::duration<double>(every).count();
    const auto records = static_cast<size_t>(owed);
    owed -= static_cast<double>(records);
    pacing.read(t, records);
  }
  return t;
}

TEST(RecordsPacingTest, AProcessNowAndThenIsReadAtEachRecord) {
  RecordsPacing pacing;
  Clock::time_point t{};
  EXPECT_FALSE(pacing.storm());
  // A shell loop starting a 30 ms program: ~33 processes, ~230 records a second.
  t = feed(pacing, t, 230, milliseconds(2000), microseconds(4300));
  EXPECT_FALSE(pacing.storm());
  // A Python importing its extension modules: 45 records at once, then quiet.
  pacing.read(t += milliseconds(1), 45);
  pacing.read(t += milliseconds(150), 1);
  pacing.read(t += milliseconds(150), 1);
  EXPECT_FALSE(pacing.storm());
}

TEST(RecordsPacingTest, AStormIsReadOnTheClockUntilItsRateFallsUnderTheLeavingOne) {
  RecordsPacing pacing;
  Clock::time_point t{};
  // bench/process_churn's scene: ~1100 records a second.
  t = feed(pacing, t, 1100, milliseconds(250));
  EXPECT_TRUE(pacing.storm()) << "a quarter second of a storm did not make reads paced";
  EXPECT_EQ(pacing.next_read_at(), t + RecordsPacing::kStormReadInterval);
  // Between the two thresholds: stays paced, no switching at every window.
  t = feed(pacing, t, 300, milliseconds(500));
  EXPECT_TRUE(pacing.storm());
  t = feed(pacing, t, 100, milliseconds(250));
  EXPECT_FALSE(pacing.storm()) << "a rate under the leaving one kept reads paced";
  // And 300 a second from there does not pace them again.
  t = feed(pacing, t, 300, milliseconds(500), microseconds(3000));
  EXPECT_FALSE(pacing.storm());
}

TEST(RecordsPacingTest, QuietAfterAStormEndsItAtTheNextRead) {
  RecordsPacing pacing;
  Clock::time_point t{};
  t = feed(pacing, t, 1100, milliseconds(250));
  ASSERT_TRUE(pacing.storm());
  // Paced reads every interval find nothing for a window.
  t = feed(pacing, t, 0, milliseconds(150));
  EXPECT_FALSE(pacing.storm());
  // A record long after: read at once.
  pacing.read(t += milliseconds(5000), 3);
  EXPECT_FALSE(pacing.storm());
}

}  // namespace
}  // namespace omniprof
