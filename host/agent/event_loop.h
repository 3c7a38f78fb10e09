// EventLoop: the agent's event thread. Polls the `events` ring buffer and
// hands each record (a process BPF does not know, an exec, an exit, stale
// mappings) to the process tracker; so it does with the requests the rest of
// the agent posts (what a round lacked), after each poll. It never dies: a record that cannot be
// handled (too short, or its handler throws) is logged with its type and pid
// and counted; a poll that fails (other than EINTR) is logged and counted and
// retried after a back-off that doubles up to kMaxBackoff.
//
// It sleeps until something comes: a record, a posted request or stop (both
// write wake_fd(), which the poll watches), or the time its owner says work
// is due without a record (the process tracker's held views); at the latest
// after kMaxPollTimeoutMs. Each source wakes it by itself (the events ring;
// the mapping records at once; an exec's name record, which wakes nobody,
// always has the exec's mapping records after it), so that limit only bounds
// a wake-up lost to a kernel bug: an idle machine wakes it every ten seconds,
// not every second (each wake-up cost it 0.14 ms of CPU in issue 19's scene
// on this project's VM: 127 -> 21 wake-ups, 18.8 -> 3.8 ms per 120 s).
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
#include "omniprof/support/unique_fd.h"

namespace omniprof {

class EventLoop {
 public:
  using Handler = std::function<void(const omniprof_event&)>;
  // Waits up to timeout_ms for records, calling dispatch() for each; returns
  // how many it handled or a negative errno (ring_buffer__poll's contract).
  using Poll = std::function<int(int timeout_ms)>;
  using Sleep = std::function<void(std::chrono::milliseconds)>;
  // Milliseconds until work is due that no record brings (-1: none).
  using NextDue = std::function<int()>;

  explicit EventLoop(Handler handler, Sleep sleep = default_sleep);

  // One record, as the ring buffer's callback. Never throws: libbpf is C,
  // an exception must not unwind through it. Always returns 0 (go on).
  int dispatch(const void* data, size_t size) noexcept;
  // Polls until `stop` is set and wake() called, each poll waiting what
  // `next_due` says (none given: kMaxPollTimeoutMs), at most
  // kMaxPollTimeoutMs.
  void run(const Poll& poll, const std::atomic<bool>& stop, const NextDue& next_due = {});
  // A request handled as a record is, on the event thread, after its next
  // poll, which it ends. Safe from any thread.
  void post(const omniprof_event& request);
  // Ends the poll under way (after setting `stop`, say). Safe from any thread.
  void wake();
  // Readable once wake() or post() was called; the poll must watch it and
  // call clear_wake() when it is. -1 if the eventfd could not be made (the
  // poll then waits at most kNoWakeFdTimeoutMs).
  int wake_fd() const { return wake_fd_.get(); }
  void clear_wake();
  // Waits until every request posted before the call is handled; false if
  // `timeout` passed first.
  bool wait_for_posted(std::chrono::milliseconds timeout);

  uint64_t event_errors() const { return event_errors_.load(); }
  uint64_t poll_errors() const { return poll_errors_.load(); }

  static constexpr int kMaxPollTimeoutMs = 10000;
  static constexpr int kNoWakeFdTimeoutMs = 100;
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
  UniqueFd wake_fd_;
  std::mutex posted_mutex_;
  std::condition_variable posted_handled_;
  std::vector<omniprof_event> posted_;  // under posted_mutex_
  uint64_t posted_count_ = 0;           // under posted_mutex_
  uint64_t handled_count_ = 0;          // under posted_mutex_
};

}  // namespace omniprof
