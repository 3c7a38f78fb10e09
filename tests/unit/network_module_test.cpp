// load_network_module: the module built beside the tests is found and loaded
// once; a missing file, a library that is not the module, and a module of
// another version are refused with an error naming the file and why.
#include <gtest/gtest.h>

#include "common/install_layout.h"
#include "network/transport.h"

namespace omniprof::network {
namespace {

TEST(NetworkModule, TheInstalledModuleLoadsOnceAndSpeaksThisVersion) {
  auto first = installed_network_module();
  ASSERT_TRUE(first) << first.error().message;
  auto second = load_network_module(InstallLayout::from_executable().network_module);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(*first, *second);
  EXPECT_STREQ((*first)->version, OMNIPROF_VERSION);
  EXPECT_NE((*first)->http_client, nullptr);
  EXPECT_NE((*first)->grpc_channel, nullptr);
  EXPECT_NE((*first)->serve_page, nullptr);
}

TEST(NetworkModule, AMissingFileIsNamedWithWhereTheModuleBelongs) {
  const std::string path = "/nonexistent/lib/omniprof/network.so";
  auto module = load_network_module(path);
  ASSERT_FALSE(module);
  EXPECT_EQ(module.error().message,
            "the network module " + path +
                " (needed for export and /metrics) cannot be read: No such file or directory; it is installed with "
                "omniprof, beside its plugins");
}

TEST(NetworkModule, ALibraryWithoutTheEntryIsRefused) {
  // A library of the fixtures: loadable, but not a network module.
  const std::string path = OMNIPROF_TEST_FIXTURES_DIR "/tls/libtls_descriptor_dynamic.so";
  auto module = load_network_module(path);
  ASSERT_FALSE(module);
  EXPECT_EQ(module.error().message, "the network module " + path +
                                        " (needed for export and /metrics) has no omniprof_network_module: not "
                                        "omniprof's network module");
}

TEST(NetworkModule, AModuleOfAnotherVersionIsRefused) {
  const std::string path = OMNIPROF_TEST_FIXTURES_DIR "/network/network_other_version.so";
  auto module = load_network_module(path);
  ASSERT_FALSE(module);
  EXPECT_EQ(module.error().message, "the network module " + path +
                                        " (needed for export and /metrics) is from omniprof 0.0.0-other, this agent "
                                        "is " OMNIPROF_VERSION "; the two are installed together");
}

}  // namespace
}  // namespace omniprof::network
