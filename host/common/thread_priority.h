// The calling thread's nice value (Linux: each thread has its own). The
// agent's event thread runs at a lower nice than the rest (config
// `processes.nice`): it describes a new process within the window in which
// that process's first samples are walked, and on a machine whose CPUs are
// busy a thread of nice 0 waits milliseconds for one. What that thread
// does at length, building a new file's unwind table, it does at nice 0 or
// above (NiceAtLeast), so that the lower nice never buys it more CPU than
// its quick bookkeeping.
#pragma once

#include "omniprof/support/result.h"

namespace omniprof {

// The calling thread's nice value.
int current_thread_nice();

// Sets the calling thread's nice value. Lowering it needs CAP_SYS_NICE or
// an RLIMIT_NICE that allows it (systemd: LimitNICE=): the error says so.
Result<void> set_current_thread_nice(int nice);

// Raises the calling thread's nice value to at least `floor` for its scope
// and puts it back after (raising is always allowed; putting back a value
// the thread had is, since it had the right to set it).
class NiceAtLeast {
 public:
  explicit NiceAtLeast(int floor);
  ~NiceAtLeast();
  NiceAtLeast(const NiceAtLeast&) = delete;
  NiceAtLeast& operator=(const NiceAtLeast&) = delete;

 private:
  int before_;
  bool changed_ = false;
};

}  // namespace omniprof
