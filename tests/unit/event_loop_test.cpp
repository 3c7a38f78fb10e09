// The agent's event thread without a kernel: a poll function stands in for
// ring_buffer__poll and calls dispatch() for each record, as libbpf's
// callback does. A handler that throws, a record too short, an unknown type
// and failing polls are each logged and counted, and the loop goes on.
#include <gtest/gtest.h>

#include <errno.h>
#include <poll.h>

#include <atomic>
#include <deque>
#include <stdexcept>
#include <thread>
#include <vector>

#include "agent/event_loop.h"

namespace omniprof {
namespace {

omniprof_event event(uint32_t type, uint32_t pid) {
  omniprof_event e{};
  e.type = type;
  e.pid = pid;
  return e;
}

TEST(EventLoopTest, AFailingEventIsCountedAndTheNextOneIsHandled) {
  std::vector<uint32_t> handled;
  EventLoop loop([&](const omniprof_event& e) {
    if (e.pid == 13) throw std::runtime_error("cannot read /proc/13/maps: injected");
    handled.push_back(e.pid);
  });
  std::atomic<bool> stop{false};
  // Each poll delivers one batch, as the ring buffer would; then stop.
  std::deque<std::vector<omniprof_event>> batches = {
      {event(OMNIPROF_EVENT_PROCESS_UNKNOWN, 12), event(OMNIPROF_EVENT_PROCESS_UNKNOWN, 13)},
      {event(OMNIPROF_EVENT_EXEC, 13), event(OMNIPROF_EVENT_PROCESS_UNKNOWN, 14)},
      {event(OMNIPROF_EVENT_EXIT, 14)}};
  int polls = 0;
  loop.run(
      [&](int) {
        polls++;
        if (batches.empty()) {
          stop = true;
          return 0;
        }
        for (const auto& e : batches.front()) EXPECT_EQ(loop.dispatch(&e, sizeof(e)), 0);
        int n = static_cast<int>(batches.front().size());
        batches.pop_front();
        return n;
      },
      stop);
  EXPECT_EQ(handled, (std::vector<uint32_t>{12, 14, 14}));
  EXPECT_EQ(loop.event_errors(), 2u);  // both events of pid 13
  EXPECT_EQ(loop.poll_errors(), 0u);
  EXPECT_EQ(polls, 4);
}

TEST(EventLoopTest, ShortRecordsUnknownTypesAndNonStdExceptionsAreCounted) {
  int handled = 0;
  EventLoop loop([&](const omniprof_event& e) {
    if (e.pid == 1) throw 42;
    handled++;
  });
  omniprof_event ok = event(OMNIPROF_EVENT_EXIT, 2);
  EXPECT_EQ(loop.dispatch(&ok, sizeof(ok) - 1), 0);  // truncated record
  omniprof_event unknown = event(99, 2);
  EXPECT_EQ(loop.dispatch(&unknown, sizeof(unknown)), 0);
  omniprof_event throws = event(OMNIPROF_EVENT_EXIT, 1);
  EXPECT_EQ(loop.dispatch(&throws, sizeof(throws)), 0);
  EXPECT_EQ(loop.event_errors(), 3u);
  EXPECT_EQ(handled, 0);
  EXPECT_EQ(loop.dispatch(&ok, sizeof(ok)), 0);
  EXPECT_EQ(handled, 1);
}

TEST(EventLoopTest, PollErrorsBackOffBoundedAndTheLoopGoesOn) {
  std::vector<int64_t> sleeps;
  int handled = 0;
  EventLoop loop([&](const omniprof_event&) { handled++; },
                 [&](std::chrono::milliseconds d) { sleeps.push_back(d.count()); });
  std::atomic<bool> stop{false};
  int polls = 0;
  loop.run(
      [&](int timeout_ms) {
        EXPECT_EQ(timeout_ms, EventLoop::kMaxPollTimeoutMs);
        polls++;
        if (polls <= 9) return -EIO;     // a broken buffer, for a while
        if (polls == 10) return -EINTR;  // a signal: not an error
        if (polls == 11) {
          omniprof_event e = event(OMNIPROF_EVENT_PROCESS_UNKNOWN, 5);
          loop.dispatch(&e, sizeof(e));
          return 1;
        }
        if (polls == 12) return -ENOMEM;  // after a success: back to the first back-off
        stop = true;
        return 0;
      },
      stop);
  EXPECT_EQ(loop.poll_errors(), 10u);
  EXPECT_EQ(handled, 1);
  EXPECT_EQ(sleeps, (std::vector<int64_t>{10, 20, 40, 80, 160, 320, 640, 1000, 1000, 10}));
}

// What a round lacked is posted from the main thread and handled on the
// event thread after its poll's records, in order; the poster can wait for it.
TEST(EventLoopTest, PostedRequestsAreHandledAfterThePollAndWaitedFor) {
  std::vector<uint32_t> handled;  // on the loop's thread only
  EventLoop loop([&](const omniprof_event& e) { handled.push_back(e.pid); });
  EXPECT_TRUE(loop.wait_for_posted(std::chrono::milliseconds(0)));  // nothing posted
  loop.post(event(OMNIPROF_EVENT_PROCESS_UNKNOWN, 21));
  EXPECT_FALSE(loop.wait_for_posted(std::chrono::milliseconds(10)));  // no loop runs
  std::atomic<bool> stop{false};
  std::thread thread([&] {
    loop.run(
        [&](int) {
          omniprof_event record = event(OMNIPROF_EVENT_EXEC, 20);
          if (handled.empty()) loop.dispatch(&record, sizeof(record));
          return 0;
        },
        stop);
  });
  loop.post(event(OMNIPROF_EVENT_MAPPINGS_STALE, 22));
  EXPECT_TRUE(loop.wait_for_posted(std::chrono::seconds(60)));
  stop = true;
  thread.join();
  EXPECT_EQ(handled, (std::vector<uint32_t>{20, 21, 22}));
  EXPECT_EQ(loop.event_errors(), 0u);
}

// The poll waits what the owner says is due, never longer than
// kMaxPollTimeoutMs, and the whole of that when nothing is due.
TEST(EventLoopTest, PollWaitsUntilWorkIsDueAtMostTheLongestWait) {
  EventLoop loop([](const omniprof_event&) {});
  std::atomic<bool> stop{false};
  const std::vector<int> due = {5, -1, 0, EventLoop::kMaxPollTimeoutMs + 1, 250};
  std::vector<int> timeouts;
  size_t next = 0;
  loop.run(
      [&](int timeout_ms) {
        timeouts.push_back(timeout_ms);
        if (timeouts.size() == due.size()) stop = true;
        return 0;
      },
      stop, [&] { return due[next++]; });
  EXPECT_EQ(timeouts, (std::vector<int>{5, EventLoop::kMaxPollTimeoutMs, 0, EventLoop::kMaxPollTimeoutMs, 250}));
}

// A request posted from another thread ends the poll under way (the poll
// watches wake_fd()), and so does wake() after stop is set: neither waits
// for the poll's timeout.
TEST(EventLoopTest, PostAndWakeEndThePollThroughItsEventfd) {
  std::vector<uint32_t> handled;  // on the loop's thread only
  EventLoop loop([&](const omniprof_event& e) { handled.push_back(e.pid); });
  ASSERT_GE(loop.wake_fd(), 0);
  std::atomic<bool> stop{false};
  std::atomic<int> woken_by_fd{0};
  std::thread thread([&] {
    loop.run(
        [&](int timeout_ms) {
          pollfd fd{loop.wake_fd(), POLLIN, 0};
          // Far longer than the test may take: only the eventfd ends it.
          (void)timeout_ms;
          int n = poll(&fd, 1, 120'000);
          if (n == 1) {
            woken_by_fd++;
            loop.clear_wake();
          }
          return 0;
        },
        stop, [] { return -1; });
  });
  loop.post(event(OMNIPROF_EVENT_PROCESS_UNKNOWN, 31));
  EXPECT_TRUE(loop.wait_for_posted(std::chrono::seconds(60)));
  stop = true;
  loop.wake();
  thread.join();
  EXPECT_EQ(handled, (std::vector<uint32_t>{31}));
  EXPECT_GE(woken_by_fd.load(), 1);
}

// Every type the BPF side sends reaches the handler (none is taken for an
// unknown type and dropped): TICK_DUE, which the agent's handler turns into
// a plugin tick, among them.
TEST(EventLoopTest, EveryTypeTheBpfSideSendsReachesTheHandler) {
  std::vector<uint32_t> types;
  EventLoop loop([&](const omniprof_event& e) { types.push_back(e.type); });
  for (uint32_t type : {OMNIPROF_EVENT_PROCESS_UNKNOWN, OMNIPROF_EVENT_EXEC, OMNIPROF_EVENT_EXIT,
                        OMNIPROF_EVENT_MAPPINGS_STALE, OMNIPROF_EVENT_TICK_DUE}) {
    omniprof_event record = event(type, 7);
    EXPECT_EQ(loop.dispatch(&record, sizeof(record)), 0);
  }
  EXPECT_EQ(types.size(), 5u);
  EXPECT_EQ(types.back(), static_cast<uint32_t>(OMNIPROF_EVENT_TICK_DUE));
  EXPECT_EQ(loop.event_errors(), 0u);
}

}  // namespace
}  // namespace omniprof
