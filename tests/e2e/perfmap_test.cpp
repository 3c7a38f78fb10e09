// The perfmap plugin (sdk/examples/perfmap) on a real Node.js: V8's JIT code
// is named from the perf map node writes (--perf-basic-prof), in place of
// the native frame the walker stepped through, under node's own native
// frames; with the plugin disabled in the config the name is gone and the
// same code is the native walker's unnamed +0x... frames again.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "e2e_support.h"
#include "interpreter_support.h"
#include "profile_samples.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNode = "/usr/bin/node";
constexpr const char* kHotFunction = "omniprofPerfmapHotFunction";
// One node serves the suite's three tests (each records it for 8 s): long
// enough for all of them in emulated guests (the kernel matrix's TCG), where
// node takes tens of seconds to start and tier its code up, and omniprof
// tens to load its BPF.
constexpr const char* kWorkloadSeconds = "600";
constexpr const char* kRecordSeconds = "8";

// The one place that says where perfmap.so is: the plugin directory of its
// out-of-tree build against the installed SDK (ctest's fixture
// SDK.perfmap_out_of_tree, tests/sdk/sdk_tests.py), given by ctest in
// OMNIPROF_PERFMAP_PLUGIN_DIR; "" when not run through ctest.
std::string perfmap_plugin_dir() {
  const char* dir = std::getenv("OMNIPROF_PERFMAP_PLUGIN_DIR");
  return dir ? dir : "";
}

// The plugin directories the agent gets: one holding only the in-tree
// native plugin (a link to it: the node process's native frames), and
// perfmap's; so that the in-tree perfmap.so, built beside native.so, is not
// the one loaded.
std::vector<std::string> plugin_directories(const std::string& native_dir) {
  return {native_dir, perfmap_plugin_dir()};
}

// A config directory (for OMNIPROF_CONFIG_DIR) whose omniprof.yaml lists the
// plugin directories, plus `extra` YAML.
std::string config_dir(const std::string& name, const std::string& extra) {
  const std::string dir = temp_dir(name);
  const std::string native_dir = dir + "/native-plugin";
  fs::create_directories(native_dir);
  fs::create_symlink(std::string(OMNIPROF_BUILD_DIR) + "/" + OMNIPROF_PLUGIN_SUBDIR + "/native.so",
                     native_dir + "/native.so");
  std::ofstream out(dir + "/omniprof.yaml");
  out << "plugins:\n  directories:\n";
  for (const auto& d : plugin_directories(native_dir)) out << "    - " << d << "\n";
  out << extra;
  return dir;
}

bool mentions_hot_function(const FrameLocation& frame) {
  return frame.function.find(kHotFunction) != std::string::npos;
}

size_t hot_index(const Sample& s) {
  for (size_t i = 0; i < s.frames.size(); ++i) {
    if (mentions_hot_function(s.frames[i])) return i;
  }
  return s.frames.size();
}

// A native frame the host could not name: JIT code in an anonymous mapping
// ("+0x417f": the mapping has no file name) or in no mapping it knows
// ("[unknown]+0x7f...").
bool is_unnamed_native(const FrameLocation& frame) {
  const std::string& f = frame.function;
  size_t at = f.rfind("[unknown]", 0) == 0 ? 9 : 0;
  if (f.compare(at, 3, "+0x") != 0 || f.size() == at + 3) return false;
  return f.find_first_not_of("0123456789abcdef", at + 3) == std::string::npos;
}

// Whether a frame below `from` (a caller) is node's own native entry.
bool node_start_below(const Sample& s, size_t from) {
  for (size_t i = from + 1; i < s.frames.size(); ++i) {
    if (s.frames[i].function.rfind("node::Start(", 0) == 0) return true;
  }
  return false;
}

// Waits until node's perf map names the hot function compiled by TurboFan
// ("JS:*" on Node 20, "LazyCompile:*" before): from then on the samples see
// its optimized code.
bool wait_for_optimized(pid_t pid, std::chrono::seconds limit) {
  const std::string map = "/tmp/perf-" + std::to_string(pid) + ".map";
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (slurp(map).find(std::string("*") + kHotFunction) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// node running perfmap_hot.js with its perf map, its hot function already
// optimized; killed, its map and V8 log removed, when destroyed. Without
// --no-turbo-inlining, TurboFan inlines the hot function into node's
// processImmediate once that has run for half a minute or so (seen on Node
// 20): the samples then name JS:*processImmediate, rightly, and the hot
// function has no frame of its own to find.
class HotNode {
 public:
  HotNode()
      : log_dir_(temp_dir("perfmap-v8log")),
        process_(std::vector<std::string>{kNode, "--perf-basic-prof", "--no-turbo-inlining",
                                          "--logfile=" + log_dir_ + "/v8.log", "--no-logfile-per-isolate",
                                          script("perfmap_hot.js"), kWorkloadSeconds}),
        map_("/tmp/perf-" + std::to_string(process_.pid()) + ".map") {}
  ~HotNode() {
    if (running()) {
      process_.signal(SIGKILL);
      process_.wait();
    }
    fs::remove(map_);
    fs::remove_all(log_dir_);
  }
  pid_t pid() const { return process_.pid(); }
  const std::string& map() const { return map_; }
  // False once node has ended (and been reaped: its pid is then no longer
  // its to signal).
  bool running() {
    if (!ended_ && process_.poll().has_value()) ended_ = true;
    return !ended_;
  }

 private:
  // V8 also writes its own log (isolate-*-v8.log) with --perf-basic-prof:
  // into a directory of the test's, not the working directory.
  std::string log_dir_;
  BackgroundProcess process_;
  std::string map_;
  bool ended_ = false;
};

class PerfmapNodeTest : public ::testing::Test {
 protected:
  // One node for the suite, started by the first test that needs it (and
  // again if it ended): starting it and waiting for its hot function to be
  // optimized is most of a test's time in an emulated guest.
  static void TearDownTestSuite() { node_.reset(); }

  void SetUp() override {
    OMNIPROF_REQUIRE_BPF();
    OMNIPROF_REQUIRE_GO();
    if (access(kNode, X_OK) != 0) {
      if (in_ci()) FAIL() << kNode << " missing in CI (scripts/install-deps.sh installs nodejs)";
      GTEST_SKIP() << kNode << " not installed";
    }
    if (perfmap_plugin_dir().empty()) {
      FAIL() << "OMNIPROF_PERFMAP_PLUGIN_DIR is not set: run through ctest (PerfmapNodeTest.out_of_tree_plugin), "
                "whose fixture SDK.perfmap_out_of_tree builds perfmap.so against the installed SDK";
    }
    if (!fs::exists(perfmap_plugin_dir() + "/perfmap.so")) FAIL() << "perfmap.so not built in " << perfmap_plugin_dir() << " (ctest -R SDK.perfmap_out_of_tree builds it)";
    if (node_ && !node_->running()) node_.reset();
    if (!node_) {
      node_ = std::make_unique<HotNode>();
      if (!wait_for_optimized(node_->pid(), std::chrono::seconds(90))) {
        const std::string map = slurp(node_->map()).substr(0, 2000);
        node_.reset();
        FAIL() << "node's perf map never named *" << kHotFunction << ":\n" << map;
      }
    }
  }

  RecordedProfile record(const std::string& config_yaml, std::vector<std::string> environment = {}) {
    const std::string dir = config_dir("perfmap-config", config_yaml);
    environment.push_back("OMNIPROF_CONFIG_DIR=" + dir);
    RecordedProfile recorded = record_pids({node_->pid()}, kRecordSeconds, environment);
    fs::remove_all(dir);
    return recorded;
  }

  // The node samples that name the hot function, of all node samples: it
  // runs nearly all of node's main thread's time; node's other threads
  // (V8's workers, libuv's) mostly sleep.
  void expect_hot_function_named(const RecordedProfile& recorded) {
    ASSERT_EQ(recorded.status, 0) << recorded.output;
    ASSERT_FALSE(recorded.samples.empty()) << recorded.error;
    Judged named = judge(
        samples_of_pid(recorded.samples, node_->pid()), [](const Sample&) { return true; },
        [](const Sample& s) { return hot_index(s) < s.frames.size(); });
    ASSERT_GE(named.total, 40) << "too few samples of node\n" << recorded.output;
    EXPECT_GE(named.whole * 100, named.total * 50)
        << named.whole << " of " << named.total << " samples of node name " << kHotFunction
        << "; one that does not: " << named.counterexample << "\n"
        << recorded.output;
  }

  static std::unique_ptr<HotNode> node_;
};
std::unique_ptr<HotNode> PerfmapNodeTest::node_;

TEST_F(PerfmapNodeTest, HotJavaScriptFunctionIsNamedFromThePerfMapInPlaceOfItsNativeFrameAboveNodesFrames) {
  RecordedProfile recorded = record("");
  expect_hot_function_named(recorded);
  if (HasFatalFailure()) return;
  auto samples = samples_of_pid(recorded.samples, node_->pid());
  // Where it is named: in the JIT frame's place (no unnamed native frame for
  // the same code beside it), with node's native frames below it, down to
  // node::Start.
  Judged placed = judge(
      samples, [](const Sample& s) { return hot_index(s) < s.frames.size(); },
      [](const Sample& s) {
        size_t hot = hot_index(s);
        bool duplicate = (hot > 0 && is_unnamed_native(s.frames[hot - 1])) ||
                         (hot + 1 < s.frames.size() && is_unnamed_native(s.frames[hot + 1]));
        return !duplicate && s.frames[hot].function.rfind("JS:", 0) == 0 && node_start_below(s, hot);
      });
  EXPECT_GE(placed.whole * 100, placed.total * 80)
      << placed.whole << " of " << placed.total << " samples with " << kHotFunction
      << " have it as a JS: frame, no unnamed native frame beside it, and node::Start below it; one that does not: "
      << placed.counterexample;
  EXPECT_NE(recorded.output.find("perfmap.frames"), std::string::npos) << recorded.output;
  // The plugin that did it is the one built out of tree against the SDK.
  EXPECT_NE(recorded.output.find("loaded from " + perfmap_plugin_dir() + "/perfmap.so"), std::string::npos)
      << recorded.output;
}

// Kernels before 5.17: the program that tail-calls itself every 32 marks.
// The host acts as on such a kernel under OMNIPROF_HIDE_BPF_FEATURES; that
// the plugin's tail-call program (perfmap_unwind, not perfmap_unwind_loop)
// is the one loaded is checked in its log line, as the Ruby and native
// tests do for theirs.
TEST_F(PerfmapNodeTest, WithoutBpfLoopTheTailCallProgramNamesItToo) {
  RecordedProfile recorded = record("", {"OMNIPROF_HIDE_BPF_FEATURES=bpf_loop"});
  const std::string loaded = "loaded from " + perfmap_plugin_dir() + "/perfmap.so ";
  const size_t at = recorded.output.find(loaded);
  ASSERT_NE(at, std::string::npos) << recorded.output;
  const std::string line = recorded.output.substr(at, recorded.output.find('\n', at) - at);
  EXPECT_NE(line.find(", program perfmap_unwind)"), std::string::npos)
      << "perfmap is not loaded as its tail-call program: " << line;
  expect_hot_function_named(recorded);
}

TEST_F(PerfmapNodeTest, WithThePluginDisabledInTheConfigTheNameIsMissing) {
  RecordedProfile recorded = record("runtimes:\n  perfmap: false\n");
  ASSERT_EQ(recorded.status, 0) << recorded.output;
  ASSERT_FALSE(recorded.samples.empty()) << recorded.error;
  auto samples = samples_of_pid(recorded.samples, node_->pid());
  int64_t total = 0, named = 0, unknown = 0;
  std::string counterexample;
  for (const Sample& s : samples) {
    total += s.count;
    if (hot_index(s) < s.frames.size()) {
      named += s.count;
      if (counterexample.empty()) counterexample = s.text();
    }
    if (!s.frames.empty() && is_unnamed_native(s.frames.front())) unknown += s.count;
  }
  ASSERT_GE(total, 40) << "too few samples of node\n" << recorded.output;
  EXPECT_EQ(named, 0) << counterexample;
  // The same JIT code is sampled, unnamed: the native walker's +0x....
  EXPECT_GE(unknown * 100, total * 50) << unknown << " of " << total << " samples have an unnamed (+0x...) leaf; one: "
                                       << (samples.empty() ? "" : samples.front().text());
  EXPECT_EQ(recorded.output.find("perfmap.frames"), std::string::npos) << recorded.output;
}

}  // namespace
}  // namespace omniprof::e2e
