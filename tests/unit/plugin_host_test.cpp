// Plugin loading without a kernel: the host checks each fixture plugin's entry
// (ABI, BPF object, programs) and refuses bad ones with a reason.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "plugins/plugin_host.h"
#include "temp_tree.h"

namespace omniprof {
namespace {

namespace fs = std::filesystem;
using testing_support::TempTree;

const std::string kFixtures = std::string(OMNIPROF_TEST_FIXTURES_DIR) + "/plugins";

PluginHostOptions options_enabling_all() {
  PluginHostOptions options;
  options.directories = {kFixtures};
  options.data_root = "/nonexistent";
  options.runtime_enabled = [](const std::string&) { return true; };
  return options;
}

TEST(PluginHostTest, GoodPluginPassesEveryCheck) {
  PluginHost host(nullptr, nullptr);
  const Plugin& p = host.load_file(kFixtures + "/good_plugin.so", options_enabling_all());
  EXPECT_EQ(p.state, PluginState::kChecked) << p.reason;
  EXPECT_EQ(p.name, "good_plugin");
  EXPECT_EQ(p.runtime, "good_plugin");
  EXPECT_EQ(p.version, "1.0");
  EXPECT_TRUE(p.reason.empty());
}

TEST(PluginHostTest, WrongAbiMajorIsRefusedWithBothVersions) {
  PluginHost host(nullptr, nullptr);
  const Plugin& p = host.load_file(kFixtures + "/wrong_abi_plugin.so", options_enabling_all());
  EXPECT_EQ(p.state, PluginState::kRefused);
  EXPECT_NE(p.reason.find("plugin ABI 99." + std::to_string(OMNIPROF_PLUGIN_ABI_MINOR)), std::string::npos)
      << p.reason;
  EXPECT_NE(p.reason.find(std::to_string(OMNIPROF_PLUGIN_ABI_MAJOR) + "." +
                          std::to_string(OMNIPROF_PLUGIN_ABI_MINOR)),
            std::string::npos)
      << p.reason;
  EXPECT_NE(p.reason.find("major must match"), std::string::npos) << p.reason;
}

TEST(PluginHostTest, MissingEntrySymbolIsRefused) {
  PluginHost host(nullptr, nullptr);
  const Plugin& p = host.load_file(kFixtures + "/no_entry_plugin.so", options_enabling_all());
  EXPECT_EQ(p.state, PluginState::kRefused);
  EXPECT_NE(p.reason.find("no entry symbol omniprof_plugin_entry"), std::string::npos) << p.reason;
}

TEST(PluginHostTest, FileThatIsNotElfIsRefused) {
  PluginHost host(nullptr, nullptr);
  const Plugin& p = host.load_file(kFixtures + "/not_elf_plugin.so", options_enabling_all());
  EXPECT_EQ(p.state, PluginState::kRefused);
  EXPECT_NE(p.reason.find("cannot load shared object"), std::string::npos) << p.reason;
}

// The fixtures' constructors append their name to $OMNIPROF_FIXTURE_OPEN_LOG
// when the .so is opened: the fixtures opened while `load` ran.
template <typename Load>
std::string fixtures_opened_during(Load load) {
  TempTree tree("open-log");
  std::string log = tree.path("opened.txt");
  ::setenv("OMNIPROF_FIXTURE_OPEN_LOG", log.c_str(), 1);
  load();
  ::unsetenv("OMNIPROF_FIXTURE_OPEN_LOG");
  std::ifstream in(log);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(PluginHostTest, DisabledRuntimesFileIsNotOpened) {
  PluginHost host(nullptr, nullptr);
  auto options = options_enabling_all();
  options.runtime_enabled = [](const std::string& runtime) { return runtime != "good_plugin"; };
  std::string opened = fixtures_opened_during([&] { host.load_all(options); });
  const Plugin* good = nullptr;
  for (const auto& p : host.plugins()) {
    if (fs::path(p->path).filename() == "good_plugin.so") good = p.get();
  }
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->state, PluginState::kDisabled);
  EXPECT_EQ(good->runtime, "good_plugin");
  EXPECT_EQ(good->reason, "runtime 'good_plugin' is disabled in the config (file not opened)");
  EXPECT_EQ(opened.find("good_plugin\n"), std::string::npos) << opened;
  // The open log works: the enabled ones were opened.
  EXPECT_NE(opened.find("wrong_abi_plugin\n"), std::string::npos) << opened;
}

TEST(PluginHostTest, PluginDeclaringAnotherRuntimeThanItsFileNameIsRefused) {
  PluginHost host(nullptr, nullptr);
  const Plugin& p = host.load_file(kFixtures + "/misnamed_plugin.so", options_enabling_all());
  EXPECT_EQ(p.state, PluginState::kRefused);
  EXPECT_NE(p.reason.find("declares runtime 'fixture' but its file is named misnamed_plugin.so: a plugin "
                          "file must be named <runtime>.so"),
            std::string::npos)
      << p.reason;
}

// A copy of good_plugin.so at `relative` under `tree`, with `mode`.
std::string plugin_copy(const TempTree& tree, const std::string& relative, mode_t mode = 0755) {
  std::string path = tree.path(relative);
  fs::create_directories(fs::path(path).parent_path());
  fs::copy_file(kFixtures + "/good_plugin.so", path, fs::copy_options::overwrite_existing);
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(PluginHostTest, TrustedCopyOfAPluginLoads) {
  TempTree tree("plugins");
  std::string path = plugin_copy(tree, "lib/good_plugin.so");
  PluginHost host(nullptr, nullptr);
  const Plugin& p = host.load_file(path, options_enabling_all());
  EXPECT_EQ(p.state, PluginState::kChecked) << p.reason;
}

TEST(PluginHostTest, GroupWritablePluginFileIsRefusedUnopened) {
  TempTree tree("plugins");
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the plugin to another group";
  std::string path = plugin_copy(tree, "lib/good_plugin.so", 0775);
  ASSERT_EQ(::chown(path.c_str(), 0, 65534), 0);
  PluginHost host(nullptr, nullptr);
  std::string opened = fixtures_opened_during([&] {
    const Plugin& p = host.load_file(path, options_enabling_all());
    EXPECT_EQ(p.state, PluginState::kRefused);
    EXPECT_EQ(p.reason, "untrusted path: file is group-writable by gid 65534 (mode 0775)");
  });
  EXPECT_EQ(opened, "");
}

TEST(PluginHostTest, PluginInAWorldWritableDirectoryIsRefused) {
  TempTree tree("plugins");
  std::string path = plugin_copy(tree, "open/plugins/good_plugin.so");
  tree.dir("open", 0777);
  PluginHost host(nullptr, nullptr);
  const Plugin& p = host.load_file(path, options_enabling_all());
  EXPECT_EQ(p.state, PluginState::kRefused);
  EXPECT_EQ(p.reason, "untrusted path: " + tree.path("open") + ": directory is world-writable (mode 0777)");
}

TEST(PluginHostTest, PluginOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  TempTree tree("plugins");
  std::string path = plugin_copy(tree, "lib/good_plugin.so");
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  PluginHost host(nullptr, nullptr);
  const Plugin& p = host.load_file(path, options_enabling_all());
  EXPECT_EQ(p.state, PluginState::kRefused);
  EXPECT_EQ(p.reason, "untrusted path: file is owned by uid 65534, not by root");
}

// The refusal is per file: the others in the directory still load.
TEST(PluginHostTest, LoadAllGoesOnPastAnUntrustedPlugin) {
  TempTree tree("plugins");
  std::string bad = plugin_copy(tree, "lib/good_plugin.so", 0666);
  std::string other = tree.path("lib/wrong_abi_plugin.so");
  fs::copy_file(kFixtures + "/wrong_abi_plugin.so", other);
  ::chmod(other.c_str(), 0755);
  PluginHost host(nullptr, nullptr);
  auto options = options_enabling_all();
  options.directories = {tree.path("lib")};
  host.load_all(options);
  ASSERT_EQ(host.plugins().size(), 2u);
  EXPECT_EQ(host.plugins()[0]->path, bad);
  EXPECT_NE(host.plugins()[0]->reason.find("world-writable"), std::string::npos);
  // Opened and judged on its own merits.
  EXPECT_NE(host.plugins()[1]->reason.find("major must match"), std::string::npos) << host.plugins()[1]->reason;
}

TEST(PluginHostTest, LoadAllKeepsGoingPastBadPlugins) {
  PluginHost host(nullptr, nullptr);
  host.load_all(options_enabling_all());
  std::map<std::string, PluginState> states;
  for (const auto& p : host.plugins()) states[fs::path(p->path).filename().string()] = p->state;
  EXPECT_EQ(states["good_plugin.so"], PluginState::kChecked);
  EXPECT_EQ(states["wrong_abi_plugin.so"], PluginState::kRefused);
  EXPECT_EQ(states["no_entry_plugin.so"], PluginState::kRefused);
  EXPECT_EQ(states["not_elf_plugin.so"], PluginState::kRefused);
  // Its BPF object parses; only the verifier, at load, can refuse it.
  EXPECT_EQ(states["verifier_reject_plugin.so"], PluginState::kChecked);
  EXPECT_EQ(states["misnamed_plugin.so"], PluginState::kRefused);
}

// A runtime the config enables whose <runtime>.so is in no directory (its
// package removed, its drop-in left behind) is listed as not installed, with
// the directories searched; the plugins that are there load as before.
TEST(PluginHostTest, EnabledRuntimeWithoutAFileIsNotInstalled) {
  TempTree tree("plugins");
  plugin_copy(tree, "lib/good_plugin.so");
  PluginHost host(nullptr, nullptr);
  auto options = options_enabling_all();
  options.directories = {tree.path("lib"), tree.path("missing")};
  options.enabled_runtimes = {"good_plugin", "ruby"};
  host.load_all(options);
  ASSERT_EQ(host.plugins().size(), 2u);
  EXPECT_EQ(host.plugins()[0]->state, PluginState::kChecked) << host.plugins()[0]->reason;
  const Plugin& ruby = *host.plugins()[1];
  EXPECT_EQ(ruby.state, PluginState::kNotInstalled);
  EXPECT_EQ(ruby.runtime, "ruby");
  EXPECT_TRUE(ruby.path.empty());
  EXPECT_EQ(ruby.reason, "runtime 'ruby' is enabled in the config but no ruby.so is in " + tree.path("lib") +
                             ", " + tree.path("missing"));
  EXPECT_STREQ(plugin_state_name(ruby.state), "not installed");
}

// A file that is there but refused is refused, not "not installed": the
// operator must see why it did not load.
TEST(PluginHostTest, RefusedPluginFileIsNotReportedAsNotInstalled) {
  TempTree tree("plugins");
  plugin_copy(tree, "lib/good_plugin.so", 0666);
  PluginHost host(nullptr, nullptr);
  auto options = options_enabling_all();
  options.directories = {tree.path("lib")};
  options.enabled_runtimes = {"good_plugin"};
  host.load_all(options);
  ASSERT_EQ(host.plugins().size(), 1u);
  EXPECT_EQ(host.plugins()[0]->state, PluginState::kRefused);
}

TEST(PluginHostTest, EarlierDirectoryShadowsSameFileName) {
  std::string first = fs::temp_directory_path() / "omniprof-plugins-first";
  fs::create_directories(first);
  fs::copy_file(kFixtures + "/not_elf_plugin.so", first + "/good_plugin.so",
                fs::copy_options::overwrite_existing);
  auto files = PluginHost::find_plugin_files({first, kFixtures});
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files.front(), first + "/good_plugin.so");
  EXPECT_EQ(std::count_if(files.begin(), files.end(),
                          [](const std::string& f) { return fs::path(f).filename() == "good_plugin.so"; }),
            1);
  fs::remove_all(first);
}

// A process goes to the first loaded plugin to claim it, asked in slot
// order whatever the file names' order (perfmap.so sorts before python.so).
TEST(PluginHostTest, ProcessesAreOfferedToLoadedPluginsInSlotOrder) {
  std::vector<std::unique_ptr<Plugin>> plugins;
  auto add = [&](const std::string& name, uint32_t slot, PluginState state) {
    auto plugin = std::make_unique<Plugin>();
    plugin->name = name;
    plugin->slot = slot;
    plugin->state = state;
    plugins.push_back(std::move(plugin));
  };
  add("native", OMNIPROF_SLOT_NATIVE, PluginState::kLoaded);
  add("perfmap", OMNIPROF_SLOT_THIRD_PARTY_FIRST, PluginState::kLoaded);
  add("python", OMNIPROF_SLOT_PYTHON, PluginState::kLoaded);
  add("refused", 0, PluginState::kRefused);
  add("ruby", OMNIPROF_SLOT_RUBY, PluginState::kLoaded);
  std::vector<std::string> order;
  for (const Plugin* plugin : plugins_in_claim_order(plugins)) order.push_back(plugin->name);
  EXPECT_EQ(order, (std::vector<std::string>{"native", "ruby", "python", "perfmap"}));
}

}  // namespace
}  // namespace omniprof
