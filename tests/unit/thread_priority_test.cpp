// The event thread's nice (config processes.nice) and the scope in which a
// table build runs at nice 0 or above (common/thread_priority.h), on a
// thread of this test's own, so the test process keeps its priority.
#include <gtest/gtest.h>

#include <unistd.h>

#include <thread>

#include "common/thread_priority.h"

namespace omniprof {
namespace {

bool can_lower_nice() { return geteuid() == 0; }

TEST(ThreadPriorityTest, NiceAtLeastRaisesTheThreadsNiceForItsScopeOnly) {
  if (!can_lower_nice()) {
    if (getenv("CI")) FAIL() << "CI runs the unit tests as root";
    GTEST_SKIP() << "lowering a thread's nice needs CAP_SYS_NICE (root)";
  }
  std::thread([] {
    ASSERT_TRUE(set_current_thread_nice(-5)) << "root may lower its nice";
    EXPECT_EQ(current_thread_nice(), -5);
    {
      NiceAtLeast normal(0);
      EXPECT_EQ(current_thread_nice(), 0);
    }
    EXPECT_EQ(current_thread_nice(), -5) << "put back after the scope";
    {
      NiceAtLeast above(-8);  // already above the floor: left alone
      EXPECT_EQ(current_thread_nice(), -5);
    }
    EXPECT_EQ(current_thread_nice(), -5);
  }).join();
}

TEST(ThreadPriorityTest, SettingANiceOnlyChangesTheCallingThread) {
  const int before = current_thread_nice();
  std::thread([] { ASSERT_TRUE(set_current_thread_nice(5)); EXPECT_EQ(current_thread_nice(), 5); }).join();
  EXPECT_EQ(current_thread_nice(), before);
}

}  // namespace
}  // namespace omniprof
