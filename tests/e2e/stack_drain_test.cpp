// End-to-end, against the kernel: a drain moves stack_counts and the stacks
// they reference out of the host's real BPF maps (drain_into), in batches
// where the kernel has them and key by key where it has not (or they are
// hidden with OMNIPROF_HIDE_BPF_FEATURES=map_batch): the same counts, the
// same frames, and a stack no count referenced for two drains deleted with
// all its fragments. The maps are written from here, as omniprof_stop would.
// Then `omniprof run` as a whole: when it drains (agent/drain_schedule.h).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/round_samples.h"
#include "bpf/bpf_maps.h"
#include "e2e_support.h"

namespace omniprof::e2e {
namespace {

omniprof_frame frame_at(uint64_t address) {
  omniprof_frame f{};
  f.address = address;
  f.kind = OMNIPROF_FRAME_NATIVE;
  return f;
}

// Stores `len` frames (addresses base, base + 1, ...) under `id`, a
// fragment of OMNIPROF_FRAGMENT_FRAMES at a time.
void store_stack(int fd, uint64_t id, uint32_t len, uint64_t base) {
  for (uint32_t index = 0; index * OMNIPROF_FRAGMENT_FRAMES < len; ++index) {
    omniprof_stack_fragment_key key{id, index, 0};
    omniprof_stack_fragment fragment{};
    for (uint32_t i = 0; i < OMNIPROF_FRAGMENT_FRAMES && index * OMNIPROF_FRAGMENT_FRAMES + i < len; ++i) {
      fragment.frames[i] = frame_at(base + index * OMNIPROF_FRAGMENT_FRAMES + i);
    }
    ASSERT_EQ(bpf_map_update_elem(fd, &key, &fragment, BPF_ANY), 0) << strerror(errno);
  }
}

omniprof_stack_key count_key(uint32_t pid, uint64_t user_id, uint16_t user_len, uint64_t kernel_id,
                             uint16_t kernel_len) {
  omniprof_stack_key key{};
  key.pid = pid;
  key.tid = pid;
  key.user_stack_id = user_id;
  key.user_stack_len = user_len;
  key.kernel_stack_id = kernel_id;
  key.kernel_stack_len = kernel_len;
  return key;
}

size_t fragments_in_map(int fd) {
  size_t n = 0;
  omniprof_stack_fragment_key key{}, next{};
  for (int err = bpf_map_get_next_key(fd, nullptr, &next); err == 0; err = bpf_map_get_next_key(fd, &key, &next)) {
    ++n;
    key = next;
  }
  return n;
}

class StackDrainTest : public ::testing::TestWithParam<bool> {
 protected:
  // BpfMaps::load reads the variable; the tests after this one see it as
  // it was.
  void SetUp() override {
    if (const char* was = getenv("OMNIPROF_HIDE_BPF_FEATURES")) saved_ = was;
    if (GetParam()) {
      setenv("OMNIPROF_HIDE_BPF_FEATURES", "map_batch", 1);
    } else {
      unsetenv("OMNIPROF_HIDE_BPF_FEATURES");
    }
  }
  void TearDown() override {
    if (saved_) {
      setenv("OMNIPROF_HIDE_BPF_FEATURES", saved_->c_str(), 1);
    } else {
      unsetenv("OMNIPROF_HIDE_BPF_FEATURES");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST_P(StackDrainTest, CountsAndWholeStacksMoveOutAndUnreferencedStacksGoAfterTwoDrains) {
  OMNIPROF_REQUIRE_BPF();
  const bool key_by_key = GetParam();
  auto opened = BpfMaps::open();
  ASSERT_TRUE(opened) << opened.error().message;
  BpfMaps& maps = **opened;
  // Room for more counts than one batch holds (BpfMaps::kCountsBatch).
  MapSizes sizes;
  sizes.stack_counts = 4096;
  sizes.stack_traces = 8192;
  ASSERT_TRUE(maps.adjust_map_sizes(sizes));
  auto loaded = maps.load();
  ASSERT_TRUE(loaded) << loaded.error().message;
  const int counts_fd = maps.map_fd(OMNIPROF_MAP_STACK_COUNTS);
  const int traces_fd = maps.map_fd(OMNIPROF_MAP_STACK_TRACES);

  // 1500 counts (more than a batch) over 300 user stacks of 1 to 40 frames
  // (up to three fragments), all sharing one kernel stack of 5 frames, and
  // a stack whose store failed half-way (fragment 1 only: no count has it).
  constexpr uint64_t kKernelId = 0xfeed;
  ASSERT_NO_FATAL_FAILURE(store_stack(traces_fd, kKernelId, 5, 0xffffffff81000000ULL));
  std::map<uint64_t, uint32_t> user_stacks;  // id -> len
  for (uint64_t s = 0; s < 300; ++s) {
    const uint64_t id = 0x1000 + s;
    const uint32_t len = 1 + static_cast<uint32_t>(s % 40);
    user_stacks[id] = len;
    ASSERT_NO_FATAL_FAILURE(store_stack(traces_fd, id, len, id << 16));
  }
  omniprof_stack_fragment_key orphan{0xdead, 1, 0};
  omniprof_stack_fragment orphan_frames{};
  ASSERT_EQ(bpf_map_update_elem(traces_fd, &orphan, &orphan_frames, BPF_ANY), 0);
  uint64_t expected_total = 0;
  for (uint32_t c = 0; c < 1500; ++c) {
    const uint64_t id = 0x1000 + c % 300;
    omniprof_stack_key key = count_key(1000 + c, id, static_cast<uint16_t>(user_stacks[id]), kKernelId, 5);
    const uint64_t value = 1 + c % 3;
    expected_total += value;
    ASSERT_EQ(bpf_map_update_elem(counts_fd, &key, &value, BPF_ANY), 0) << strerror(errno);
  }
  // A count whose stack is not in the map (deleted under it): counted as
  // missing, its count kept.
  omniprof_stack_key gone = count_key(7, 0xabc, 3, OMNIPROF_STACK_ID_NONE, 0);
  uint64_t one = 1;
  ASSERT_EQ(bpf_map_update_elem(counts_fd, &gone, &one, BPF_ANY), 0);

  RoundSamples round;
  auto drained = drain_into(maps, round);
  ASSERT_TRUE(drained) << drained.error().message;
  EXPECT_EQ(maps.batch_ops_used(), !key_by_key);
  EXPECT_EQ(round.counts.size(), 1501u);
  EXPECT_EQ(round.total(), expected_total + 1);
  EXPECT_EQ(round.missing_stacks, 1u);
  omniprof_stack_key probe{};
  EXPECT_NE(bpf_map_get_next_key(counts_fd, nullptr, &probe), 0) << "stack_counts not empty after the drain";
  // Every stack whole, frame for frame.
  ASSERT_EQ(round.stacks.size(), 301u);
  for (const auto& [id, len] : user_stacks) {
    auto it = round.stacks.find(id);
    ASSERT_NE(it, round.stacks.end()) << "stack " << id;
    ASSERT_EQ(it->second.frames.size(), len) << "stack " << id;
    for (uint32_t i = 0; i < len; ++i) EXPECT_EQ(it->second.frames[i].address, (id << 16) + i) << "stack " << id;
  }
  ASSERT_EQ(round.stacks.at(kKernelId).frames.size(), 5u);
  EXPECT_EQ(round.stacks.at(kKernelId).frames[4].address, 0xffffffff81000004ULL);

  // Referenced this drain: nothing deleted yet. A second drain where only
  // stack 0x1000 (and the kernel stack) is counted: the others are
  // unreferenced once, and stay; the orphan, unreferenced at both drains,
  // goes. A third: the others unreferenced twice, deleted, every fragment;
  // the referenced ones stay.
  const size_t stored = fragments_in_map(traces_fd);
  EXPECT_GT(stored, 301u);
  for (int drain = 2; drain <= 3; ++drain) {
    omniprof_stack_key key = count_key(1, 0x1000, static_cast<uint16_t>(user_stacks[0x1000]), kKernelId, 5);
    ASSERT_EQ(bpf_map_update_elem(counts_fd, &key, &one, BPF_ANY), 0);
    auto again = drain_into(maps, round);
    ASSERT_TRUE(again) << again.error().message;
    // What the drain schedule counts as the map's fill after a sweep.
    EXPECT_EQ(maps.stack_fragments_kept(), fragments_in_map(traces_fd)) << "drain " << drain;
    if (drain == 2) {
      EXPECT_EQ(fragments_in_map(traces_fd), stored - 1) << "not the orphan alone deleted at the second drain";
      EXPECT_NE(bpf_map_lookup_elem(traces_fd, &orphan, &orphan_frames), 0) << "the orphan fragment stayed";
    }
  }
  EXPECT_EQ(fragments_in_map(traces_fd), 2u) << "stack 0x1000 (1 fragment) and the kernel stack are left";
  omniprof_stack_fragment_key kept{0x1000, 0, 0};
  omniprof_stack_fragment back{};
  EXPECT_EQ(bpf_map_lookup_elem(traces_fd, &kept, &back), 0);
  EXPECT_EQ(round.counts.size(), 1502u);  // the two later counts share one key
  EXPECT_EQ(round.total(), expected_total + 3);
}

// percpu_stats read whole (one batch, or a lookup per counter): each
// counter summed over the CPUs.
TEST_P(StackDrainTest, StatsAreEachCounterSummedOverTheCpus) {
  OMNIPROF_REQUIRE_BPF();
  auto opened = BpfMaps::open();
  ASSERT_TRUE(opened) << opened.error().message;
  BpfMaps& maps = **opened;
  auto loaded = maps.load();
  ASSERT_TRUE(loaded) << loaded.error().message;
  const int cpus = libbpf_num_possible_cpus();
  ASSERT_GT(cpus, 0);
  const int fd = maps.map_fd(OMNIPROF_MAP_PERCPU_STATS);
  for (uint32_t stat : {0u, 3u, static_cast<uint32_t>(OMNIPROF_NUM_STATS - 1)}) {
    std::vector<uint64_t> per_cpu(cpus);
    for (int c = 0; c < cpus; ++c) per_cpu[c] = stat * 1000 + c + 1;
    ASSERT_EQ(bpf_map_update_elem(fd, &stat, per_cpu.data(), BPF_ANY), 0) << strerror(errno);
  }
  auto stats = maps.read_stats();
  ASSERT_TRUE(stats) << stats.error().message;
  ASSERT_EQ(stats->size(), static_cast<size_t>(OMNIPROF_NUM_STATS));
  const uint64_t n = static_cast<uint64_t>(cpus);
  for (uint32_t stat : {0u, 3u, static_cast<uint32_t>(OMNIPROF_NUM_STATS - 1)}) {
    EXPECT_EQ((*stats)[stat], stat * 1000 * n + n * (n + 1) / 2) << "counter " << stat;
    // One counter alone, as the drain schedule reads it every second.
    auto one = maps.read_stat(stat);
    ASSERT_TRUE(one) << one.error().message;
    EXPECT_EQ(*one, (*stats)[stat]) << "counter " << stat;
  }
  EXPECT_EQ((*stats)[1], 0u);
  // A span of them, as the drain schedule reads its three every second:
  // from counter 3 (a batch starting inside the array) to the last.
  auto span = maps.read_stats(3, OMNIPROF_NUM_STATS - 3);
  ASSERT_TRUE(span) << span.error().message;
  EXPECT_EQ(*span, std::vector<uint64_t>(stats->begin() + 3, stats->end()));
  auto past_the_end = maps.read_stats(3, OMNIPROF_NUM_STATS);
  ASSERT_FALSE(past_the_end);
  EXPECT_NE(past_the_end.error().message.find("percpu_stats has"), std::string::npos) << past_the_end.error().message;
}

// The last drain's count of `run` at each round's log line
// ("round N: ... host.drains=D ..."), by round.
std::map<int, uint64_t> drains_by_round(const std::string& log) {
  std::map<int, uint64_t> drains;
  std::regex line(R"(round (\d+): [^\n]*host\.drains=(\d+))");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) {
    drains[std::stoi((*it)[1])] = std::stoull((*it)[2]);
  }
  return drains;
}

// `run`'s looks at BPF's totals before each round's end
// ("host.drain_looks=L", absent while 0), by round.
std::map<int, uint64_t> looks_by_round(const std::string& log) {
  std::map<int, uint64_t> looks;
  std::regex line(R"(round (\d+): [^\n]*)");
  std::regex count(R"(host\.drain_looks=(\d+))");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) {
    const std::string text = (*it)[0];
    std::smatch m;
    looks[std::stoi((*it)[1])] = std::regex_search(text, m, count) ? std::stoull(m[1]) : 0;
  }
  return looks;
}

// The last value of counter `name` in `run`'s log (0: never printed).
uint64_t last_counter(const std::string& log, const std::string& name) {
  std::regex value(std::regex_replace(name, std::regex(R"(\.)"), R"(\.)") + R"(=(\d+))");
  uint64_t last = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), value), end; it != end; ++it) last = std::stoull((*it)[1]);
  return last;
}

// Every sample BPF counted is in a round: the last round (SIGTERM stops
// sampling, then drains) leaves none behind, so the rounds' samples add up
// to the last line's samples_recorded.
void expect_every_sample_in_a_round(const std::string& log) {
  uint64_t in_rounds = 0, recorded = 0;
  std::regex round_line(R"(round \d+: wrote [^\n]* \((\d+) samples[^\n]* samples_recorded=(\d+))");
  for (std::sregex_iterator it(log.begin(), log.end(), round_line), end; it != end; ++it) {
    in_rounds += std::stoull((*it)[1]);
    recorded = std::stoull((*it)[2]);
  }
  EXPECT_GT(recorded, 0u) << log;
  EXPECT_EQ(in_rounds, recorded) << log;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `omniprof run --config CONFIG`, its output in LOG.
std::vector<std::string> omniprof_run(const std::string& config, const std::string& log) {
  return {"/bin/sh", "-c",
          "exec '" + std::string(OMNIPROF_BINARY) + "' run --config '" + config + "' > '" + log + "' 2>&1"};
}

// Waits for round ROUND's line in `run`'s LOG, by the log, never timed:
// start-up in an emulated guest takes a minute or more. False if `agent`
// ended first or five minutes passed.
bool wait_for_round(const std::string& log, BackgroundProcess& agent, int round) {
  for (int i = 0; i < 3000 && !drains_by_round(file_text(log)).count(round) && !agent.poll(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return drains_by_round(file_text(log)).count(round) > 0;
}

// `run` drains when the maps fill or exited processes wait, not every
// second, and does not look every second to find out
// (agent/drain_schedule.h): with one busy program a round of 6 s drains
// about once, at its end; once two shell loops start and end
// processes (hundreds a second here, ~40 in an emulated guest), exits
// waiting to be forgotten make drains due. No sample is
// dropped for a full map, and none is left out of the rounds.
TEST(RunDrainTest, DrainsWhenMapsFillOrExitsWaitNotEverySecond) {
  OMNIPROF_REQUIRE_BPF();
  std::string dir = temp_dir("run-drains");
  std::string config = dir + "/omniprof.yaml";
  // stack_traces at its former fixed size: the steady rounds' one drain is
  // the schedule's doing whatever else the machine runs (its fitted size on
  // two CPUs, 4096, fills with deep interpreter stacks every few seconds).
  std::ofstream(config) << "round_seconds: 6\nsampling:\n  frequency_hz: 49\nmaps:\n  stack_traces: 32768\n"
                        << "output:\n  directory: " << dir << "/profiles\n";
  const std::string log = dir + "/run.log";
  BackgroundProcess chain({workload("chain"), "600"});
  BackgroundProcess agent(omniprof_run(config, log), BackgroundProcess::Role::kJudge);
  // Round 1 holds the start-up; round 3 is a steady one.
  ASSERT_TRUE(wait_for_round(log, agent, 3)) << file_text(log);
  std::vector<std::unique_ptr<BackgroundProcess>> loops;
  for (int i = 0; i < 2; ++i) {
    loops.push_back(std::make_unique<BackgroundProcess>(
        std::vector<std::string>{"/bin/sh", "-c", "while :; do /bin/true; done"}));
  }
  // Round 4 straddles the loops' start; rounds 5 and 6 are theirs.
  ASSERT_TRUE(wait_for_round(log, agent, 6)) << file_text(log);
  loops.clear();
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0);
  const std::string text = file_text(log);
  auto drains = drains_by_round(text);
  std::cout << "drains in rounds 2 to 6:";
  for (int round = 2; round <= 6; ++round) std::cout << " " << drains[round] - drains[round - 1];
  std::cout << "\n";
  EXPECT_LE(drains[3] - drains[2], 2u) << "a steady round of 6 s drained more than twice:\n" << text;
  // Nor does it look at the maps every second to find out (BPF says when
  // they fill: OMNIPROF_EVENT_DRAIN_DUE): steady rounds 2 and 3, 12 s,
  // looked at most 6 times (a look a second was 12).
  auto looks = looks_by_round(text);
  std::cout << "looks at the maps in rounds 2 to 6:";
  for (int round = 2; round <= 6; ++round) std::cout << " " << looks[round] - looks[round - 1];
  std::cout << "\n";
  EXPECT_LE(looks[3] - looks[1], 6u) << "steady rounds 2 and 3 (12 s) looked at the maps more than 6 times:\n"
                                     << text;
  // How often depends on how fast the guest ends processes (in emulated
  // guests 2 to 4 drains a round): exits made drains due, and the loops'
  // rounds drained more than the steady ones.
  EXPECT_GE(last_counter(text, "host.drains_for_exits"), 1u) << text;
  EXPECT_GT(drains[6] - drains[4], drains[3] - drains[1])
      << "the process loops' rounds 5 and 6 drained no more than the steady rounds 2 and 3:\n" << text;
  EXPECT_EQ(text.find("stack_counts_full_dropped="), std::string::npos) << text;
  EXPECT_EQ(text.find("stack_traces_full="), std::string::npos) << text;
  expect_every_sample_in_a_round(text);
}

// BPF says when the maps fill (OMNIPROF_EVENT_DRAIN_DUE past the thresholds the
// agent writes, drain_schedule.h): a process whose every sample is a
// stack_counts key of its own (thread_names renames its thread between bursts)
// fills a quarter of a 4096-key stack_counts in three to five seconds at 199 Hz
// (~200 keys a second here, ~300 in an emulated guest with its other
// processes), and `run` drains then, on BPF's word, within rounds of 8 s; no
// sample is dropped for a full map or left out. Not the smallest map (1024
// keys): the main thread names and writes each round, draining nothing
// meanwhile, and an emulated guest on a host busy with other work took 3 to 10
// s over the first round (cold caches) while ~300 keys a second came: 4096 keys
// hold 13 s of them.
TEST(RunDrainTest, DrainsWhenBpfSaysTheMapsFill) {
  OMNIPROF_REQUIRE_BPF();
  std::string dir = temp_dir("run-drain-notices");
  std::string config = dir + "/omniprof.yaml";
  std::ofstream(config) << "round_seconds: 8\nsampling:\n  frequency_hz: 199\nmaps:\n  stack_counts: 4096\n"
                        << "output:\n  directory: " << dir << "/profiles\n";
  const std::string log = dir + "/run.log";
  BackgroundProcess names({workload("thread_names"), "600"});
  BackgroundProcess agent(omniprof_run(config, log), BackgroundProcess::Role::kJudge);
  // Round 1 holds the start-up; rounds 2 and 3 are steady ones.
  ASSERT_TRUE(wait_for_round(log, agent, 3)) << file_text(log);
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0);
  const std::string text = file_text(log);
  const uint64_t notices = last_counter(text, "host.drain_notices");
  const uint64_t filling = last_counter(text, "host.drains_for_filling_maps");
  std::cout << "keys added " << last_counter(text, "stack_counts_keys_added") << ", drain notices " << notices
            << ", drains for filling maps " << filling << ", drains " << last_counter(text, "host.drains") << "\n";
  EXPECT_GE(notices, 2u) << text;
  EXPECT_GE(filling, 2u) << text;
  EXPECT_EQ(text.find("stack_counts_full_dropped="), std::string::npos) << text;
  expect_every_sample_in_a_round(text);
}

// The same workload profiled at once by `run` as it is now (maps fitted to
// the machine, drains as they fill, process_info unpreallocated where the
// kernel allows) and by `record` set up as every agent was before (a drain
// every second, stack_traces at 32768, process_info preallocated, stacks
// read key by key): a steady round of `run` shows the same stacks of each
// workload, in the same shares (seven_functions_nofp's seven functions take
// about a seventh each), and chain_nofp's chain whole. Each workload has a
// CPU of its own, 99 Hz for 8 s: ~790 samples a profile, so two shares of
// one stack differ by chance by less than five standard errors of their
// difference (9 points at a seventh) while a function missing from one is
// 14 points off.
TEST(RunDrainTest, ARoundShowsTheStacksADrainEverySecondWithTheFormerMapsShowed) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  std::string dir = temp_dir("run-same-stacks");
  const std::string run_config = dir + "/run.yaml";
  const std::string former_config = dir + "/former.yaml";
  std::ofstream(run_config) << "round_seconds: 8\nsampling:\n  frequency_hz: 99\noutput:\n  directory: " << dir
                            << "/profiles\n";
  std::ofstream(former_config) << "maps:\n  stack_traces: 32768\n";
  BackgroundProcess chain({workload("chain_nofp"), "600"});
  BackgroundProcess seven({workload("seven_functions_nofp"), "600"});
  const std::string run_log = dir + "/run.log";
  BackgroundProcess agent(omniprof_run(run_config, run_log), BackgroundProcess::Role::kJudge);
  const std::string former_profile = dir + "/former.pb.gz";
  BackgroundRecord former(OMNIPROF_BINARY, {"--config", former_config, "-F", "99", "-d", "8", "-o", former_profile},
                          dir + "/former.log", {"OMNIPROF_HIDE_BPF_FEATURES=map_batch,unpreallocated_maps"});
  ASSERT_TRUE(former.wait_until_recording()) << former.output();
  ASSERT_TRUE(former.wait_until_sampling_stopped()) << former.output();
  ASSERT_EQ(former.wait(), 0) << former.output();
  // record's clock started once every running program's tables were stored:
  // the second round of `run` written after it ended is a steady one.
  const size_t rounds_before = drains_by_round(file_text(run_log)).size();
  for (int i = 0; i < 3000 && drains_by_round(file_text(run_log)).size() < rounds_before + 2 && !agent.poll(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(drains_by_round(file_text(run_log)).size(), rounds_before + 2) << file_text(run_log);
  std::smatch written;
  std::string log_text = file_text(run_log);
  std::string last_round;
  std::regex wrote(R"(round \d+: wrote (\S+) )");
  for (std::sregex_iterator it(log_text.begin(), log_text.end(), wrote), end; it != end; ++it) last_round = (*it)[1];
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0);
  ASSERT_FALSE(last_round.empty()) << log_text;

  // Each distinct user stack of a workload (its frames from its own
  // innermost function out), by its share of the workload's samples. Kernel
  // frames above it are left out: what the kernel was doing (an interrupt,
  // a reschedule) depends on the moment, and the two agents' rounds are not
  // the same seconds (in an emulated guest, one may meet the other's
  // start-up).
  auto own_function = [](const std::string& name) {
    return name == "main" || name == "leaf" || name.rfind("stage_", 0) == 0 || name.rfind("burn_", 0) == 0;
  };
  auto shares = [&](const std::string& profile, pid_t pid) {
    std::string error;
    auto traces = traces_of_pid(read_traces_with_go(profile, &error), pid);
    std::map<std::string, double> by_stack;
    double total = 0;
    for (const auto& t : traces) {
      auto innermost = std::find_if(t.frames.begin(), t.frames.end(), own_function);
      std::string stack = innermost == t.frames.end() ? "(no function of the workload) < " : "";
      for (auto f = innermost; f != t.frames.end(); ++f) stack += *f + " < ";
      by_stack[stack] += static_cast<double>(t.count);
      total += static_cast<double>(t.count);
    }
    for (auto& [stack, share] : by_stack) share /= total;
    return std::make_pair(by_stack, total);
  };
  for (pid_t pid : {chain.pid(), seven.pid()}) {
    auto [now, now_samples] = shares(last_round, pid);
    auto [before, before_samples] = shares(former_profile, pid);
    ASSERT_GT(now_samples, 100) << last_round << ", pid " << pid;
    ASSERT_GT(before_samples, 100) << former_profile << ", pid " << pid;
    std::set<std::string> stacks;
    for (const auto& [stack, share] : now) if (share >= 0.05) stacks.insert(stack);
    for (const auto& [stack, share] : before) if (share >= 0.05) stacks.insert(stack);
    ASSERT_FALSE(stacks.empty());
    if (pid == seven.pid()) EXPECT_EQ(stacks.size(), 7u);
    for (const std::string& stack : stacks) {
      const double mean = (now[stack] + before[stack]) / 2;
      const double five_errors = 5 * std::sqrt(mean * (1 - mean) * (1 / now_samples + 1 / before_samples));
      std::cout << "share now " << now[stack] << ", the former way " << before[stack] << " (within " << five_errors
                << "): " << stack << "\n";
      EXPECT_NEAR(now[stack], before[stack], five_errors)
          << stack << "\n(" << now_samples << " samples in the round, " << before_samples << " in the former way's)";
    }
  }
  for (const auto& [name, profile] : {std::pair{"run", last_round}, std::pair{"former", former_profile}}) {
    std::string error;
    auto whole = count_chain(traces_of_pid(read_traces_with_go(profile, &error), chain.pid()),
                             {"leaf", "stage_c", "stage_b", "stage_a", "main"});
    EXPECT_GE(whole.whole * 100, whole.leaf * 95) << name << ": " << whole.counterexample;
    EXPECT_GT(whole.leaf, 0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Drains, StackDrainTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "KeyByKey" : "Batches"; });

}  // namespace
}  // namespace omniprof::e2e
