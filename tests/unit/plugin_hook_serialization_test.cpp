// plugin.h promises that the host never enters one plugin instance from two
// threads at once. The agent calls hooks from its event thread
// (detect_process, load_executable, process_gone...) and its main thread
// (symbolize_frame at round end, deferred load_executable retries); this
// drives a plugin whose hooks share plain, unsynchronized state through
// PluginHost the same way. Under ThreadSanitizer (OMNIPROF_SANITIZE=thread,
// run by scripts/test.sh) two hooks at once is a reported data race; without
// it the plugin still counts overlapping calls. The same fixture shows how
// the host calls describe_file (plugin ABI 2.3): once per file id.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "executables/executable_info_manager.h"
#include "plugins/plugin_host.h"

namespace omniprof {
namespace {

const std::string kFixtures = std::string(OMNIPROF_TEST_FIXTURES_DIR) + "/plugins";

constexpr int kRounds = 3000;

// Plugins get an instance without BPF maps (as for `omniprof debug`).
PluginHostOptions with_instances() {
  PluginHostOptions options;
  options.data_root = "/nonexistent";
  options.runtime_enabled = [](const std::string&) { return true; };
  options.create_without_bpf = true;
  return options;
}

// The plugin of fixture `file`, checked and with an instance; null (and a
// failure) otherwise.
Plugin* fixture_instance(PluginHost& host, const std::string& file) {
  host.load_file(kFixtures + "/" + file, with_instances());
  EXPECT_EQ(host.plugins().size(), 1u);
  if (host.plugins().size() != 1) return nullptr;
  Plugin& plugin = *host.plugins().front();
  EXPECT_EQ(plugin.state, PluginState::kChecked) << plugin.reason;
  return plugin.state == PluginState::kChecked && plugin.instance ? &plugin : nullptr;
}

std::string fixture_state(Plugin& plugin) {
  std::string out, error;
  auto write = [](void* context, const char* text, size_t len) {
    static_cast<std::string*>(context)->append(text, len);
  };
  EXPECT_EQ(PluginHost::debug_command(plugin, "fixture-state", "", write, &out, error), OMNIPROF_OK) << error;
  return out;
}

TEST(PluginHookSerializationTest, HooksOfOneInstanceNeverRunConcurrently) {
  PluginHost host(nullptr, nullptr);
  Plugin* loaded = fixture_instance(host, "shared_state_plugin.so");
  ASSERT_NE(loaded, nullptr);
  Plugin& plugin = *loaded;

  std::atomic<int> ready{0};
  auto start_together = [&] {
    ready++;
    while (ready.load() < 3) std::this_thread::yield();
  };
  // The event thread: a process appears, its executables are loaded, it goes.
  std::thread event_thread([&] {
    start_together();
    for (int i = 0; i < kRounds; ++i) {
      int32_t pid = 1000 + i;
      // Its file is described once (describe_file), forgotten at its unload below.
      const uint64_t file_id = static_cast<uint64_t>(i) + 1;
      omniprof_mapping mapping{0x1000, 0x2000, 0, 0, file_id, "/fixture/file"};
      omniprof_process process{pid, "/proc/1/exe", "fixture", &mapping, 1};
      omniprof_process_attach attach{};
      std::string error;
      EXPECT_EQ(PluginHost::detect_process(plugin, process, attach, error), OMNIPROF_NOT_MINE);
      EXPECT_EQ(PluginHost::load_executable(plugin, file_id, "/fixture/file", error),
                OMNIPROF_OK);
      PluginHost::unload_executable(plugin, file_id);
      PluginHost::process_gone(plugin, pid);
    }
  });
  // The main thread's deferred retries load other executables meanwhile.
  std::thread retry_thread([&] {
    start_together();
    for (int i = 0; i < kRounds; ++i) {
      std::string error;
      uint64_t file_id = 1000000 + static_cast<uint64_t>(i);
      EXPECT_EQ(PluginHost::load_executable(plugin, file_id, "/fixture/other", error), OMNIPROF_OK);
      PluginHost::unload_executable(plugin, file_id);
    }
  });
  // Round end: frames named; the name is copied before another call may
  // overwrite the plugin's buffer.
  start_together();
  for (int i = 0; i < kRounds; ++i) {
    auto symbol = PluginHost::symbolize_frame(plugin, 7, omniprof_frame{static_cast<uint64_t>(i), 0, OMNIPROF_FRAME_PYTHON, 0, 0});
    ASSERT_TRUE(symbol) << symbol.error().message;
    std::string expected = "fixture_7_" + std::to_string(i) + "_";
    EXPECT_EQ(symbol->function.compare(0, expected.size(), expected), 0) << symbol->function;
    EXPECT_EQ(symbol->line, i);
  }
  event_thread.join();
  retry_thread.join();

  // Every call counted once (a lost update is a race), none overlapped,
  // everything loaded was unloaded. The debug command itself is the last call.
  EXPECT_EQ(fixture_state(plugin),
            "calls=" + std::to_string(5 * kRounds + 2 * kRounds + kRounds + 1) +
                " overlaps=0 processes=0 files=0 described=" + std::to_string(kRounds) +
                " description_mismatches=0");
}

TEST(PluginHookSerializationTest, MissingOptionalHooksMeanNothingToDo) {
  PluginHost host(nullptr, nullptr);
  // good_plugin has symbolize_frame only.
  host.load_file(kFixtures + "/good_plugin.so", with_instances());
  Plugin& plugin = *host.plugins().front();
  ASSERT_NE(plugin.instance, nullptr) << plugin.reason;
  omniprof_process process{1, "/proc/1/exe", "init", nullptr, 0};
  omniprof_process_attach attach{};
  std::string error;
  EXPECT_EQ(PluginHost::detect_process(plugin, process, attach, error), OMNIPROF_NOT_MINE);
  EXPECT_EQ(PluginHost::load_executable(plugin, 1, "/x", error), OMNIPROF_OK);
  EXPECT_TRUE(error.empty()) << error;
  auto symbol = PluginHost::symbolize_frame(plugin, 1, omniprof_frame{0x1234, 0, OMNIPROF_FRAME_PYTHON, 0, 0});
  ASSERT_TRUE(symbol) << symbol.error().message;
  EXPECT_EQ(symbol->function, "fixture_frame");
  EXPECT_EQ(symbol->file, "fixture.src");
  EXPECT_EQ(PluginHost::debug_command(plugin, "fixture-state", "", nullptr, nullptr, error),
            OMNIPROF_ERR_UNSUPPORTED);
  EXPECT_NE(error.find("no debug_command hook"), std::string::npos) << error;
}

// What the fixture's state line says `key` is ("described=3": 3).
std::string state_value(const std::string& state, const std::string& key) {
  size_t at = state.find(" " + key + "=");
  if (at == std::string::npos) return "(no " + key + " in: " + state + ")";
  at += key.size() + 2;
  return state.substr(at, state.find(' ', at) - at);
}

// A process mapping the files `file_ids` (0: a file the host could not
// identify), as ProcessTracker offers it.
omniprof_status offer(Plugin& plugin, int32_t pid, const std::vector<uint64_t>& file_ids) {
  std::vector<omniprof_mapping> mappings;
  std::vector<const char*> names;
  for (uint64_t id : file_ids) {
    uint64_t start = 0x10000 * (mappings.size() + 1);
    mappings.push_back({start, start + 0x1000, 0, start, id, "/fixture/file"});
    names.push_back("libfixture.so");
  }
  omniprof_process process{pid, "/proc/1/exe", "fixture", mappings.data(), mappings.size(), names.data()};
  omniprof_process_attach attach{};
  std::string error;
  return PluginHost::detect_process(plugin, process, attach, error);
}

// Plugin ABI 2.3: the host asks a plugin to describe each file once per
// file id, however many processes (and mappings of one process) map it,
// hands every detect_process the description of each of its files, and
// asks again only after unload_executable of that id.
TEST(PluginFileDescriptionsTest, EachFileIsDescribedOncePerFileIdUntilItIsUnloaded) {
  PluginHost host(nullptr, nullptr);
  Plugin* loaded = fixture_instance(host, "shared_state_plugin.so");
  ASSERT_NE(loaded, nullptr);
  Plugin& plugin = *loaded;
  ASSERT_NE(plugin.hooks.describe_file, nullptr);

  EXPECT_EQ(offer(plugin, 100, {7, 7, 8, 0}), OMNIPROF_NOT_MINE);  // two mappings of 7; 0 never described
  EXPECT_EQ(state_value(fixture_state(plugin), "described"), "2");
  EXPECT_EQ(offer(plugin, 101, {8, 7}), OMNIPROF_NOT_MINE);  // another process, the same files
  EXPECT_EQ(offer(plugin, 100, {7, 8, 9}), OMNIPROF_NOT_MINE);  // a dlopen: only the new file
  EXPECT_EQ(state_value(fixture_state(plugin), "described"), "3");

  PluginHost::unload_executable(plugin, 7);  // the last process mapping 7 went
  EXPECT_EQ(offer(plugin, 102, {7, 8}), OMNIPROF_NOT_MINE);  // mapped again: described again
  std::string state = fixture_state(plugin);
  EXPECT_EQ(state_value(state, "described"), "4");
  EXPECT_EQ(state_value(state, "description_mismatches"), "0");
}

// The host's loader (PluginExecutableLoader) lets every plugin forget a
// file at its last reference, and only the plugins that load executables at
// an eviction: an interpreter plugin keeps its description of a file whose
// table was evicted while processes still map it.
TEST(PluginFileDescriptionsTest, EvictionReachesOnlyPluginsThatLoadTheLastReferenceReachesAll) {
  PluginHost host(nullptr, nullptr);
  Plugin* loaded = fixture_instance(host, "shared_state_plugin.so");
  ASSERT_NE(loaded, nullptr);
  Plugin& plugin = *loaded;
  plugin.state = PluginState::kLoaded;  // as after BPF loading, which this test has no use for
  PluginExecutableLoader loader(host, nullptr);

  plugin.hooks.load_executable = nullptr;  // as an interpreter plugin: describes files, loads none
  EXPECT_EQ(offer(plugin, 100, {7}), OMNIPROF_NOT_MINE);
  loader.evict(7);
  EXPECT_EQ(offer(plugin, 101, {7}), OMNIPROF_NOT_MINE);
  EXPECT_EQ(state_value(fixture_state(plugin), "described"), "1");  // kept across the eviction
  loader.unload(7);  // its last process went
  EXPECT_EQ(offer(plugin, 102, {7}), OMNIPROF_NOT_MINE);
  EXPECT_EQ(state_value(fixture_state(plugin), "described"), "2");

  plugin.hooks.load_executable = plugin.entry->load_executable;  // as the native plugin
  loader.evict(7);
  EXPECT_EQ(offer(plugin, 103, {7}), OMNIPROF_NOT_MINE);
  EXPECT_EQ(state_value(fixture_state(plugin), "described"), "3");
  EXPECT_EQ(state_value(fixture_state(plugin), "description_mismatches"), "0");
}

// A plugin built for 2.2 (its entry ends before describe_file) still loads
// in this host (2.3 and later), is never asked to describe a file, and is offered
// processes as before, with no descriptions.
TEST(PluginFileDescriptionsTest, PluginOfThePreviousMinorLoadsAndIsNeverAskedToDescribe) {
  PluginHost host(nullptr, nullptr);
  Plugin* loaded = fixture_instance(host, "abi_2_2_plugin.so");
  ASSERT_NE(loaded, nullptr);
  Plugin& plugin = *loaded;
  EXPECT_EQ(plugin.abi_versions, "plugin ABI 2.2, BPF ABI " + std::to_string(OMNIPROF_BPF_ABI_VERSION));
  EXPECT_EQ(plugin.hooks.describe_file, nullptr);
  EXPECT_EQ(offer(plugin, 100, {7, 8}), OMNIPROF_NOT_MINE);
  EXPECT_EQ(offer(plugin, 101, {7}), OMNIPROF_NOT_MINE);
  std::string state = fixture_state(plugin);
  EXPECT_EQ(state_value(state, "processes"), "2");
  EXPECT_EQ(state_value(state, "described"), "0");
  EXPECT_EQ(state_value(state, "description_mismatches"), "0");
}

// Plugin ABI 2.4: a plugin asking for ticks on notice only is not ticked
// every second as well; one of an older minor cannot ask (its entry ends
// before tick_flags, whatever bytes follow it), and is.
TEST(PluginTickFlagsTest, OnlyPluginsOfThisMinorAskingForItAreTickedOnNoticeOnly) {
  PluginHost current(nullptr, nullptr);
  Plugin* on_notice = fixture_instance(current, "shared_state_plugin.so");
  ASSERT_NE(on_notice, nullptr);
  EXPECT_NE(on_notice->hooks.tick, nullptr);
  EXPECT_EQ(on_notice->hooks.tick_flags, OMNIPROF_TICK_ON_NOTICE_ONLY);
  EXPECT_FALSE(PluginHost::ticks_every_second(*on_notice));

  PluginHost older(nullptr, nullptr);
  Plugin* of_2_2 = fixture_instance(older, "abi_2_2_plugin.so");
  ASSERT_NE(of_2_2, nullptr);
  EXPECT_EQ(of_2_2->entry->tick_flags, OMNIPROF_TICK_ON_NOTICE_ONLY);  // set past its struct_size
  EXPECT_EQ(of_2_2->hooks.tick_flags, 0u);
  EXPECT_TRUE(PluginHost::ticks_every_second(*of_2_2));

  // Without a tick hook there is nothing to call, every second or not.
  Plugin without_tick;
  EXPECT_FALSE(PluginHost::ticks_every_second(without_tick));
}

}  // namespace
}  // namespace omniprof
