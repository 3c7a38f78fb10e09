// EventLoop: the agent's event thread. Polls the `events` ring buffer and
// hands each record (a process BPF does not know, an exec, an exit, stale
// mappings) to the process tracker. It never dies: a record that cannot be
// handled (too short, or its handler throws) is logged with its type and pid
// and counted; a poll that fails (other than EINTR) is logged and counted and
// retried after a back-off that doubles up to kMaxBackoff.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

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

  uint64_t event_errors() const { return event_errors_.load(); }
  uint64_t poll_errors() const { return poll_errors_.load(); }

  static constexpr int kPollTimeoutMs = 100;
  static constexpr std::chrono::milliseconds kFirstBackoff{10};
  static constexpr std::chrono::milliseconds kMaxBackoff{1000};

 private:
  static void default_sleep(std::chrono::milliseconds duration);

  Handler handler_;
  Sleep sleep_;
  std::atomic<uint64_t> event_errors_{0};
  std::atomic<uint64_t> poll_errors_{0};
};

}  // namespace omniprof
