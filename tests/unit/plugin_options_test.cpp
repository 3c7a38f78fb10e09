// plugin_options (agent/agent.h): what the agent and `omniprof plugins` give
// the plugin host from the merged config. Not in the ThreadSanitizer build
// (it has no agent or config code).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "agent/agent.h"
#include "config/config.h"

namespace omniprof {
namespace {

// What the agent and `omniprof plugins` expect: the runtimes the merged
// config enables, defaults and drop-ins alike, and not the disabled ones.
TEST(PluginOptionsTest, ExpectEveryRuntimeTheConfigEnables) {
  Config config = default_config(kRunDefaultFrequencyHz);
  ASSERT_TRUE(apply_config_document("runtimes: {perfmap: true, python: false}\n", "50-x.yaml", config));
  auto options = plugin_options(config, InstallLayout{"/usr", "/usr/lib/omniprof/plugins", "/usr/share/omniprof"});
  std::set<std::string> expected(options.enabled_runtimes.begin(), options.enabled_runtimes.end());
  EXPECT_EQ(expected, (std::set<std::string>{"native", "perfmap", "ruby"}));
  EXPECT_EQ(options.directories.front(), "/usr/lib/omniprof/plugins");
}

}  // namespace
}  // namespace omniprof
