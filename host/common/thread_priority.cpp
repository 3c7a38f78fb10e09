#include "common/thread_priority.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace omniprof {

int current_thread_nice() {
  errno = 0;
  // -1 is also a nice value: errno tells an error apart.
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  return errno == 0 ? nice : 0;
}

Result<void> set_current_thread_nice(int nice) {
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) == 0) return ok();
  const int error = errno;
  if (error == EACCES || error == EPERM) {
    rlimit limit{};
    const std::string now = getrlimit(RLIMIT_NICE, &limit) != 0 ? std::string("unreadable")
                            : limit.rlim_cur == RLIM_INFINITY  ? std::string("unlimited")
                                                               : fmt::format("{}", limit.rlim_cur);
    // RLIMIT_NICE holds 20 - the lowest nice it lets a thread take.
    return make_error(fmt::format("cannot set nice {}: {} (it needs CAP_SYS_NICE or an RLIMIT_NICE of at least {}, "
                                  "as systemd's LimitNICE={} sets; it is {} here)",
                                  nice, strerror(error), 20 - nice, nice, now));
  }
  return make_error(fmt::format("cannot set nice {}: {}", nice, strerror(error)));
}

NiceAtLeast::NiceAtLeast(int floor) : before_(current_thread_nice()) {
  if (before_ < floor) changed_ = setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), floor) == 0;
}

NiceAtLeast::~NiceAtLeast() {
  if (changed_) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), before_);
}

}  // namespace omniprof
