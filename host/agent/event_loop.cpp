#include "agent/event_loop.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

#include "log/logger.h"

namespace omniprof {

namespace {

const char* event_type_name(uint32_t type) {
  switch (type) {
    case OMNIPROF_EVENT_PROCESS_UNKNOWN: return "process_unknown";
    case OMNIPROF_EVENT_EXEC: return "exec";
    case OMNIPROF_EVENT_EXIT: return "exit";
    case OMNIPROF_EVENT_MAPPINGS_STALE: return "mappings_stale";
    case OMNIPROF_EVENT_TICK_DUE: return "tick_due";
    case OMNIPROF_EVENT_DRAIN_DUE: return "drain_due";
    default: return nullptr;
  }
}

}  // namespace

EventLoop::EventLoop(Handler handler, Sleep sleep)
    : handler_(std::move(handler)), sleep_(std::move(sleep)), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!wake_fd_.valid()) {
    log().warn("event thread: cannot make its eventfd ({}); it polls every {} ms", strerror(errno),
               kNoWakeFdTimeoutMs);
  }
}

void EventLoop::wake() {
  if (!wake_fd_.valid()) return;
  uint64_t one = 1;
  // EAGAIN: the counter is full, so the poll is woken already.
  (void)!write(wake_fd_.get(), &one, sizeof(one));
}

void EventLoop::clear_wake() {
  if (!wake_fd_.valid()) return;
  uint64_t count = 0;
  (void)!read(wake_fd_.get(), &count, sizeof(count));
}

void EventLoop::default_sleep(std::chrono::milliseconds duration) { std::this_thread::sleep_for(duration); }

int EventLoop::dispatch(const void* data, size_t size) noexcept {
  if (size < sizeof(omniprof_event)) {
    event_errors_++;
    try {
      log().error("events ring buffer: a record of {} bytes, an event is {}: ignored", size,
                  sizeof(omniprof_event));
    } catch (...) {
    }
    return 0;
  }
  omniprof_event event;
  std::memcpy(&event, data, sizeof(event));
  handle(event);
  return 0;
}

void EventLoop::handle(const omniprof_event& event) noexcept {
  if (!event_type_name(event.type)) {
    event_errors_++;
    try {
      log().error("events ring buffer: unknown event type {} for pid {}: ignored", event.type, event.pid);
    } catch (...) {
    }
    return;
  }
  const char* failure = nullptr;
  std::string reason;
  try {
    handler_(event);
    return;
  } catch (const std::exception& e) {
    try {
      reason = e.what();
    } catch (...) {
    }
  } catch (...) {
    failure = "an exception that is not a std::exception";
  }
  event_errors_++;
  try {
    log().error("event {} ({}) for pid {}: {}; the event thread goes on", event_type_name(event.type),
                event.type, event.pid, failure ? failure : reason);
  } catch (...) {
  }
}

void EventLoop::post(const omniprof_event& request) {
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    posted_.push_back(request);
    posted_count_++;
  }
  wake();
}

bool EventLoop::wait_for_posted(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(posted_mutex_);
  const uint64_t target = posted_count_;
  return posted_handled_.wait_for(lock, timeout, [&] { return handled_count_ >= target; });
}

void EventLoop::handle_posted() {
  std::vector<omniprof_event> requests;
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    requests.swap(posted_);
  }
  if (requests.empty()) return;
  for (const omniprof_event& request : requests) handle(request);
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    handled_count_ += requests.size();
  }
  posted_handled_.notify_all();
}

void EventLoop::run(const Poll& poll, const std::atomic<bool>& stop, const NextDue& next_due) {
  std::chrono::milliseconds backoff{0};
  const int longest = wake_fd_.valid() ? kMaxPollTimeoutMs : kNoWakeFdTimeoutMs;
  while (!stop.load()) {
    int timeout = next_due ? next_due() : -1;
    if (timeout < 0 || timeout > longest) timeout = longest;
    int n = poll(timeout);
    handle_posted();
    if (n >= 0 || n == -EINTR) {
      backoff = std::chrono::milliseconds(0);
      continue;
    }
    poll_errors_++;
    backoff = backoff.count() == 0 ? kFirstBackoff : std::min(backoff * 2, kMaxBackoff);
    log().error("events ring buffer: {}; polling again in {} ms", strerror(-n), backoff.count());
    sleep_(backoff);
  }
}

}  // namespace omniprof
