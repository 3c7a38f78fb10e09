// Exporter: delivers each round's profile to one backend (an OTLP endpoint
// over gRPC or HTTP, or Pyroscope's ingest) without ever making sampling
// wait for the network.
//
// submit() encodes the round on the caller's thread (a ProfileBuilder is not
// thread-safe) into the destination's payloads, gzip'd, and queues them as one
// entry; it never blocks on the network. The exporter's own thread sends
// entries oldest first. A send that fails with a code the protocol calls
// retryable is tried again after an exponential backoff with jitter (or the
// server's Retry-After, if longer), until it succeeds, its round has waited
// longer than retry_max, or shutdown's deadline passes. A shutdown during a
// backoff tries at once, then at most every half of the time left, so rounds
// are not lost to a sleep that outlasts the deadline. At most queue_rounds
// rounds wait; submitting one more drops the oldest. Every round lost is
// counted by why (stats()), and logged at most once a minute per reason with
// how many were lost since the last line.
//
// Threading: submit(), stats() and shutdown() may be called from any thread;
// the destination's send() runs only on the exporter's thread, its encode()
// only on submit()'s caller's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "omniprof/support/result.h"
#include "profile/profile_builder.h"

namespace omniprof {

// What a send came to.
struct SendOutcome {
  enum class Status {
    kSent,       // accepted (possibly in part: rejected_items)
    kRetryable,  // try again later (UNAVAILABLE, 503, a connection refused, ...)
    kRejected,   // the server will never take it (INVALID_ARGUMENT, 400, ...)
  };
  Status status = Status::kSent;
  std::string error;  // what the server or the transport said, for the log
  // The server's Retry-After (HTTP) or RetryInfo (gRPC); zero if none.
  std::chrono::milliseconds retry_after{0};
  // Partial success: how many profiles the server refused, and why.
  int64_t rejected_items = 0;
};

// One thing to send: the body (gzip'd) and what the destination needs to
// place it (Pyroscope's query string; OTLP needs nothing).
struct ExportPayload {
  std::string body;
  std::string query;
  friend bool operator==(const ExportPayload&, const ExportPayload&) = default;
};

// One backend: how a round is encoded for it, and how a payload is sent.
class ExportDestination {
 public:
  virtual ~ExportDestination() = default;
  // Names the backend in logs and stats ("OTLP grpc 127.0.0.1:4317").
  virtual std::string name() const = 0;
  // The round's payloads for this backend (OTLP: one request; Pyroscope:
  // one upload per service), on submit()'s thread. An error: the round cannot
  // be encoded (counted as export.dropped_not_encodable).
  virtual Result<std::vector<ExportPayload>> encode(const ProfileBuilder& round) = 0;
  // Sends one payload, waiting at most `timeout`. On the exporter's thread.
  virtual SendOutcome send(const ExportPayload& payload, std::chrono::milliseconds timeout) = 0;
};

struct ExporterSettings {
  size_t queue_rounds = 10;
  std::chrono::milliseconds timeout{10000};  // per send
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_max{30000};
  // A round still not delivered this long after it was queued is dropped.
  std::chrono::milliseconds retry_max{300000};
};

struct ExporterStats {
  uint64_t rounds_sent = 0;
  uint64_t payloads_sent = 0;
  uint64_t bytes_sent = 0;  // gzip'd bytes of the payloads delivered
  uint64_t send_failures = 0;  // attempts that failed (each retry counts)
  uint64_t retries = 0;
  uint64_t rejected_items = 0;  // profiles a partial success refused
  uint64_t queue_depth = 0;     // rounds waiting now
  // Rounds lost, by reason.
  uint64_t dropped_queue_full = 0;
  uint64_t dropped_rejected = 0;
  uint64_t dropped_retries_exhausted = 0;
  uint64_t dropped_shutdown = 0;
  uint64_t dropped_not_encodable = 0;
};

// Every figure of `stats`, named PREFIX.NAME (export.otlp.rounds_sent, ...).
std::vector<std::pair<std::string, uint64_t>> exporter_stat_lines(const std::string& prefix, const ExporterStats& stats);

class Exporter {
 public:
  Exporter(std::unique_ptr<ExportDestination> destination, ExporterSettings settings);
  // Shuts down with no wait if shutdown() was not called.
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Queues the round (never waits for the network).
  void submit(const ProfileBuilder& round);
  // Sends what is queued for at most `wait`, then stops; what is left is
  // counted in dropped_shutdown and logged. Idempotent.
  void shutdown(std::chrono::milliseconds wait);

  ExporterStats stats() const;
  const std::string& name() const { return name_; }

 private:
  struct Round {
    std::vector<ExportPayload> payloads;  // the ones not delivered yet, in order
    std::chrono::steady_clock::time_point queued;
  };
  enum class DropReason { kQueueFull, kRejected, kRetriesExhausted, kShutdown, kNotEncodable };

  static constexpr std::chrono::milliseconds kStopRetryGap{250};

  void run();
  // Under mutex_: counts the drop and logs it, at most once a minute per reason.
  void drop(DropReason reason, uint64_t rounds, const std::string& why);
  // Sleeps `delay` before the next attempt at a round (mutex_ held through
  // `lock`). A stop ends the sleep at once; while stopping, a sleep is at most
  // half the time left before the deadline. False if no attempt fits before
  // the deadline.
  bool wait_before_retry(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds delay);
  std::chrono::milliseconds backoff(int attempt, std::chrono::milliseconds retry_after);

  std::unique_ptr<ExportDestination> destination_;
  const ExporterSettings settings_;
  const std::string name_;

  mutable std::mutex mutex_;
  std::condition_variable wakeup_;
  std::deque<Round> queue_;
  ExporterStats stats_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  struct DropLog {
    std::chrono::steady_clock::time_point last{};
    uint64_t unreported = 0;
  };
  std::map<DropReason, DropLog> drop_logs_;
  std::thread thread_;
};

}  // namespace omniprof
