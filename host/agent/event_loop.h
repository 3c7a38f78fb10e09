// EventLoop: the agent's event thread. Polls the `events` ring buffer and
// hands each record (a process BPF does not know, an exec, an exit, stale
// mappings) to the process tracker; so it does with the requests the rest of
// the agent posts (what a round lacked), after each poll. It never dies: a record that cannot be
// handled (too short, or its handler throws) is logged with its type and pid
// and counted; a poll that fails (other than EINTR) is logged and counted and
// retried after a back-off that doubles up to kMaxBackoff.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "omniprof/bpf/abi.h"

namespace omniprof {

class EventLoop {
 public:
  using Handler = std::function<void(const omniprof_event&)>;
  // Waits up to timeout_ms for records, calling dispatch() for each; returns
  // how many it handled or a negative errno (ring_buffer__poll's contract).
  using Poll = std::function<int(int timeout_ms)>;
  using Sleep = std::function<void(std::chrono::milliseconds)>;

  explicit EventLoop(Handler handler, Sleep sleep = default_sleep);

  // One record, as the ring buffer's callback. Never throws: libbpf is C,
  // an exception must not unwind through it. Always returns 0 (go on).
  int dispatch(const void* data, size_t size) noexcept;
  // Polls until `stop` is set (checked at least every kPollTimeoutMs).
  void run(const Poll& poll, const std::atomic<bool>& stop);
  // A request handled as a record is, on the event thread, after its next
  // poll. Safe from any thread.
  void post(const omniprof_event& request);
  // Waits until every request posted before the call is handled; false if
  // `timeout` passed first.
  bool wait_for_posted(std::chrono::milliseconds timeout);

  uint64_t event_errors() const { return event_errors_.load(); }
  uint64_t poll_errors() const { return poll_errors_.load(); }

  static constexpr int kPollTimeoutMs = 100;
  static constexpr std::chrono::milliseconds kFirstBackoff{10};
  static constexpr std::chrono::milliseconds kMaxBackoff{1000};

 private:
  static void default_sleep(std::chrono::milliseconds duration);
  void handle(const omniprof_event& event) noexcept;
  void handle_posted();

  Handler handler_;
  Sleep sleep_;
  std::atomic<uint64_t> event_errors_{0};
  std::atomic<uint64_t> poll_errors_{0};
  std::mutex posted_mutex_;
  std::condition_variable posted_handled_;
  std::vector<omniprof_event> posted_;  // under posted_mutex_
  uint64_t posted_count_ = 0;           // under posted_mutex_
  uint64_t handled_count_ = 0;          // under posted_mutex_
};

}  // namespace omniprof
