#include "export/exporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "log/logger.h"

namespace omniprof {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kDropLogInterval = std::chrono::minutes(1);

const char* reason_text(int reason) {
  static const char* const kTexts[] = {"the queue was full", "the server rejected them",
                                       "retries ran out", "the agent stopped before they were sent",
                                       "they could not be encoded"};
  return kTexts[reason];
}

}  // namespace

std::vector<std::pair<std::string, uint64_t>> exporter_stat_lines(const std::string& prefix, const ExporterStats& s) {
  std::vector<std::pair<std::string, uint64_t>> lines = {
      {"rounds_sent", s.rounds_sent},
      {"payloads_sent", s.payloads_sent},
      {"bytes_sent", s.bytes_sent},
      {"send_failures", s.send_failures},
      {"retries", s.retries},
      {"rejected_profiles", s.rejected_items},
      {"queue_depth", s.queue_depth},
      {"dropped_queue_full", s.dropped_queue_full},
      {"dropped_rejected", s.dropped_rejected},
      {"dropped_retries_exhausted", s.dropped_retries_exhausted},
      {"dropped_shutdown", s.dropped_shutdown},
      {"dropped_not_encodable", s.dropped_not_encodable},
  };
  for (auto& line : lines) line.first = prefix + "." + line.first;
  return lines;
}

Exporter::Exporter(std::unique_ptr<ExportDestination> destination, ExporterSettings settings)
    : destination_(std::move(destination)),
      settings_(settings),
      name_(destination_->name()),
      thread_([this] { run(); }) {}

Exporter::~Exporter() { shutdown(milliseconds(0)); }

void Exporter::submit(const ProfileBuilder& round) {
  Result<std::vector<ExportPayload>> payloads = destination_->encode(round);
  std::lock_guard lock(mutex_);
  if (stopping_) {
    drop(DropReason::kShutdown, 1, "submitted after shutdown");
    return;
  }
  if (!payloads) {
    drop(DropReason::kNotEncodable, 1, payloads.error().message);
    return;
  }
  if (payloads->empty()) return;  // nothing to say (a round without samples, for Pyroscope)
  while (queue_.size() >= std::max<size_t>(settings_.queue_rounds, 1)) {
    // The oldest goes: a backend that comes back gets the recent past. The
    // front may be in the middle of a send; the sender notices it is gone.
    queue_.pop_front();
    drop(DropReason::kQueueFull, 1, fmt::format("{} rounds were waiting", settings_.queue_rounds));
  }
  queue_.push_back(Round{std::move(*payloads), Clock::now()});
  stats_.queue_depth = queue_.size();
  wakeup_.notify_all();
}

void Exporter::shutdown(milliseconds wait) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
      deadline_ = Clock::now() + wait;
    }
    wakeup_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

ExporterStats Exporter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Exporter::drop(DropReason reason, uint64_t rounds, const std::string& why) {
  switch (reason) {
    case DropReason::kQueueFull: stats_.dropped_queue_full += rounds; break;
    case DropReason::kRejected: stats_.dropped_rejected += rounds; break;
    case DropReason::kRetriesExhausted: stats_.dropped_retries_exhausted += rounds; break;
    case DropReason::kShutdown: stats_.dropped_shutdown += rounds; break;
    case DropReason::kNotEncodable: stats_.dropped_not_encodable += rounds; break;
  }
  DropLog& entry = drop_logs_[reason];
  entry.unreported += rounds;
  const auto now = Clock::now();
  // A stop's drops are said at once (there is no later line to say them).
  if (reason != DropReason::kShutdown && entry.last != Clock::time_point{} && now - entry.last < kDropLogInterval) return;
  log().warn("export to {}: {} round(s) dropped because {} ({}){}", name_, entry.unreported,
             reason_text(static_cast<int>(reason)), why,
             entry.last == Clock::time_point{} || reason == DropReason::kShutdown
                 ? ""
                 : "; counted since the last such line, at most one a minute");
  entry.unreported = 0;
  entry.last = now;
}

bool Exporter::wait_before_retry(std::unique_lock<std::mutex>& lock, milliseconds delay) {
  const auto now = Clock::now();
  auto until = now + delay;
  // While stopping, a sleep takes at most half the time left (and at least
  // kStopRetryGap, so a backend that refuses at once gets a handful of
  // attempts, not a spin): the attempts go on until the deadline instead of
  // one long sleep running past it with the rounds still queued.
  if (stopping_) until = std::min(until, now + std::max<Clock::duration>((deadline_ - now) / 2, kStopRetryGap));
  if (until >= deadline_) return false;
  // A stop arriving during the sleep ends it: the rounds get an attempt now
  // (the backend may well be back), then the capped sleeps above.
  const bool stopping_before = stopping_;
  wakeup_.wait_until(lock, until, [&] { return stopping_ != stopping_before; });
  return Clock::now() < deadline_;
}

milliseconds Exporter::backoff(int attempt, milliseconds retry_after) {
  // Exponential, with jitter in [0.5, 1.5) of the step so agents that lost
  // the same backend do not come back in step.
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  double step = static_cast<double>(settings_.backoff_initial.count());
  for (int i = 1; i < attempt && step < static_cast<double>(settings_.backoff_max.count()); ++i) step *= 2;
  step = std::min(step, static_cast<double>(settings_.backoff_max.count()));
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  auto delay = milliseconds(static_cast<int64_t>(step * jitter(generator)));
  return std::max(delay, retry_after);
}

void Exporter::run() {
  std::unique_lock lock(mutex_);
  int attempt = 0;
  while (true) {
    wakeup_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, nothing left
    if (Clock::now() >= deadline_) break;
    Round& round = queue_.front();
    if (Clock::now() - round.queued > settings_.retry_max) {
      queue_.pop_front();
      stats_.queue_depth = queue_.size();
      drop(DropReason::kRetriesExhausted, 1, fmt::format("not delivered within {} s",
                                                         std::chrono::duration_cast<std::chrono::seconds>(settings_.retry_max).count()));
      attempt = 0;
      continue;
    }
    // Send a copy: submit() may drop the front while the lock is released.
    const ExportPayload payload = round.payloads.front();
    const auto queued = round.queued;
    milliseconds timeout = settings_.timeout;
    if (stopping_) {
      timeout = std::min(timeout, std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now()));
      if (timeout.count() <= 0) break;
    }
    lock.unlock();
    SendOutcome outcome = destination_->send(payload, timeout);
    lock.lock();
    // The same round still at the front (not pushed out while sending)?
    const bool still_front = !queue_.empty() && queue_.front().queued == queued &&
                             !queue_.front().payloads.empty() && queue_.front().payloads.front() == payload;
    if (outcome.status == SendOutcome::Status::kRetryable) {
      ++stats_.send_failures;
      if (!still_front) {
        attempt = 0;
        continue;
      }
      ++attempt;
      ++stats_.retries;
      milliseconds delay = backoff(attempt, outcome.retry_after);
      if (attempt == 1) {
        log().warn("export to {}: {}; retrying in {} ms (and with backoff after that; {} round(s) waiting)", name_,
                   outcome.error, delay.count(), queue_.size());
      } else {
        log().debug("export to {}: attempt {}: {}; retrying in {} ms", name_, attempt, outcome.error, delay.count());
      }
      if (!wait_before_retry(lock, delay)) break;
      continue;
    }
    if (attempt > 0 && outcome.status == SendOutcome::Status::kSent) {
      log().info("export to {}: delivered after {} retries", name_, attempt);
    }
    attempt = 0;
    if (outcome.status == SendOutcome::Status::kRejected) {
      ++stats_.send_failures;
      if (still_front) {
        queue_.pop_front();
        drop(DropReason::kRejected, 1, outcome.error);
      }
    } else {
      stats_.bytes_sent += payload.body.size();
      ++stats_.payloads_sent;
      if (outcome.rejected_items > 0) {
        stats_.rejected_items += static_cast<uint64_t>(outcome.rejected_items);
        log().warn("export to {}: the server took the round but refused {} profile(s): {}", name_,
                   outcome.rejected_items, outcome.error.empty() ? "no reason given" : outcome.error);
      }
      if (still_front) {
        Round& front = queue_.front();
        front.payloads.erase(front.payloads.begin());
        if (front.payloads.empty()) {
          queue_.pop_front();
          ++stats_.rounds_sent;
        }
      }
    }
    stats_.queue_depth = queue_.size();
  }
  if (!queue_.empty()) {
    const uint64_t left = queue_.size();
    queue_.clear();
    stats_.queue_depth = 0;
    drop(DropReason::kShutdown, left, "the shutdown wait ran out");
  }
}

}  // namespace omniprof
