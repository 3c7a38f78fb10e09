// End-to-end: the Ruby plugin (rbperf) on CRuby, checked through
// `go tool pprof -traces -lines`.
//
// One recording per interpreter serves all of its tests: the workloads
// (tests/workloads/ruby_*.rb) run side by side under one `omniprof record`,
// and each test judges its own process's samples. tests/CMakeLists.txt runs
// the tests of one interpreter as one ctest entry (one process).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "e2e_support.h"
#include "interpreter_support.h"
#include "omniprof/support/elf_file.h"
#include "profile_samples.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

std::vector<Interpreter> interpreters() { return parse_interpreters(OMNIPROF_RUBY_INTERPRETERS); }

// A Ruby frame: one with a .rb file (or "eval", CRuby's path of code run by
// rb_eval_string), a C function called from Ruby (named as Ruby names it:
// "Integer#times", "Kernel.sleep"), or one the reader could not name.
bool is_ruby_frame(const FrameLocation& frame) {
  static const std::regex ruby_method(R"(^[A-Z][A-Za-z0-9_:]*[#.][^ ]+$)");
  return frame.function == "[unknown ruby]" || frame.file == "eval" ||
         (frame.file.size() > 3 && frame.file.compare(frame.file.size() - 3, 3, ".rb") == 0) ||
         (frame.file.empty() && std::regex_match(frame.function, ruby_method));
}

std::vector<FrameLocation> ruby_frames(const Sample& sample) {
  std::vector<FrameLocation> out;
  for (const auto& f : sample.frames) {
    if (is_ruby_frame(f)) out.push_back(f);
  }
  return out;
}

bool on_main_thread(const Sample& s) { return s.label("tid") == s.label("pid"); }

// The `n` stacks of `samples` counted most, most first: what a failure
// shows when too few samples were judged.
std::string most_counted_stacks(const std::vector<Sample>& samples, size_t n) {
  std::vector<const Sample*> sorted;
  for (const Sample& s : samples) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(), [](const Sample* a, const Sample* b) { return a->count > b->count; });
  std::string out = std::to_string(samples.size()) + " stacks of the process";
  for (size_t i = 0; i < std::min(n, sorted.size()); ++i) {
    out += "\n  " + std::to_string(sorted[i]->count) + " x " + sorted[i]->text();
  }
  return out;
}

// At least `at_least` samples judged, `percent` of them whole; `what` says
// what whole means, `output` is the recording's log and `of_process` the
// samples judged from, shown on a failure.
void expect_mostly_whole(const Judged& judged, int64_t at_least, int64_t percent, const std::string& what,
                         const std::string& output, const std::vector<Sample>& of_process) {
  ASSERT_GE(judged.total, at_least) << "too few samples to judge (" << what << ")\n"
                                    << most_counted_stacks(of_process, 5) << "\n"
                                    << output;
  EXPECT_GE(judged.whole * 100, judged.total * percent)
      << judged.whole << " of " << judged.total << " samples: " << what << "; one that is not: " << judged.counterexample;
}

// ruby_recursion.rb DEPTH: Recursion#bottom above DEPTH + 1 Recursion#down
// above <main>, and the native stack down to _start below them.
Judged judge_recursion(const std::vector<Sample>& samples, int depth) {
  std::vector<std::string> expected = {"Recursion#bottom"};
  for (int i = 0; i <= depth; ++i) expected.push_back("Recursion#down");
  expected.push_back("<main>");
  return judge(
      samples,
      [](const Sample& s) {
        auto rb = ruby_frames(s);
        return !rb.empty() && rb[0].function == "Recursion#bottom";
      },
      [&](const Sample& s) { return function_names(ruby_frames(s)) == expected && s.frames.back().function == "_start"; });
}

struct HotMethod {
  std::string name;
  int first_line = 0;  // the def
  int last_line = 0;   // its end
  int64_t cpu_microseconds = 0;  // the thread's own CPU clock over its calls while sampled
};

struct Recording {
  std::string failure;  // why the recording could not be judged; empty when it can
  std::string record_output;
  std::vector<Sample> samples;  // every native frame kept
  std::string folded_profile;   // as `record` writes it by default
  pid_t shares = 0, mixed = 0, recursion = 0, threads = 0, required = 0, native = 0, folding = 0;
  std::vector<HotMethod> hot;                      // ruby_shares.rb's own figures
  std::map<std::string, std::string> thread_tids;  // thread_one_work -> its tid

  std::vector<Sample> of_pid(pid_t pid) const { return samples_of_pid(samples, pid); }
};

constexpr int kRecursionDepth = 100;
// Long enough for emulated guests, where omniprof takes seconds to start
// (and the interpreters starting on two emulated CPUs took over 60 s on
// 2026-12-05); killed at the test's end, and the workloads that write
// results are stopped with SIGTERM sooner.
constexpr const char* kWorkloadSeconds = "600";
// How long the workloads' files (tids, handlers in place) may take to appear.
constexpr std::chrono::seconds kWorkloadsReadyLimit{240};
constexpr const char* kRecordSeconds = "8";

// ruby_recursion.rb DEPTH run by RUNNER (the interpreter and what starts it)
// for kWorkloadSeconds, writing READY once its first recursion returned: a
// test waits for it, as the interpreter takes seconds to boot on an emulated
// guest (a recording of its boot judged no sample in 5.10's on 2026-12-07).
std::vector<std::string> recursion_command(std::vector<std::string> runner, int depth, const std::string& ready) {
  runner.insert(runner.end(), {script("ruby_recursion.rb"), std::to_string(depth), kWorkloadSeconds, "200000", ready});
  return runner;
}

Recording make_recording(const Interpreter& ruby) {
  Recording r;
  const std::string dir = temp_dir("ruby-" + ruby.name);
  const std::string shares_out = dir + "/shares.txt", threads_out = dir + "/threads.txt";
  const std::string shares_ready = dir + "/shares-ready.txt";

  // The shares are judged to 5 points, which takes many samples of its
  // thread: it runs at a higher priority than the other workloads (eight
  // busy threads on two cores in CI).
  BackgroundProcess shares({"nice", "-n", "-10", ruby.path, script("ruby_shares.rb"), kWorkloadSeconds, shares_out,
                            shares_ready});
  BackgroundProcess mixed({ruby.path, script("ruby_mixed.rb"), kWorkloadSeconds});
  const std::string recursion_ready = dir + "/recursion-ready.txt";
  BackgroundProcess recursion(recursion_command({ruby.path}, kRecursionDepth, recursion_ready));
  BackgroundProcess threads({ruby.path, script("ruby_threads.rb"), kWorkloadSeconds, threads_out});
  BackgroundProcess required({ruby.path, script("ruby_required.rb"), kWorkloadSeconds});
  BackgroundProcess native({workload("chain"), kWorkloadSeconds});
  BackgroundProcess folding({ruby.path, script("ruby_folding.rb"), kWorkloadSeconds});
  r.shares = shares.pid(), r.mixed = mixed.pid(), r.recursion = recursion.pid();
  r.threads = threads.pid(), r.required = required.pid(), r.native = native.pid();
  r.folding = folding.pid();
  if (!wait_for_file(recursion_ready, kWorkloadsReadyLimit)) {
    r.failure = "ruby_recursion.rb wrote no " + recursion_ready + " (its first recursion did not return)";
    return r;
  }
  if (!wait_for_file(threads_out, kWorkloadsReadyLimit)) {
    r.failure = "ruby_threads.rb wrote no " + threads_out;
    return r;
  }
  // Its signal handlers are in place before the signals come (the default
  // action of SIGUSR1 ends the process).
  if (!wait_for_file(shares_ready, kWorkloadsReadyLimit)) {
    r.failure = "ruby_shares.rb wrote no " + shares_ready + " (its signal handlers are not in place)";
    return r;
  }
  // ruby_shares.rb's own CPU clock counts while the profile does.
  RecordingHooks hooks{[&] { shares.signal(SIGUSR1); }, [&] { shares.signal(SIGUSR2); }};
  RecordedProfile recorded = record_pids({r.shares, r.mixed, r.recursion, r.threads, r.required, r.native, r.folding},
                                         kRecordSeconds, {}, hooks);
  r.folded_profile = recorded.folded_profile;
  const int record_status = recorded.status;
  r.record_output = recorded.output;
  shares.signal(SIGTERM);
  if (record_status != 0) {
    r.failure = "omniprof record exited " + std::to_string(record_status) + ": " + r.record_output;
    return r;
  }
  if (shares.wait() != 0 || !fs::exists(shares_out)) {
    r.failure = "ruby_shares.rb wrote no " + shares_out;
    return r;
  }
  std::istringstream hot(slurp(shares_out));
  HotMethod h;
  while (hot >> h.name >> h.first_line >> h.last_line >> h.cpu_microseconds) r.hot.push_back(h);
  std::istringstream tids(slurp(threads_out));
  std::string name, tid;
  while (tids >> name >> tid) r.thread_tids[name] = tid;
  r.samples = std::move(recorded.samples);
  if (r.samples.empty()) r.failure = recorded.error;
  return r;
}

const Recording& recording_of(const Interpreter& ruby) {
  static std::map<std::string, std::unique_ptr<Recording>> recordings;
  auto& slot = recordings[ruby.name];
  if (!slot) slot = std::make_unique<Recording>(make_recording(ruby));
  return *slot;
}

// Declares `const Recording& r`: the recording of this test's interpreter.
// Fails in CI and skips elsewhere when BPF, go or the interpreter is missing.
#define OMNIPROF_RUBY_RECORDING(r)                                                \
  OMNIPROF_REQUIRE_BPF();                                                         \
  OMNIPROF_REQUIRE_GO();                                                          \
  if (access(GetParam().path.c_str(), X_OK) != 0) {                               \
    if (::omniprof::e2e::in_ci()) FAIL() << GetParam().path << " missing in CI";  \
    GTEST_SKIP() << GetParam().path << " not installed";                          \
  }                                                                               \
  const Recording& r = recording_of(GetParam());                                  \
  ASSERT_TRUE(r.failure.empty()) << r.failure

class RubyProfileTest : public ::testing::TestWithParam<Interpreter> {};

// What a user sees first: `go tool pprof -top` of the profile omniprof writes
// by default, focused on the process. Worker#burn's loop runs in the VM (the
// interpreter's own C code); folded, all of it is Worker#burn's self time.
TEST_P(RubyProfileTest, HotMethodIsItsSelfTimeInPprofTop) {
  OMNIPROF_RUBY_RECORDING(r);
  std::string output;
  const double share = flat_share_in_top(r.folded_profile, r.folding, "Worker#burn", &output);
  EXPECT_GE(share, 80.0) << "Worker#burn has " << share
                         << "% of ruby_folding.rb's flat time in go tool pprof -top:\n" << output;
}

// pprof readers printed `<main>` as `<unknown>` and `block (2 levels) in
// <class:Worker>` as `block  in `: each is printed verbatim by
// `go tool pprof -traces`, run as a user runs it.
TEST_P(RubyProfileTest, RubyNamesAppearVerbatimInPprofTraces) {
  OMNIPROF_RUBY_RECORDING(r);
  std::string error;
  auto traces = traces_of_pid(read_traces_as_user(r.folded_profile, &error), r.folding);
  ASSERT_FALSE(traces.empty()) << error;
  std::set<std::string> seen;
  for (const auto& t : traces) seen.insert(t.frames.begin(), t.frames.end());
  for (const char* name : {"Worker#burn", "block (2 levels) in <class:Worker>", "block in <class:Worker>",
                           "<class:Worker>", "block in <main>", "<main>", "Kernel#loop", "Array#each"}) {
    EXPECT_EQ(seen.count(name), 1u) << "'" << name << "' is not in go tool pprof -traces";
  }
  EXPECT_EQ(seen.count(""), 0u) << "a blank frame name";
  EXPECT_EQ(seen.count("<unknown>"), 0u);
}

TEST_P(RubyProfileTest, HotMethodsHaveTheirFileLineCallersAndTheWorkloadsOwnShares) {
  OMNIPROF_RUBY_RECORDING(r);
  ASSERT_EQ(r.hot.size(), 3u) << "ruby_shares.rb's figures";
  const std::string file = script("ruby_shares.rb");
  std::map<std::string, int64_t> measured;
  int64_t hot = 0, whole = 0;
  std::string counterexample;
  for (const Sample& s : r.of_pid(r.shares)) {
    if (!on_main_thread(s)) continue;
    auto rb = ruby_frames(s);
    if (rb.empty()) continue;
    auto h = std::find_if(r.hot.begin(), r.hot.end(),
                          [&](const HotMethod& m) { return "Shares#" + m.name == rb[0].function; });
    if (h == r.hot.end()) continue;
    measured[h->name] += s.count;
    hot += s.count;
    const std::vector<FrameLocation>& own = rb;
    const std::string caller = "Shares#caller_" + h->name.substr(4);
    bool ok = function_names(own) == std::vector<std::string>{"Shares#" + h->name, caller, "Shares#run", "<main>"} &&
              own[0].file == file && own[1].file == file && own[0].line > h->first_line &&
              own[0].line < h->last_line;
    if (ok) {
      whole += s.count;
    } else if (counterexample.empty()) {
      counterexample = s.text();
    }
  }
  ASSERT_GE(hot, 50) << "too few samples of the hot methods to judge\n" << r.record_output;
  EXPECT_GE(whole * 100, hot * 95) << whole << " of " << hot << " samples have the hot method at a line of its body in "
                                   << file << " under its caller, Shares#run, <main>; one that does not: "
                                   << counterexample;
  // The thread's own CPU clock, over the same window: what a CPU profiler
  // must show (ruby_shares.rb).
  int64_t cpu = 0;
  for (const HotMethod& h : r.hot) cpu += h.cpu_microseconds;
  ASSERT_GE(cpu, 500'000) << "ruby_shares.rb's hot methods ran under half a second of CPU while sampled";
  for (const HotMethod& h : r.hot) {
    double ours = 100.0 * measured[h.name] / hot, theirs = 100.0 * h.cpu_microseconds / cpu;
    std::cerr << h.name << ": omniprof " << ours << "%, the thread's CPU clock " << theirs << "%\n";
    EXPECT_NEAR(ours, theirs, share_tolerance_points(theirs, hot))
        << h.name << ": omniprof " << measured[h.name] << " of " << hot
        << " samples; the thread's CPU clock " << h.cpu_microseconds << " of " << cpu << " us";
  }
}

// Mixed#work_in_times runs in a block that Integer#times (C) yields to:
// the C function's Ruby frame sits between the block and its caller, with
// native frames (the interpreter's, int_dotimes's) between the block and it.
void expect_block_above_c_function(const Recording& r, const std::string& work, const std::string& c_function,
                                   const std::string& caller) {
  auto from_work = [&](const Sample& s) {
    auto rb = ruby_frames(s);
    auto at = std::find_if(rb.begin(), rb.end(), [&](const FrameLocation& f) { return f.function == "Mixed#" + work; });
    return function_names({at, rb.end()});
  };
  Judged judged = judge(
      r.of_pid(r.mixed), [&](const Sample& s) { return !from_work(s).empty(); },
      [&](const Sample& s) {
        bool ruby_order = from_work(s) == std::vector<std::string>{"Mixed#" + work, "block in Mixed#" + caller,
                                                                   c_function, "Mixed#" + caller, "<main>"};
        // Native frames between the block and the C function: where the C
        // function called back into the VM.
        size_t block = s.index_of("block in Mixed#" + caller), c = s.index_of(c_function, block);
        bool native_between = c < s.frames.size() && c > block + 1;
        for (size_t i = block + 1; native_between && i < c; ++i) native_between = !is_ruby_frame(s.frames[i]);
        return ruby_order && native_between;
      });
  expect_mostly_whole(judged, 30, 90,
                      "Mixed#" + work + " above block in Mixed#" + caller + ", native frames, " + c_function + ", Mixed#" +
                          caller + ", <main>",
                      r.record_output, r.of_pid(r.mixed));
}

TEST_P(RubyProfileTest, BlockOfIntegerTimesRunsAboveTheCFrameOfTimesAboveItsCaller) {
  OMNIPROF_RUBY_RECORDING(r);
  expect_block_above_c_function(r, "work_in_times", "Integer#times", "run_times");
}

TEST_P(RubyProfileTest, BlockOfArrayEachRunsAboveTheCFrameOfEachAboveItsCaller) {
  OMNIPROF_RUBY_RECORDING(r);
  expect_block_above_c_function(r, "work_in_each", "Array#each", "run_each");
}

TEST_P(RubyProfileTest, HundredDeepRecursionHasEveryFrameInOrder) {
  OMNIPROF_RUBY_RECORDING(r);
  expect_mostly_whole(judge_recursion(r.of_pid(r.recursion), kRecursionDepth), 50, 95,
                      "Recursion#bottom, " + std::to_string(kRecursionDepth + 1) + " Recursion#down, <main>, _start",
                      r.record_output, r.of_pid(r.recursion));
}

TEST_P(RubyProfileTest, EachThreadHasItsOwnTidAndStack) {
  OMNIPROF_RUBY_RECORDING(r);
  const std::vector<std::string> works = {"thread_one_work", "thread_two_work", "thread_three_work"};
  for (const auto& w : works) ASSERT_EQ(r.thread_tids.count(w), 1u) << "ruby_threads.rb wrote no tid of " << w;
  std::map<std::string, int64_t> total, whole;
  std::map<std::string, std::string> counterexample;
  for (const Sample& s : r.of_pid(r.threads)) {
    auto rb = function_names(ruby_frames(s));
    std::vector<std::string> present;
    for (const auto& w : works) {
      if (std::find(rb.begin(), rb.end(), "Threads#" + w) != rb.end()) present.push_back(w);
    }
    // A sample is the thread's whose tid it carries, whatever its frames say
    // (frames that miss the thread's work method are one of its failures,
    // not dropped), or else the thread's whose work method it holds.
    std::string w;
    for (const auto& candidate : works) {
      if (s.label("tid") == r.thread_tids.at(candidate)) w = candidate;
    }
    if (w.empty() && !present.empty()) w = present.front();
    if (w.empty()) continue;
    total[w] += s.count;
    // thread_one_work holds the loop (loop_until, its block above) and is
    // called by thread_one, in a thread's block: no other thread's method.
    const size_t at = static_cast<size_t>(std::find(rb.begin(), rb.end(), "Threads#" + w) - rb.begin());
    const std::string thread = w.substr(0, w.size() - 5);
    // Above loop_until: nothing (it compares the clock), the clock it reads
    // between yields, or its block and what the block calls.
    auto above_loop = [&] {
      return at == 1 || rb[at - 2] == "Process.clock_gettime" || rb[at - 2] == "block in Threads#" + w;
    };
    bool ok = present == std::vector<std::string>{w} && s.label("tid") == r.thread_tids.at(w) && at >= 1 &&
              at + 1 < rb.size() && rb[at + 1] == "Threads#" + thread && rb[at - 1] == "Threads#loop_until" &&
              above_loop();
    if (ok) {
      whole[w] += s.count;
    } else if (counterexample[w].empty()) {
      counterexample[w] = s.text();
    }
  }
  for (const auto& w : works) {
    // thread_three sleeps or waits for the GVL most of its time: fewer samples.
    const int64_t enough = w == "thread_three_work" ? 20 : 50;
    ASSERT_GE(total[w], enough) << "too few samples of " << w << " to judge\n" << r.record_output;
    EXPECT_GE(whole[w] * 100, total[w] * 95) << whole[w] << " of " << total[w] << " samples of " << w
                                             << " carry tid " << r.thread_tids.at(w)
                                             << " and that thread's stack alone; one that does not: "
                                             << counterexample[w];
  }
}

TEST_P(RubyProfileTest, TopLevelOfARequiredFileIsTopRequiredUnderRequireRelative) {
  OMNIPROF_RUBY_RECORDING(r);
  const std::string top = script("ruby_required_top.rb"), main = script("ruby_required.rb");
  // The top level's loop is lines 4 to 11 of ruby_required_top.rb;
  // Kernel#require_relative is a C function (no file); <main> runs it from
  // line 7 of ruby_required.rb.
  Judged judged = judge(
      r.of_pid(r.required), [](const Sample& s) { return !ruby_frames(s).empty(); },
      [&](const Sample& s) {
        auto rb = ruby_frames(s);
        return function_names(rb) == std::vector<std::string>{"<top (required)>", "Kernel#require_relative", "<main>"} &&
               rb[0].file == top && rb[0].line >= 4 && rb[0].line <= 11 && rb[2].file == main && rb[2].line == 7;
      });
  expect_mostly_whole(judged, 50, 95,
                      "<top (required)> at " + top + ":4-11 <- Kernel#require_relative <- <main> at " + main + ":7",
                      r.record_output, r.of_pid(r.required));
}

TEST_P(RubyProfileTest, PlainCProgramBesideThemIsNotClaimed) {
  OMNIPROF_RUBY_RECORDING(r);
  int64_t total = 0, claimed = 0;
  std::string counterexample;
  for (const Sample& s : r.of_pid(r.native)) {
    total += s.count;
    if (!ruby_frames(s).empty()) {
      claimed += s.count;
      if (counterexample.empty()) counterexample = s.text();
    }
  }
  ASSERT_GE(total, 50) << r.record_output;
  EXPECT_EQ(claimed, 0) << counterexample;
  EXPECT_EQ(r.record_output.find("ruby: pid " + std::to_string(r.native)), std::string::npos) << r.record_output;
  EXPECT_NE(r.record_output.find("ruby.frames"), std::string::npos) << r.record_output;
}

// A C program that links libruby and runs Ruby from its own C function:
// the Ruby frames sit above the program's C frames that entered the VM.
TEST(RubyEmbeddedTest, ProgramEmbeddingLibrubyHasItsRubyFramesAboveTheCFramesThatCalledThem) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const std::string program = workload("embed_ruby");
  if (access(program.c_str(), X_OK) != 0) {
    if (in_ci()) FAIL() << program << " not built in CI (ruby-dev missing?)";
    GTEST_SKIP() << program << " not built (ruby-dev missing)";
  }
  BackgroundProcess embedded({program, kWorkloadSeconds});
  RecordedProfile recorded = record_pids({embedded.pid()}, "4");
  ASSERT_EQ(recorded.status, 0) << recorded.output;
  ASSERT_FALSE(recorded.samples.empty()) << recorded.error;
  const std::vector<Sample> of_embedded = samples_of_pid(recorded.samples, embedded.pid());
  Judged judged = judge(
      of_embedded,
      [](const Sample& s) {
        auto rb = ruby_frames(s);
        return !rb.empty() && rb[0].function == "Embedded#spin";
      },
      [](const Sample& s) {
        size_t run = s.index_of("Embedded#run"), c = s.index_of("run_embedded_ruby", run), main = s.index_of("main", c);
        return function_names(ruby_frames(s)) == std::vector<std::string>{"Embedded#spin", "Embedded#run"} &&
               main < s.frames.size();
      });
  expect_mostly_whole(judged, 50, 95, "Embedded#spin <- Embedded#run above run_embedded_ruby <- main", recorded.output,
                      of_embedded);
}


// Debian's ruby 3.1 executable, which the limit tests run on patched copies
// of its libruby. Empty if it is there; else the reason, after failing the
// test under CI=true.
const char* const kDebianRuby = "/usr/bin/ruby3.1";
std::string missing_debian_ruby() {
  if (access(kDebianRuby, X_OK) == 0) return "";
  if (in_ci()) ADD_FAILURE() << kDebianRuby << " missing in CI";
  return std::string(kDebianRuby) + " not installed";
}

// Turns `name`'s .dynsym entry in `bytes` (the file `elf` views) from
// STT_FUNC into STT_NOTYPE: the loader still binds the library's own calls
// to it, but it is no function symbol any more, as when a build leaves it
// unnamed. Fills `symbol` with what it was; false if it is not found.
bool unname_function(std::string& bytes, const ElfFile& elf, const char* name, ElfSymbol& symbol) {
  auto found = elf.find_symbol(name);
  if (!found || !*found) return false;
  symbol = **found;
  // Elf64_Sym: st_name(4) st_info(1) st_other(1) st_shndx(2) st_value(8) st_size(8).
  std::string value_and_size(16, '\0');
  std::memcpy(value_and_size.data(), &symbol.value, 8);
  std::memcpy(value_and_size.data() + 8, &symbol.size, 8);
  size_t at = bytes.find(value_and_size);
  if (at == std::string::npos || at < 4 || bytes[at - 4] != 0x12) return false;  // STB_GLOBAL, STT_FUNC
  bytes[at - 4] = 0x10;                                                             // STB_GLOBAL, STT_NOTYPE
  return true;
}

// A copy of Debian's libruby-3.1, patched by `patch` (which gets the bytes
// and the library's ELF view; false: it could not), under the name the ruby
// executable asks for: LD_LIBRARY_PATH=dir runs ruby3.1 on it.
std::string patched_libruby(const std::string& dir, const std::function<bool(std::string&, const ElfFile&)>& patch) {
  const std::string original = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1";
  std::ifstream in(original, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto elf = ElfFile::open(original);
  if (!elf || !patch(bytes, *elf)) return "";
  fs::create_directories(dir);
  std::ofstream(dir + "/libruby-3.1.so.3.1", std::ios::binary) << bytes;
  return dir;
}

// The file offset of ELF address `vaddr`, or npos.
size_t file_offset_of(const ElfFile& elf, uint64_t vaddr) {
  for (const auto& segment : elf.load_segments()) {
    if (vaddr >= segment.vaddr && vaddr - segment.vaddr < segment.filesz) return vaddr - segment.vaddr + segment.offset;
  }
  return std::string::npos;
}

// A CRuby the plugin cannot walk (a version it has no offsets for; a
// libruby whose VM loop symbol is gone, as in a build stripped of it) is
// one log line naming the problem and the process, and its native frames
// still come out.
TEST(RubyPluginLimitsTest, UnsupportedOrStrippedRubyIsOneLogLineAndItsNativeFramesStillComeOut) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const std::string ruby = kDebianRuby;
  if (std::string missing = missing_debian_ruby(); !missing.empty()) GTEST_SKIP() << missing;
  const std::string dir = temp_dir("ruby-limits");
  // ruby_version "3.1.2" -> "9.9.9".
  const std::string unknown = patched_libruby(dir + "/unknown", [](std::string& bytes, const ElfFile& elf) {
    auto version = elf.find_symbol("ruby_version");
    if (!version || !*version) return false;
    size_t at = file_offset_of(elf, (*version)->value);
    if (at == std::string::npos || bytes.compare(at, 5, "3.1.2") != 0) return false;
    bytes.replace(at, 5, "9.9.9");
    return true;
  });
  // rb_vm_exec unnamed: the VM loop cannot be found.
  const std::string stripped = patched_libruby(dir + "/stripped", [](std::string& bytes, const ElfFile& elf) {
    ElfSymbol exec;
    if (!unname_function(bytes, elf, "rb_vm_exec", exec)) return false;
    // A file id hashes a file's size and its ends (host/executables): both
    // copies are patched in the middle, so this one is made a byte longer
    // to be a file of its own.
    bytes.push_back('\0');
    return true;
  });
  ASSERT_FALSE(unknown.empty() || stripped.empty()) << "cannot patch a copy of libruby-3.1";
  // --disable-gems: rubygems refuses a libruby whose version is not its own.
  auto run = [&](const std::string& lib_dir) {
    return std::make_unique<BackgroundProcess>(
        recursion_command({"env", "LD_LIBRARY_PATH=" + lib_dir, ruby, "--disable-gems"}, 10, lib_dir + "/ready.txt"));
  };
  auto unknown_ruby = run(unknown), stripped_ruby = run(stripped);
  for (const std::string& lib_dir : {unknown, stripped}) {
    ASSERT_TRUE(wait_for_file(lib_dir + "/ready.txt", kWorkloadsReadyLimit)) << "ruby_recursion.rb under " << lib_dir
                                                                               << " wrote no ready.txt";
  }
  RecordedProfile recorded = record_pids({unknown_ruby->pid(), stripped_ruby->pid()}, "4");
  ASSERT_EQ(recorded.status, 0) << recorded.output;
  ASSERT_FALSE(recorded.samples.empty()) << recorded.error;
  const std::string& output = recorded.output;
  struct Case {
    pid_t pid;
    std::string says;
  };
  for (const Case& c : {Case{unknown_ruby->pid(), "Ruby 9.9.9 is not supported"},
                        Case{stripped_ruby->pid(), "neither rb_vm_exec nor vm_exec"}}) {
    const std::string prefix = "ruby: pid " + std::to_string(c.pid) + " ";
    size_t first = output.find(prefix);
    ASSERT_NE(first, std::string::npos) << "no log line for pid " << c.pid << ":\n" << output;
    EXPECT_EQ(output.find(prefix, first + 1), std::string::npos) << "more than one line for pid " << c.pid;
    std::string line = output.substr(first, output.find('\n', first) - first);
    EXPECT_NE(line.find(c.says), std::string::npos) << line;
    int64_t total = 0, native = 0, ruby_claimed = 0;
    for (const Sample& s : samples_of_pid(recorded.samples, c.pid)) {
      total += s.count;
      if (!ruby_frames(s).empty()) ruby_claimed += s.count;
      // Walked natively through the interpreter down to the executable.
      if (s.has("ruby_run_node") && s.frames.back().function == "_start") native += s.count;
    }
    ASSERT_GE(total, 20) << "too few samples of pid " << c.pid << "\n" << output;
    EXPECT_EQ(ruby_claimed, 0);
    EXPECT_GE(native * 100, total * 90) << native << " of " << total << " samples of pid " << c.pid
                                        << " walk from libruby through ruby_run_node to _start";
  }
}

// A libruby whose symbols the file itself does not give (here rb_vm_exec
// turned into STT_NOTYPE, as Debian 13's libruby-3.3 hides rb_vm_exec and
// ruby_current_ec) is walked when its separate debug file is installed by
// build ID (/usr/lib/debug/.build-id/xx/yyyy.debug, what a -dbgsym package
// installs): the plugin asks the host, which reads the debug file. The copy
// gets a build ID of its own so that its debug file is for it alone.
TEST(RubyPluginLimitsTest, StrippedRubyWithItsDebugFileIsWalked) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const std::string ruby = kDebianRuby;
  if (std::string missing = missing_debian_ruby(); !missing.empty()) GTEST_SKIP() << missing;
  const std::string dir = temp_dir("ruby-debug-file");
  std::string build_id;
  uint64_t exec_offset_in_text = 0, exec_value = 0, exec_size = 0;
  const std::string lib_dir = patched_libruby(dir + "/lib", [&](std::string& bytes, const ElfFile& elf) {
    ElfSymbol exec;
    uint64_t text = 0;
    if (!unname_function(bytes, elf, "rb_vm_exec", exec) || !elf.section_bytes(".text", &text)) return false;
    exec_offset_in_text = exec.value - text;
    exec_value = exec.value;
    exec_size = exec.size;
    // A build ID of its own: the note's last byte changed.
    std::string id = elf.build_id();
    if (id.size() != 40) return false;
    std::string raw;
    for (size_t i = 0; i < id.size(); i += 2) raw.push_back(static_cast<char>(std::stoi(id.substr(i, 2), nullptr, 16)));
    size_t note = bytes.find(raw);
    if (note == std::string::npos) return false;
    bytes[note + raw.size() - 1] ^= 0x5a;
    raw.back() ^= 0x5a;
    build_id.clear();
    for (unsigned char c : raw) build_id += fmt::format("{:02x}", c);
    bytes.append(2, '\0');  // a file id of its own (size and ends)
    return true;
  });
  ASSERT_FALSE(lib_dir.empty()) << "cannot patch a copy of libruby-3.1";
  // Its debug file: the copy's debug sections (none: Debian stripped it)
  // and a .symtab naming rb_vm_exec a function again.
  const std::string debug_path = "/usr/lib/debug/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug";
  ASSERT_FALSE(fs::exists(debug_path)) << debug_path << " exists already";
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() {
      std::error_code ignored;
      fs::remove(path, ignored);
      fs::remove(fs::path(path).parent_path(), ignored);  // only when empty
    }
  } remove_debug_file{debug_path};
  fs::create_directories(fs::path(debug_path).parent_path());
  const std::string copy = lib_dir + "/libruby-3.1.so.3.1";
  for (const auto& command : std::vector<std::vector<std::string>>{
           {"objcopy", "--only-keep-debug", copy, debug_path},
           {"objcopy", "--add-symbol", fmt::format("rb_vm_exec=.text:{:#x},function,global", exec_offset_in_text),
            debug_path}}) {
    CommandResult made = run_command(command);
    ASSERT_EQ(made.exit_code, 0) << command[0] << " " << command[1] << ": " << made.err;
  }
  {
    // --add-symbol makes a symbol of size 0; a -dbgsym's has the function's.
    std::ifstream in(debug_path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    std::string value_and_no_size(16, '\0');
    std::memcpy(value_and_no_size.data(), &exec_value, 8);
    size_t at = bytes.find(value_and_no_size);
    ASSERT_TRUE(at != std::string::npos && at >= 4 && bytes[at - 4] == 0x12) << "rb_vm_exec not in " << debug_path;
    std::memcpy(bytes.data() + at + 8, &exec_size, 8);
    std::ofstream(debug_path, std::ios::binary | std::ios::trunc) << bytes;
  }
  const std::string ready = dir + "/recursion-ready.txt";
  BackgroundProcess recursion(
      recursion_command({"env", "LD_LIBRARY_PATH=" + lib_dir, ruby, "--disable-gems"}, 10, ready));
  ASSERT_TRUE(wait_for_file(ready, kWorkloadsReadyLimit)) << "ruby_recursion.rb wrote no " << ready;
  RecordedProfile recorded = record_pids({recursion.pid()}, "4");
  ASSERT_EQ(recorded.status, 0) << recorded.output;
  ASSERT_FALSE(recorded.samples.empty()) << recorded.error;
  EXPECT_EQ(recorded.output.find("ruby: pid " + std::to_string(recursion.pid()) + " "), std::string::npos)
      << "the plugin refused the process:\n" << recorded.output;
  const std::vector<Sample> of_recursion = samples_of_pid(recorded.samples, recursion.pid());
  expect_mostly_whole(judge_recursion(of_recursion, 10), 20, 90, "Recursion#bottom, 11 Recursion#down, <main>, _start",
                      recorded.output, of_recursion);
}

// Kernels before 5.17 (no bpf_loop) run ruby_unwind: 16 control frames per
// tail call within the budget the native walk leaves. The host acts as on
// such a kernel under OMNIPROF_HIDE_BPF_FEATURES=bpf_loop; a 30-deep Ruby
// stack still comes out whole.
TEST(RubyPluginLimitsTest, WithoutBpfLoopA30DeepRubyStackIsWhole) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const std::string ruby = kDebianRuby;
  if (std::string missing = missing_debian_ruby(); !missing.empty()) GTEST_SKIP() << missing;
  constexpr int kDepth = 30;
  const std::string ready = temp_dir("ruby-noloop") + "/recursion-ready.txt";
  BackgroundProcess recursion(recursion_command({ruby}, kDepth, ready));
  ASSERT_TRUE(wait_for_file(ready, kWorkloadsReadyLimit)) << "ruby_recursion.rb wrote no " << ready;
  RecordedProfile recorded = record_pids({recursion.pid()}, "4", {"OMNIPROF_HIDE_BPF_FEATURES=bpf_loop"});
  ASSERT_EQ(recorded.status, 0) << recorded.output;
  ASSERT_NE(recorded.output.find("program ruby_unwind)"), std::string::npos) << recorded.output;
  ASSERT_FALSE(recorded.samples.empty()) << recorded.error;
  const std::vector<Sample> of_recursion = samples_of_pid(recorded.samples, recursion.pid());
  expect_mostly_whole(judge_recursion(of_recursion, kDepth), 50, 95,
                      "Recursion#bottom, " + std::to_string(kDepth + 1) + " Recursion#down, <main>, _start",
                      recorded.output, of_recursion);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, RubyProfileTest, ::testing::ValuesIn(interpreters()),
                         [](const ::testing::TestParamInfo<Interpreter>& info) { return info.param.name; });

}  // namespace
}  // namespace omniprof::e2e
