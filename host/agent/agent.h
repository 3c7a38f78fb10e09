// Agent: the whole profiler wired together. start() checks the machine, loads
// the host's BPF object and the plugins, describes running processes and
// attaches the sampler; collect() moves samples from BPF into the current
// round; finish_round() turns the round into a profile.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/event_loop.h"
#include "agent/drain_schedule.h"
#include "agent/profile_assembler.h"
#include "agent/records_pacing.h"
#include "agent/round_samples.h"
#include "common/install_layout.h"
#include "bpf/bpf_maps.h"
#include "bpf/map_memory.h"
#include "bpf/perf_sampler.h"
#include "omniprof/support/result.h"
#include "omniprof/support/unique_fd.h"
#include "config/config.h"
#include "executables/executable_info_manager.h"
#include "executables/file_id.h"
#include "executables/open_executables.h"
#include "plugins/plugin_host.h"
#include "process/process_tracker.h"
#include "symbolize/elf_symbolizer.h"
#include "symbolize/kernel_symbols.h"

struct ring_buffer;

namespace omniprof {

PluginHostOptions plugin_options(const Config& config, const InstallLayout& layout);

struct StatLine {
  std::string name;
  uint64_t value;
};

class Agent {
 public:
  // bpf_stats: have the kernel time our BPF programs (kernel.bpf_stats,
  // 5.8+) and report the cost per sample; it adds two clock reads per run.
  explicit Agent(Config config, bool bpf_stats = false);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  Result<void> start();
  // Detaches the perf events: no sample is taken after this returns.
  void stop_sampling();
  void stop();

  // The start-up scan (processes_->scan, on its own thread from start()):
  // how many of the files the processes found at start map have their
  // unwind tables settled (stored, or failed and logged).
  struct StartupProgress {
    bool files_known = false;  // the scan has read every process
    size_t settled = 0;
    size_t total = 0;
    bool ready = false;        // scan over, every file settled, no target being re-read
    std::string building;      // the file whose table is being built now, if any
    std::vector<std::string> waiting;  // files not settled yet (their paths as mapped)
  };
  StartupProgress startup_progress() const;
  // Drops every sample taken so far (those of the start-up, whose walks
  // may have met tables still being built) and starts the round afresh.
  void discard_round();

  // Moves the samples BPF counted since the last drain into the round.
  Result<void> collect();
  // `run` between two of its rounds: waits until a look at the maps is due
  // (BPF's OMNIPROF_EVENT_DRAIN_DUE, kExitsWaiting exited processes, a
  // deferred unwind table's retry), `deadline` (the round's end) or
  // `stop_fd` is readable, whichever comes first; then collect_when_due.
  void wait_until_collect_due(std::chrono::steady_clock::time_point deadline, int stop_fd);
  // Collects when the maps fill or exited processes wait
  // (agent/drain_schedule.h), and retries deferred unwind tables either way.
  Result<void> collect_when_due();
  // Builds the profile of the round so far (interpreter internals folded or
  // kept as the config says) and starts a new round.
  ProfileBuilder finish_round();
  // The same, one profile per entry of `fold` (true: folded, false: every
  // native frame kept), all of the same samples.
  std::vector<ProfileBuilder> finish_round(const std::vector<bool>& fold);

  uint64_t samples_in_round() const { return round_.total(); }
  // Every non-zero BPF and host counter, named.
  // Called by one thread at a time (the main thread's rounds and record's end).
  std::vector<StatLine> stats() const;
  const PluginHost& plugins() const { return *plugins_; }
  const Config& config() const { return config_; }

 private:
  // Watches the events ring buffer, and opens the process records where the
  // kernel has them (not with -p, nor when hidden); failing that, one
  // warning and the /proc path.
  Result<void> open_process_records();
  // Per CPU ring of process records: 64 KiB holds ~600 records, a burst of
  // ~100 process starts between two wake-ups of the event thread.
  static constexpr size_t kProcessRecordPages = 16;

  // What the tracker knows of the round's processes, once every one it
  // sampled has been read (or found gone), waiting at most this long.
  std::shared_ptr<const KnownProcesses> known_processes();
  static constexpr std::chrono::milliseconds kUnknownProcessesWait{60000};

  Config config_;
  InstallLayout layout_;
  std::unique_ptr<BpfMaps> maps_;
  std::unique_ptr<ElfSymbolizer> symbolizer_;
  std::unique_ptr<PluginHost> plugins_;
  // Before processes_: the tracker releases its executables when destroyed.
  FileIdCache file_ids_;
  // One descriptor per mapped executable, so files stay readable as mapped.
  std::unique_ptr<OpenExecutables> open_executables_;
  std::unique_ptr<PluginExecutableLoader> executable_loader_;
  std::unique_ptr<ExecutableInfoManager> executables_;
  std::unique_ptr<ProcessTracker> processes_;
  // Read on kernel_symbols_thread_ once sampling has begun (reading
  // /proc/kallsyms costs the kernel tens of milliseconds of formatting, which
  // the first sample need not wait for); the first round's naming waits for
  // it (use_kernel_symbols).
  std::optional<KernelSymbols> kernel_symbols_;
  std::thread kernel_symbols_thread_;
  void use_kernel_symbols();
  std::unique_ptr<ProfileAssembler> assembler_;
  std::optional<PerfSampler> sampler_;
  std::vector<bpf_link*> lifecycle_links_;
  ring_buffer* events_ = nullptr;
  // Forks, execs, executable mmaps and exits as the kernel reports them
  // (whole-machine profiling on a kernel that gives them); null: processes
  // are read from /proc when first sampled.
  std::unique_ptr<ProcessRecordStream> process_records_;
  // Returns of the event thread's epoll_wait with something ready (not its
  // timeouts), and its reads on the clock in a storm of process records
  // (RecordsPacing), which are not wake-ups by the kernel.
  std::atomic<uint64_t> event_thread_wakes_{0};
  std::atomic<uint64_t> event_thread_paced_reads_{0};
  RecordsPacing records_pacing_;  // the event thread's
  std::vector<ProcessRecord> records_drained_;  // the event thread's: each drain's records, its capacity kept
  uint64_t records_missed_at_round_end_ = 0;    // process records lost or malformed, as of the last round's end
  UniqueFd event_epoll_;  // the events ring buffer, the process records, the event loop's eventfd
  std::unique_ptr<EventLoop> event_loop_;
  std::thread event_thread_;
  // Calls each plugin's tick hook at once when a walk noted something new
  // for it (OMNIPROF_EVENT_TICK_DUE), and when the main thread's read of
  // BPF's counters (at each of its looks at the maps) finds that the full
  // events ring lost a notice (which may have been a TICK_DUE) or cannot
  // read them; every kTickInterval as well
  // the plugins that did not ask for ticks on notice only (plugin.h:
  // tick_flags). With none such loaded it has no timer: waking every second
  // was a sixth of the agent's CPU in issue 19's scene (two Python, two Ruby
  // processes at 19 Hz).
  std::thread tick_thread_;
  static constexpr std::chrono::milliseconds kTickInterval{1000};
  std::mutex tick_mutex_;
  std::condition_variable tick_wakeup_;
  // Why a tick is due (under tick_mutex_): a TICK_DUE event, read_counters().
  bool tick_due_on_request_ = false;
  bool tick_due_for_lost_events_ = false;
  std::atomic<uint64_t> ticks_on_request_{0};       // ticks a TICK_DUE event started
  std::atomic<uint64_t> ticks_for_lost_events_{0};  // ticks only read_counters() asked for
  std::atomic<uint64_t> ticks_every_second_{0};      // ticks of kTickInterval alone
  uint64_t events_lost_seen_ = 0;  // OMNIPROF_STAT_EVENTS_LOST at the last read_counters()
  // The main thread waits (wait_until_collect_due) instead of looking at
  // the maps every second, each look a wake-up and two syscalls (a fifth of
  // the agent's CPU in issue 19's scene, with nothing to find in nearly
  // every one), on two things. drain_due_: BPF's DRAIN_DUE (the host
  // object's own ring, so that no other thread's work stands between the
  // maps filling and their drain). collect_notice_fd_, an eventfd the other
  // threads write when a look is due for what they saw: kExitsWaiting
  // exited processes, a consume of the events ring large enough that it may
  // have been full (a lost TICK_DUE, read_counters), a deferred unwind table
  // scheduled.
  ring_buffer* drain_due_ = nullptr;
  UniqueFd collect_notice_fd_;
  void notify_collect();
  // Arms BPF's DRAIN_DUE at the schedule's thresholds, once the main thread
  // waits for it (`run`; `record` drains every second); when that fails the
  // main thread looks every kLookIntervalWithoutNotices instead.
  void arm_drain_notice();
  bool waits_on_drain_notices_ = false;
  bool drain_notices_armed_ = false;
  bool drain_notice_tried_ = false;
  static constexpr std::chrono::milliseconds kLookIntervalWithoutNotices{1000};
  // A deferred table's retry (ExecutableInfoManager::retry_due) is looked
  // for at most this often: while a build holds its lock a retry waits.
  static constexpr std::chrono::milliseconds kShortestRetryWait{1000};
  // A consume of at least this many events: the ring (256 KiB, 24 bytes a
  // record) may have been full, and a TICK_DUE lost.
  static constexpr int kEventsRingMayHaveFilled = 2048;
  static constexpr std::chrono::milliseconds kExitsNoticeInterval{1000};
  std::chrono::steady_clock::time_point exits_noticed_at_{};  // the event thread's
  std::atomic<uint64_t> drain_notices_{0};  // DRAIN_DUE events read (drain_due_)
  uint64_t collect_looks_ = 0;              // collect_when_due's looks at the maps
  void request_tick(bool on_request);
  std::atomic<bool> stopping_{false};
  // host.bpf_map_bytes, as last read (stats()), when, and with how many
  // unwind shards then.
  mutable uint64_t map_bytes_ = 0;
  mutable std::chrono::steady_clock::time_point map_bytes_read_at_{};
  mutable uint32_t map_bytes_shards_ = 0;
  mutable BpfMapMemory map_memory_;
  static constexpr std::chrono::seconds kMapBytesRefresh{60};
  // The start-up scan runs here, so that record can say how far it is and
  // bound its wait (startup.unwind_tables_wait_seconds).
  std::thread startup_scan_thread_;
  std::atomic<bool> startup_scan_done_{false};
  mutable std::mutex startup_mutex_;
  std::vector<ProcessTracker::ScannedFile> startup_files_;  // under startup_mutex_
  bool startup_files_known_ = false;                        // under startup_mutex_
  RoundSamples round_;
  int64_t round_start_mono_ns_ = 0;
  uint64_t drain_errors_ = 0;
  uint64_t drains_ = 0;
  // Drains collect_when_due made before the round's end, by reason.
  uint64_t drains_for_filling_maps_ = 0;
  uint64_t drains_for_exits_ = 0;
  uint64_t drains_for_unreadable_counters_ = 0;
  // BPF's running totals of what it added to the maps, read before a drain
  // and at each of collect_when_due's looks; with them, whether the events
  // ring lost a notice since the last: then (or when the counters cannot be
  // read) the plugins' tick is asked for.
  Result<MapInflow> read_counters();
  // collect()'s work, given the totals read just before it (the schedule's
  // new starting point; an error keeps the previous one).
  Result<void> drain(const Result<MapInflow>& inflow);
  std::optional<DrainSchedule> drain_schedule_;  // set by start()
  SampleTimeStats sample_time_stats_;
  bool bpf_stats_ = false;
  UniqueFd bpf_stats_fd_;
};

}  // namespace omniprof
