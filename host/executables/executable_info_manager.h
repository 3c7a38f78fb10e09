// ExecutableInfoManager: one entry per executable file (by FileID), however
// many processes map it, with a reference count per file. The first
// reference asks every plugin that keeps per-executable data (the native
// plugin's unwind table) to load it. When the last one goes, a loaded file
// is kept for kKeepUnmapped (at most kMaxKeptUnmapped such files, the
// longest unmapped unloaded first; they are the first to make room when a
// map is full): a machine that runs the same short programs over and over
// (shell loops, CI jobs, cron) maps `/usr/bin/env` again milliseconds after
// its last process exited, and would otherwise rebuild its table each time,
// its first samples walking without it meanwhile. A
// file that cannot be loaded now (deleted, its container gone, maps full)
// is deferred and retried later with backoff, not lost and not retried in a
// busy loop. A file that can never be loaded (OMNIPROF_ERR_TOO_LARGE: its
// table can never fit) is a permanent failure: logged once, counted, never
// retried and never a reason to evict others, for as long as processes map
// it (a changed file has another FileID, so it is a new entry).
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/plugin.h"

namespace omniprof {

class PluginHost;
class BpfMaps;

// Whoever keeps per-executable data: the plugins with load_executable hooks
// in the agent, a fake in tests.
class ExecutableLoader {
 public:
  virtual ~ExecutableLoader() = default;
  // OMNIPROF_OK, OMNIPROF_ERR_NO_SPACE (room may be made), OMNIPROF_ERR_TOO_LARGE
  // (permanent), or another error; `error` says why. With OMNIPROF_OK, a
  // non-empty `error` says what of the file was left out (a partial load).
  virtual omniprof_status load(uint64_t file_id, const std::string& path, std::string& error) = 0;
  // The last process mapping the file is gone, whether or not a load of it
  // ever succeeded: whoever kept anything about it (a table, a
  // description) lets it go.
  virtual void unload(uint64_t file_id) = 0;
  // The file's loaded data goes although processes still map it (evicted to
  // make room, or another plugin's load of it failed): only what load()
  // made goes. By default the same as unload().
  virtual void evict(uint64_t file_id) { unload(file_id); }
  // Tell the BPF walker that the file's table is being built / no longer is
  // (BpfMaps::mark_unwind_table_building): walks that meet it meanwhile are
  // counted apart. Nothing to tell by default (tests, no BPF).
  virtual void mark_building(uint64_t /*file_id*/) {}
  virtual void clear_building(uint64_t /*file_id*/) {}
};

// Every loaded plugin. A file is loaded when all plugins with a
// load_executable hook hold it; a failure evicts it from those that took
// it, so a retry starts clean. Eviction reaches only plugins with a
// load_executable hook; the last reference going reaches every plugin (its
// describe_file description goes too).
class PluginExecutableLoader : public ExecutableLoader {
 public:
  // `maps`: where the walker learns of tables being built (null: nowhere).
  PluginExecutableLoader(PluginHost& plugins, BpfMaps* maps) : plugins_(plugins), maps_(maps) {}
  omniprof_status load(uint64_t file_id, const std::string& path, std::string& error) override;
  void unload(uint64_t file_id) override;
  void evict(uint64_t file_id) override;
  void mark_building(uint64_t file_id) override;
  void clear_building(uint64_t file_id) override;

 private:
  PluginHost& plugins_;
  BpfMaps* maps_;
};

struct ExecutableStats {
  uint64_t loaded = 0;      // files whose data every plugin holds
  uint64_t deferred = 0;    // files waiting for a retry now
  uint64_t load_failures = 0;
  uint64_t no_space = 0;    // loads refused because a map was full
  uint64_t unloaded = 0;
  uint64_t evicted = 0;     // unloaded to make room although still mapped
  uint64_t kept_unmapped = 0;  // loaded files no process maps now, kept for the next one (a gauge)
  uint64_t reused = 0;      // mappings of a kept file: no load needed
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

  // add_or_inc_ref of a whole process, in two steps, so that the process's
  // mappings can be published between them (ProcessTracker::publish): walks
  // of it meanwhile use every table already stored and are counted where
  // they meet one being built, instead of walking by frame pointers alone.
  struct Reference {
    uint64_t file_id = 0;
    std::string path;
    std::shared_ptr<const void> keep_alive;
    std::string name;
  };
  // Takes one reference per file; each file seen for the first time is
  // marked as being built (ExecutableLoader::mark_building) and returned.
  std::vector<uint64_t> add_refs(const std::vector<Reference>& references);
  // Loads the files add_refs returned (those not loaded since).
  void load_referenced(const std::vector<uint64_t>& file_ids);
  // A process that mapped `file_id` is gone or replaced its mappings. True
  // when that was its last reference to a loaded file: kept for
  // kKeepUnmapped (unloaded at once if it was not loaded).
  bool remove_or_dec_ref(uint64_t file_id, Clock::time_point now = Clock::now());
  // Retries deferred files whose backoff has passed and unloads the files
  // kept unmapped for kKeepUnmapped. Called at each of the main thread's
  // looks at the maps, before each drain and at each round's end; does
  // nothing while a load holds the lock (never waits for a build).
  void retry_deferred(Clock::time_point now = Clock::now());
  // When retry_deferred next has something to do; min() when it does not
  // know yet (entries changed since its last scan). Never waits for a build.
  Clock::time_point retry_due() const { return scan_due_.load(); }
  // Called (under the lock, from the thread whose load failed) when a load
  // is deferred, so that whoever calls retry_deferred looks at retry_due()
  // again; set before any load.
  void set_retry_scheduled(std::function<void()> hook) { retry_scheduled_ = std::move(hook); }
  // Unloads every file kept unmapped now (the agent stops).
  void unload_unmapped();
  // A sample had a frame in this executable. Space runs out: executables no
  // process has sampled for kEvictAfterIdle make room (their processes fall
  // back to frame pointers) and come back when sampled again. Never waits
  // for a build: noted under status_mutex_, applied at the next retry or
  // eviction.
  void mark_sampled(uint64_t file_id, Clock::time_point now = Clock::now());

  size_t references(uint64_t file_id) const;
  bool is_loaded(uint64_t file_id) const;
  // A load of the file has ended since its first reference (stored, or
  // failed and logged): nothing more to wait for at start-up. Does not wait
  // for a load in progress (unlike the calls above, which hold the lock a
  // load holds).
  bool settled(uint64_t file_id) const;
  // Some process holds a reference to the file. Does not wait for a load
  // either: a file the start-up scan found whose processes all exited before
  // they were published has none, and nothing to wait for.
  bool referenced(uint64_t file_id) const;
  // The file whose table is being built now, by the name its process maps
  // it under ("" when none), for progress lines.
  std::string building() const;
  ExecutableStats stats() const;

  static constexpr std::chrono::seconds kFirstRetry{2};
  static constexpr std::chrono::seconds kMaxRetry{120};
  static constexpr std::chrono::seconds kEvictAfterIdle{60};
  static constexpr std::chrono::seconds kKeepUnmapped{60};
  static constexpr size_t kMaxKeptUnmapped = 256;

 private:
  struct Entry {
    std::string path;
    std::shared_ptr<const void> keep_alive;  // what keeps `path` readable
    std::string name;                        // for logs: "NAME (PATH)", or the path
    std::string mapped_name;                 // NAME (as the process maps it), or the path
    size_t references = 0;
    bool loaded = false;
    Clock::time_point next_retry{};
    std::chrono::seconds backoff{0};
    std::string last_error;
    Clock::time_point last_sampled{};  // or loaded, whichever is later
    bool evicted = false;              // waits to be sampled again, not on a timer
    bool permanent_failure = false;    // can never be loaded: never retried
    bool first_load_pending = false;   // add_refs took it; load_referenced loads it, not retry_deferred
    Clock::time_point unmapped_since{};  // references fell to 0 (kept while loaded)
  };
  // Loaded, mapped by no process: kept for the next one.
  static bool kept_unmapped(const Entry& entry) { return entry.references == 0 && entry.loaded; }
  // Not loaded, and waiting for a retry on a timer.
  static bool waits_for_retry(const Entry& entry) {
    return !entry.loaded && !entry.evicted && !entry.permanent_failure && !entry.first_load_pending &&
           entry.references > 0;
  }
  bool load(uint64_t file_id, Entry& entry, Clock::time_point now);
  // Unloads a file kept unmapped (the one unmapped longest), else the
  // executable sampled longest ago if it has been idle for kEvictAfterIdle.
  // False when there is none.
  bool evict_one(uint64_t for_file_id, Clock::time_point now);
  // Unloads a file no process maps (every plugin lets go of it); the entry
  // stays, unloaded and unreferenced, for erase_unreferenced_locked (the
  // caller may be iterating entries_).
  void unload_unmapped_locked(uint64_t file_id, Entry& entry, std::string_view why);
  // The file kept unmapped longest; entries_.end() when none is kept.
  std::unordered_map<uint64_t, Entry>::iterator longest_unmapped_locked();
  // Erases the entries no process references that are not kept loaded.
  void erase_unreferenced_locked();

  // Takes one reference under mutex_; true when the file needs its first load.
  bool add_ref_locked(const Reference& reference);
  // Applies the marks mark_sampled noted; the caller holds mutex_.
  void apply_sampled_locked();

  ExecutableLoader& loader_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Entry> entries_;
  // When retry_deferred next has anything to do (a kept file's time is up,
  // a retry is due): a walk over every entry at each call was a visible
  // part of an idle agent's CPU. min() after any change to entries_, which
  // may make one due sooner. Written under mutex_; read without it by
  // retry_due().
  std::atomic<Clock::time_point> scan_due_{Clock::time_point::min()};
  std::function<void()> retry_scheduled_;
  ExecutableStats stats_;  // kept_unmapped counts entries where kept_unmapped() holds
  // Held only briefly (never across a load): what settled() and building() read.
  mutable std::mutex status_mutex_;
  std::unordered_set<uint64_t> settled_;
  std::unordered_set<uint64_t> referenced_;  // the keys of entries_
  std::unordered_map<uint64_t, Clock::time_point> sampled_;  // mark_sampled's, not applied yet
  std::string building_;
};

}  // namespace omniprof
