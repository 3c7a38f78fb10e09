// Plugin loading without a kernel: the host checks each fixture plugin's entry
// (ABI, BPF object, programs) and refuses bad ones with a reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "plugins/plugin_host.h"

namespace omniprof {
namespace {

namespace fs = std::filesystem;

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
  EXPECT_EQ(p.runtime, "fixture");
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

TEST(PluginHostTest, DisabledRuntimeIsReportedAsDisabledByConfig) {
  PluginHost host(nullptr, nullptr);
  auto options = options_enabling_all();
  options.runtime_enabled = [](const std::string& runtime) { return runtime != "fixture"; };
  const Plugin& p = host.load_file(kFixtures + "/good_plugin.so", options);
  EXPECT_EQ(p.state, PluginState::kDisabled);
  EXPECT_NE(p.reason.find("'fixture' is disabled"), std::string::npos) << p.reason;
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

}  // namespace
}  // namespace omniprof
