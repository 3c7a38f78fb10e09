// RoundOutput: where `omniprof run` writes one profile per round, in
// output.directory. A directory that disappeared is recreated when a round is
// written. A round that still cannot be written (permissions, disk full, the
// path now a file) is kept in memory, gzip'd, and written with the next round
// that can be, oldest first, under its own name. At most kMaxPendingRounds
// rounds wait; beyond that the oldest is dropped and counted. Every failure
// is logged with the path and the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "profile/profile_builder.h"

namespace omniprof {

struct RoundOutputStats {
  uint64_t written = 0;
  uint64_t write_failures = 0;  // attempts that failed (a kept round retried counts each time)
  uint64_t dropped = 0;         // rounds lost: too many waiting, or not encodable
  uint64_t pending = 0;         // rounds waiting in memory now
};

class RoundOutput {
 public:
  // Five rounds: five minutes of profiles at the default round_seconds
  // (60), a few MiB of memory at most.
  static constexpr size_t kMaxPendingRounds = 5;

  explicit RoundOutput(std::string directory, size_t max_pending = kMaxPendingRounds);

  // Queues this round's profile as `file_name` and writes every round
  // waiting. Returns the paths written now, oldest first.
  std::vector<std::string> write(const std::string& file_name, const ProfileBuilder& profile);
  // Writes the rounds waiting, if it can (at exit).
  std::vector<std::string> flush();

  RoundOutputStats stats() const;
  const std::string& directory() const { return directory_; }

 private:
  struct Pending {
    std::string file_name;
    std::string gzipped;
  };

  std::string directory_;
  size_t max_pending_;
  std::deque<Pending> pending_;
  RoundOutputStats stats_;
};

}  // namespace omniprof
