#include "agent/records_pacing.h"

namespace omniprof {

void RecordsPacing::read(Clock::time_point now, size_t records) {
  if (const auto elapsed = now - window_start_; elapsed >= kWindow) {
    // The window that ended decides, at its rate: a read long after it (a
    // quiet machine's next record) spreads its records over all that time.
    const size_t threshold = storm_ ? kStormLeaveRecords : kStormEnterRecords;
    storm_ = static_cast<double>(window_records_) * static_cast<double>(kWindow.count()) >=
             static_cast<double>(threshold) *
                 std::chrono::duration<double, std::milli>(elapsed).count();
    window_start_ = now;
    window_records_ = 0;
  }
  window_records_ += records;
  last_read_ = now;
}

}  // namespace omniprof
