// Per-sample times: how a round's times are matched to its counts
// (RoundSamples::settle_times), kept through merging (ProfileBuilder), and
// said in OTLP (otlp_request).
#include <gtest/gtest.h>

#include "agent/round_samples.h"
#include "export/otlp_profile.h"
#include "otlp_compare.h"
#include "profile/profile_builder.h"

namespace omniprof {
namespace {

omniprof_stack_key key_of(uint32_t tid) {
  omniprof_stack_key key{};
  key.pid = 100;
  key.tid = tid;
  key.user_stack_id = 1000 + tid;
  return key;
}

constexpr int64_t kUnixMinusMono = 1'700'000'000'000'000'000;

TEST(SampleTimes, EachCountGetsItsTimesInUnixNanoseconds) {
  RoundSamples round;
  SampleTimeStats stats;
  round.counts[key_of(1)] = 3;
  round.times[key_of(1)] = {300, 100, 200};
  round.settle_times(1000, kUnixMinusMono, stats);
  ASSERT_EQ(round.times.count(key_of(1)), 1u);
  EXPECT_EQ(round.times[key_of(1)],
            (std::vector<uint64_t>{kUnixMinusMono + 100, kUnixMinusMono + 200, kUnixMinusMono + 300}));
  EXPECT_EQ(stats.untimed, 0u);
  EXPECT_EQ(stats.unmatched, 0u);
}

// A time read before its count (the count comes with the next drain): it is
// the next round's, and this round's sample keeps the earliest times.
TEST(SampleTimes, ATimeAheadOfItsCountGoesToTheNextRound) {
  RoundSamples round;
  SampleTimeStats stats;
  round.counts[key_of(1)] = 2;
  round.times[key_of(1)] = {100, 200, 1001};
  round.settle_times(1000, 0, stats);
  EXPECT_EQ(round.times[key_of(1)], (std::vector<uint64_t>{100, 200}));
  round.clear();
  // The next round: its count arrives, with one more sample of its own.
  round.counts[key_of(1)] = 2;
  round.times[key_of(1)].push_back(1500);
  round.settle_times(2000, 0, stats);
  EXPECT_EQ(round.times[key_of(1)], (std::vector<uint64_t>{1001, 1500}));
  EXPECT_EQ(stats.untimed, 0u);
  EXPECT_EQ(stats.unmatched, 0u);
}

// A count whose time comes with the next read: the sample goes without
// times (its count alone), and the late time is not given to the next round.
TEST(SampleTimes, ACountAheadOfItsTimeGoesUntimedAndItsLateTimeIsDropped) {
  RoundSamples round;
  SampleTimeStats stats;
  round.counts[key_of(1)] = 3;
  round.times[key_of(1)] = {100, 200};
  round.counts[key_of(2)] = 1;  // no time at all (lost: the ring was full)
  round.settle_times(1000, 0, stats);
  EXPECT_EQ(round.times.count(key_of(1)), 0u);
  EXPECT_EQ(round.times.count(key_of(2)), 0u);
  EXPECT_EQ(stats.untimed, 4u);
  round.clear();
  round.counts[key_of(1)] = 1;
  round.times[key_of(1)] = {990, 1200};  // 990: the last round's late time
  round.counts[key_of(2)] = 1;
  round.times[key_of(2)] = {1300};
  round.settle_times(2000, 0, stats);
  EXPECT_EQ(round.times[key_of(1)], (std::vector<uint64_t>{1200}));
  EXPECT_EQ(round.times[key_of(2)], (std::vector<uint64_t>{1300}));
  EXPECT_EQ(stats.unmatched, 1u);
  EXPECT_EQ(stats.untimed, 4u);
}

// A time carried over that still finds no count is dropped, not carried
// for ever.
TEST(SampleTimes, ATimeThatNeverMatchesACountIsDroppedAfterOneRound) {
  RoundSamples round;
  SampleTimeStats stats;
  round.times[key_of(1)] = {500};
  round.settle_times(1000, 0, stats);
  EXPECT_TRUE(round.times.empty());
  round.clear();
  round.settle_times(2000, 0, stats);
  EXPECT_TRUE(round.times.empty());
  EXPECT_EQ(stats.unmatched, 1u);
  round.clear();
  EXPECT_TRUE(round.times.empty());
}

TEST(SampleTimes, AMergedSampleKeepsTimesOnlyIfEveryPartHadThem) {
  ProfileBuilder builder(10000000, 1700000000000000000);
  uint64_t m = builder.add_mapping({0x400000, 0x500000, 0, "/usr/bin/app", "", true});
  uint64_t l = builder.add_location(m, 0x401000, {{"work", "", "app.c", 3}});
  uint64_t other = builder.add_location(m, 0x402000, {{"rest", "", "app.c", 9}});
  const std::vector<uint64_t> first{30, 10}, second{20};
  builder.add_sample({l}, 2, SampleLabels{1, 1, "app", "app", "", "", nullptr}, &first);
  builder.add_sample({l}, 1, SampleLabels{1, 1, "app", "app", "", "", nullptr}, &second);
  builder.add_sample({other}, 1, SampleLabels{1, 1, "app", "app", "", "", nullptr}, &second);
  builder.add_sample({other}, 1, SampleLabels{1, 1, "app", "app", "", "", nullptr});
  const std::vector<uint64_t> wrong_size{1, 2};
  builder.add_sample({l}, 1, SampleLabels{1, 2, "app", "app", "", "", nullptr}, &wrong_size);
  auto times = builder.sample_times();
  const auto profile = builder.build();
  ASSERT_EQ(times.size(), static_cast<size_t>(profile.sample_size()));
  std::map<std::pair<uint64_t, int64_t>, std::vector<uint64_t>> by_sample;
  for (int i = 0; i < profile.sample_size(); ++i) {
    int64_t tid = 0;
    for (const auto& label : profile.sample(i).label()) {
      if (profile.string_table(label.key()) == "tid") tid = label.num();
    }
    by_sample[{profile.sample(i).location_id(0), tid}] = times[static_cast<size_t>(i)];
  }
  EXPECT_EQ(by_sample[std::make_pair(l, int64_t{1})], (std::vector<uint64_t>{10, 20, 30}));
  EXPECT_TRUE(by_sample[std::make_pair(other, int64_t{1})].empty());
  EXPECT_TRUE(by_sample[std::make_pair(l, int64_t{2})].empty());

  ProfileBuilder untimed(10000000, 1700000000000000000);
  EXPECT_TRUE(untimed.sample_times().empty());
}

TEST(SampleTimes, OtlpSaysEachTimedSampleAsOneValuePerTimestamp) {
  ProfileBuilder builder(10000000, 1700000000000000000);
  uint64_t m = builder.add_mapping({0x400000, 0x500000, 0, "/usr/bin/app", "", true});
  uint64_t timed = builder.add_location(m, 0x401000, {{"work", "", "app.c", 3}});
  uint64_t untimed = builder.add_location(m, 0x402000, {{"rest", "", "app.c", 9}});
  const std::vector<uint64_t> times{1700000000100000000, 1700000000200000000, 1700000000300000000};
  builder.add_sample({timed}, 3, SampleLabels{1, 1, "app", "app", "", "", nullptr}, &times);
  builder.add_sample({untimed}, 4, SampleLabels{1, 1, "app", "app", "", "", nullptr});
  auto request = otlp_request(builder.build(), builder.resource_keys(), OtlpScope{"omniprof", "test"},
                              builder.sample_times());
  EXPECT_EQ(otlp_compare::from_otlp(request), otlp_compare::from_pprof(builder.build()));
  ASSERT_EQ(request.resource_profiles_size(), 1);
  const auto& profile = request.resource_profiles(0).scope_profiles(0).profiles(0);
  ASSERT_EQ(profile.samples_size(), 2);
  int seen = 0;
  for (const auto& sample : profile.samples()) {
    const auto& d = request.dictionary();
    const auto& location = d.location_table(d.stack_table(sample.stack_index()).location_indices(0));
    const std::string& name = d.string_table(d.function_table(location.lines(0).function_index()).name_strindex());
    if (name == "work") {
      EXPECT_EQ(std::vector<uint64_t>(sample.timestamps_unix_nano().begin(), sample.timestamps_unix_nano().end()),
                times);
      EXPECT_EQ(std::vector<int64_t>(sample.values().begin(), sample.values().end()),
                (std::vector<int64_t>{1, 1, 1}));
      ++seen;
    } else {
      EXPECT_EQ(sample.timestamps_unix_nano_size(), 0);
      EXPECT_EQ(std::vector<int64_t>(sample.values().begin(), sample.values().end()), (std::vector<int64_t>{4}));
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace omniprof
