// Which plugin versions the host accepts (host/plugins/plugin_abi.h), as
// sdk/include/omniprof/VERSIONING.md states it.
#include "plugins/plugin_abi.h"

#include <gtest/gtest.h>

#include <string>

#include "omniprof/bpf/abi.h"
#include "omniprof/plugin.hpp"

namespace omniprof {
namespace {

std::string refusal(const omniprof_plugin& entry) {
  auto result = check_plugin_abi(entry);
  return result ? std::string() : result.error().message;
}

TEST(PluginAbiTest, SaysWhichVersionsTheHostAccepts) {
  EXPECT_EQ(host_accepted_abi_text(), "host accepts plugin ABI " + std::to_string(OMNIPROF_PLUGIN_ABI_MAJOR) + "." +
                                          std::to_string(OMNIPROF_PLUGIN_ABI_MINOR) + " and older " +
                                          std::to_string(OMNIPROF_PLUGIN_ABI_MAJOR) + ".x, BPF ABI " +
                                          std::to_string(OMNIPROF_BPF_ABI_VERSION));
  omniprof_plugin entry = sdk::make_plugin_entry();
  entry.abi_major = 99;
  entry.abi_minor = 3;
  entry.bpf_abi_version = 7;
  EXPECT_EQ(plugin_abi_text(entry), "plugin ABI 99.3, BPF ABI 7");
}

TEST(PluginAbiTest, AcceptsThisHostsVersionsAndOlderMinors) {
  omniprof_plugin entry = sdk::make_plugin_entry();
  EXPECT_EQ(refusal(entry), "");
  for (uint16_t minor = 0; minor <= OMNIPROF_PLUGIN_ABI_MINOR; ++minor) {
    entry.abi_minor = minor;
    entry.struct_size = static_cast<uint32_t>(plugin_struct_size_of_minor(minor));
    EXPECT_NE(entry.struct_size, 0u) << minor;
    EXPECT_EQ(refusal(entry), "") << minor;
  }
  // A plugin declaring an older minor than the SDK it was built with hands a
  // larger struct: the host reads what it knows of it.
  entry.abi_minor = 0;
  entry.struct_size = sizeof(omniprof_plugin) + 64;
  EXPECT_EQ(refusal(entry), "");
}

TEST(PluginAbiTest, RefusesAnotherMajorANewerMinorAShortStructAnotherBpfAbi) {
  omniprof_plugin entry = sdk::make_plugin_entry();
  entry.abi_major = OMNIPROF_PLUGIN_ABI_MAJOR + 1;
  EXPECT_NE(refusal(entry).find("major must match"), std::string::npos) << refusal(entry);

  entry = sdk::make_plugin_entry();
  entry.abi_minor = OMNIPROF_PLUGIN_ABI_MINOR + 1;
  EXPECT_NE(refusal(entry).find("newer than this host's"), std::string::npos) << refusal(entry);
  EXPECT_EQ(plugin_struct_size_of_minor(OMNIPROF_PLUGIN_ABI_MINOR + 1), 0u);

  entry = sdk::make_plugin_entry();
  entry.struct_size = static_cast<uint32_t>(plugin_struct_size_of_minor(entry.abi_minor) - 8);
  EXPECT_NE(refusal(entry).find("entry struct is"), std::string::npos) << refusal(entry);

  entry = sdk::make_plugin_entry();
  entry.bpf_abi_version = OMNIPROF_BPF_ABI_VERSION - 1;
  EXPECT_NE(refusal(entry).find("BPF ABI " + std::to_string(OMNIPROF_BPF_ABI_VERSION - 1)), std::string::npos)
      << refusal(entry);
}

}  // namespace
}  // namespace omniprof
