// When the event thread reads the kernel's process records: at once, or, in a
// storm of them, on a short clock. Each executable mmap wakes the event thread
// (process_records.h: a new mapping is wanted in process_info before the
// process's next sample), and an exec brings four of them in a millisecond
// (its executable, ld.so, the vDSO, then libc from ld.so): a machine starting
// hundreds of processes a second woke the thread about a thousand times a
// second, each wake-up reading a record or two and publishing the same process
// again, and the wake-ups alone were a third of the agent's CPU there
// (bench/process_churn, perf). So once the records of a window pass a storm's rate,
// the thread stops waiting on them and reads whatever came every
// kStormReadInterval instead: one sleep per interval however many records,
// and each process published once per read with all its mappings so far.
// Under the leaving rate it waits on them again. A machine starting a process
// now and then is read at each record as before; a storm trades at most
// kStormReadInterval more between a mapping and process_info for a fraction
// of the wake-ups.
#ifndef OMNIPROF_HOST_AGENT_RECORDS_PACING_H
#define OMNIPROF_HOST_AGENT_RECORDS_PACING_H

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace omniprof {

class RecordsPacing {
 public:
  using Clock = std::chrono::steady_clock;

  // The rates are records (forks, execs, mmaps, exits) per kWindow: a process
  // started by a shell brings about seven, a Python importing its extension
  // modules a few dozen at once. Two thresholds, so that a rate near one does
  // not switch at every window.
  static constexpr std::chrono::milliseconds kWindow{100};
  static constexpr size_t kStormEnterRecords = 50;  // 500 a second
  static constexpr size_t kStormLeaveRecords = 20;  // 200 a second
  static constexpr std::chrono::microseconds kStormReadInterval{1000};

  // The records were read at `now` (`records` of them, maybe none).
  void read(Clock::time_point now, size_t records);
  // Whether the thread reads on the clock rather than at each record.
  bool storm() const { return storm_; }
  // When the next read on the clock is due (storm() only).
  Clock::time_point next_read_at() const { return last_read_ + kStormReadInterval; }

 private:
  Clock::time_point window_start_{};
  size_t window_records_ = 0;
  Clock::time_point last_read_{};
  bool storm_ = false;
};

}  // namespace omniprof

#endif  // OMNIPROF_HOST_AGENT_RECORDS_PACING_H
