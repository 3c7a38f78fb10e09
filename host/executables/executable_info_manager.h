// ExecutableInfoManager: one entry per executable file (by FileID), however
// many processes map it, with a reference count per file. The first
// reference asks every plugin that keeps per-executable data (the native
// plugin's unwind table) to load it; the last one going away unloads it. A
// file that cannot be loaded now (deleted, its container gone, maps full)
// is deferred and retried later with backoff, not lost and not retried in a
// busy loop. A file that can never be loaded (OMNIPROF_ERR_TOO_LARGE: its
// table can never fit) is a permanent failure: logged once, counted, never
// retried and never a reason to evict others, for as long as processes map
// it (a changed file has another FileID, so it is a new entry). The role
// ExecutableInfoManager plays in the OpenTelemetry profiler (seed 001).
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "omniprof/support/result.h"
#include "omniprof/plugin.h"

namespace omniprof {

class PluginHost;

// Whoever keeps per-executable data: the plugins with load_executable hooks
// in the agent, a fake in tests.
class ExecutableLoader {
 public:
  virtual ~ExecutableLoader() = default;
  // OMNIPROF_OK, OMNIPROF_ERR_NO_SPACE (room may be made), OMNIPROF_ERR_TOO_LARGE
  // (permanent), or another error; `error` says why. With OMNIPROF_OK, a
  // non-empty `error` says what of the file was left out (a partial load).
  virtual omniprof_status load(uint64_t file_id, const std::string& path, std::string& error) = 0;
  virtual void unload(uint64_t file_id) = 0;
};

// Every loaded plugin that has load_executable/unload_executable hooks. A
// file is loaded when all of them hold it; a failure unloads it from those
// that took it, so a retry starts clean.
class PluginExecutableLoader : public ExecutableLoader {
 public:
  explicit PluginExecutableLoader(PluginHost& plugins) : plugins_(plugins) {}
  omniprof_status load(uint64_t file_id, const std::string& path, std::string& error) override;
  void unload(uint64_t file_id) override;

 private:
  PluginHost& plugins_;
};

struct ExecutableStats {
  uint64_t loaded = 0;      // files whose data every plugin holds
  uint64_t deferred = 0;    // files waiting for a retry now
  uint64_t load_failures = 0;
  uint64_t no_space = 0;    // loads refused because a map was full
  uint64_t unloaded = 0;
  uint64_t evicted = 0;     // unloaded to make room although still mapped
  uint64_t permanent_failures = 0;  // files that can never be loaded (OMNIPROF_ERR_TOO_LARGE): not retried
  uint64_t partial_loads = 0;       // loads a plugin reported parts left out of (malformed FDEs)
};

class ExecutableInfoManager {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ExecutableInfoManager(ExecutableLoader& loader) : loader_(loader) {}

  // A process maps `path` (reachable from the host), whose id is `file_id`.
  // `keep_alive` (e.g. the OpenExecutable behind a /proc/self/fd path) is
  // held as long as the entry, so that `path` still opens the file for a
  // deferred retry or a reload after the process that gave it is gone. An
  // entry not loaded yet takes the newest path and keep_alive. `name` (the
  // path as the process sees it) is what log lines call the file.
  void add_or_inc_ref(uint64_t file_id, const std::string& path,
                      std::shared_ptr<const void> keep_alive = nullptr, const std::string& name = "");
  // A process that mapped `file_id` is gone or replaced its mappings.
  void remove_or_dec_ref(uint64_t file_id);
  // Retries deferred files whose backoff has passed. Called once per drain.
  void retry_deferred(Clock::time_point now = Clock::now());
  // A sample had a frame in this executable. Space runs out: executables no
  // process has sampled for kEvictAfterIdle make room (their processes fall
  // back to frame pointers) and come back when sampled again.
  void mark_sampled(uint64_t file_id, Clock::time_point now = Clock::now());

  size_t references(uint64_t file_id) const;
  bool is_loaded(uint64_t file_id) const;
  ExecutableStats stats() const;

  static constexpr std::chrono::seconds kFirstRetry{2};
  static constexpr std::chrono::seconds kMaxRetry{120};
  static constexpr std::chrono::seconds kEvictAfterIdle{60};

 private:
  struct Entry {
    std::string path;
    std::shared_ptr<const void> keep_alive;  // what keeps `path` readable
    std::string name;                        // for logs: "NAME (PATH)", or the path
    size_t references = 0;
    bool loaded = false;
    Clock::time_point next_retry{};
    std::chrono::seconds backoff{0};
    std::string last_error;
    Clock::time_point last_sampled{};  // or loaded, whichever is later
    bool evicted = false;              // waits to be sampled again, not on a timer
    bool permanent_failure = false;    // can never be loaded: never retried
  };
  // Not loaded, and waiting for a retry on a timer.
  static bool waits_for_retry(const Entry& entry) {
    return !entry.loaded && !entry.evicted && !entry.permanent_failure && entry.references > 0;
  }
  bool load(uint64_t file_id, Entry& entry, Clock::time_point now);
  // Unloads the executable sampled longest ago, if it has been idle for
  // kEvictAfterIdle. False when there is none.
  bool evict_one(uint64_t for_file_id, Clock::time_point now);

  ExecutableLoader& loader_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Entry> entries_;
  ExecutableStats stats_;
};

}  // namespace omniprof
