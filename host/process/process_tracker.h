// ProcessTracker: what the host knows of each sampled process (comm, exe,
// executable mappings, the runtime a plugin recognised), read from /proc when
// BPF first samples the process, refreshed on exec, and forgotten one round
// after exit so the samples taken before the exit are still named.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "omniprof/bpf/abi.h"
#include "process/process_records.h"
#include "process/process_identity.h"
#include "process/process_snapshot.h"

namespace omniprof {

class BpfMaps;
class PluginHost;
class ElfSymbolizer;
class ExecutableInfoManager;
class OpenExecutables;

struct ProcessTrackerStats {
  uint64_t described = 0;         // processes read from /proc
  uint64_t gone_before_read = 0;  // exited before the host could read them
  uint64_t process_info_errors = 0;  // process_info map full or write failed
  uint64_t maps_refreshes = 0;    // re-reads for addresses outside known mappings (dlopen)
  // BPF's notes of a pc in no known mapping that the records read since
  // answered, with no read of /proc (apply_records).
  uint64_t notes_answered_by_records = 0;
  // Without process records: re-reads of an exec'd process a while after
  // BPF's exec notice (kExecRereadDelays, six), for what ld.so mapped after the
  // read at the notice; and those not queued (kMaxExecRereads queued).
  uint64_t exec_rereads = 0;
  uint64_t exec_rereads_dropped = 0;
  uint64_t mappings_truncated = 0;  // processes with more than OMNIPROF_MAX_MAPPINGS executable mappings
  uint64_t unidentified_files = 0;  // mapped files that could not be opened as mapped, or read for an id
  uint64_t described_from_records = 0;  // processes described (or re-described) from the kernel's records
  uint64_t records_of_unknown = 0;  // fork/mmap records of processes known neither from records nor /proc
  uint64_t records_dropped = 0;     // records not applied: kMaxPendingRecordViews processes waiting already
  uint64_t publishes_held_for_exec = 0;  // batches whose exec was still mapping its image (held for its [vdso])
  uint64_t earlier_images_kept = 0;     // images an exec replaced, kept to name the samples taken in them
  uint64_t earlier_images_dropped = 0;  // ... not kept: kMaxEarlierImages already
  uint64_t forks_held = 0;  // forked children's views held, not published, for kForkHoldNs (most exec meanwhile)
  // Forks whose child the host did not write to process_info: the kernel
  // had copied the parent's entry, and it was the parent's latest.
  uint64_t forks_copied_in_kernel = 0;
  // From the kernel's record to process_info written, over the processes
  // described from records: the window in which a new process's samples
  // find no process_info.
  uint64_t record_delay_us_total = 0;
  uint64_t record_delay_us_max = 0;
  uint64_t record_delays_under_1ms = 0;
  uint64_t record_delays_under_10ms = 0;  // 1 ms or more
};

class ProcessTracker {
 public:
  ProcessTracker(BpfMaps* maps, PluginHost* plugins) : maps_(maps), plugins_(plugins) {}
  ~ProcessTracker();

  // Where the executables a process maps are counted, so their unwind
  // tables live exactly as long as some process maps them. Optional (unit
  // tests run without); set before the first scan.
  void track_executables(ExecutableInfoManager* executables, OpenExecutables* files,
                         ElfSymbolizer* symbolizer);
  // How each process's resource attributes are chosen (config `resource:`
  // with the agent's OTEL_* environment). Set before the first scan.
  void set_resource_settings(ResourceSettings settings);
  // Whether the kernel copies a parent's process_info to its child at each
  // fork (the omniprof_fork program is attached): then a child described
  // only by its fork record is not written again.
  void set_fork_copies(bool active) { fork_copies_ = active; }
  // How long past an exec's record its view may be held for its [vdso]
  // (kExecMappingWaitNs): tests lengthen it so that a slow machine does not
  // end the wait before they look, or shorten it to see it end.
  void set_exec_mapping_wait(std::chrono::nanoseconds wait) {
    exec_mapping_wait_ns_ = static_cast<uint64_t>(wait.count());
  }

  // A file the start-up scan found mapped: its id and its path as mapped.
  struct ScannedFile {
    uint64_t file_id;
    std::string name;
  };
  using ScanObserver = std::function<void(const std::vector<ScannedFile>&)>;
  // Describes every running process, or only `pids` when not empty: reads
  // them all, tells `on_read` (if set) the distinct files they map, then
  // publishes them one by one (building tables). Returns early once `stop`
  // is set.
  void scan(const std::vector<int32_t>& pids, const ScanObserver& on_read = {},
            const std::atomic<bool>* stop = nullptr);
  // True while an operation (describe, exec, refresh) on one of `pids` is in
  // flight: its tables may be being built.
  bool busy(const std::vector<int32_t>& pids) const;
  // A notification from BPF (ring buffer). Safe from any thread.
  void handle_event(const omniprof_event& event);
  // The known process, described now if it is not known yet; null if it is
  // gone and was never described.
  std::shared_ptr<const ProcessSnapshot> get(int32_t pid);
  // Re-reads a process's mappings when a sampled address lies outside them (a
  // library loaded with dlopen after the process was described, ld.so's
  // libraries after an exec). `noted_ns`: CLOCK_MONOTONIC when BPF noted it
  // (omniprof_event::ktime_ns), answered by any read of the mappings begun
  // since, and limited by BPF to once a second unless the host published new
  // mappings since (allow_notes_again); 0 (naming's request): at most once
  // per kRefreshInterval per process.
  std::shared_ptr<const ProcessSnapshot> refresh_for_unknown_address(int32_t pid, uint64_t noted_ns = 0);
  // The kernel's records of forks, execs, executable mmaps and exits
  // (ProcessRecordStream), in time order, on the event thread. A fork gives
  // the child its parent's mappings; an exec starts the process anew (its
  // mappings come as the kernel maps them); an mmap adds one. Each process
  // they touch is described and published once per call, from the records
  // alone (its files opened as mapped, else by path checked by device and
  // inode, so a process gone by now is still described and its samples
  // named); an exit marks it exited. Once called, exec notices from BPF
  // (OMNIPROF_EVENT_EXEC) are left to the records.
  // `read_began_ns` (CLOCK_MONOTONIC; 0: not known) is when the read of
  // these records began: every mapping made before it is in them, so a note
  // of a pc in no known mapping taken before it is answered by them
  // (refresh_for_unknown_address).
  void apply_records(const std::vector<ProcessRecord>& records, uint64_t read_began_ns = 0);
  // Milliseconds (rounded up) until there is work no record or BPF event
  // brings: a deferred facts read (kFactsDelay) or a held exec view's wait
  // (apply_records), or an exec'd process's re-read (reread_execs_due); -1
  // if none. The event thread sleeps that long at most. Event thread only.
  int ms_until_due() const;
  // Without process records: re-reads the processes exec'd
  // kExecRereadDelays ago (5 to 160 ms). The read at BPF's exec notice often comes before
  // ld.so has mapped the libraries. A walk that meets them notes it at once
  // (the notice lets BPF note again: allow_notes_again); these re-reads
  // publish them where no note can: a note lost, or read while another read
  // of the process was in flight. Event thread only.
  void reread_execs_due();
  // At most this many processes wait for the mmap records that complete
  // them (an exec seen, its first mapping not yet): a fork storm beyond it
  // drops records (counted), never grows memory without bound.
  static constexpr size_t kMaxPendingRecordViews = 4096;

  // What is known now, as one immutable value: a round is named from it.
  std::shared_ptr<const KnownProcesses> snapshot() const;
  // The processes that exec'd since the drain before last, each with its
  // current image (by_pid) and the ones it replaced (earlier_by_pid): what
  // a drain chooses its new samples' images from (RoundSamples::pin_images).
  KnownProcesses recent_images() const;
  // Called after a round's profile is built: forgets processes that exited
  // before the drain before the round's last (exit_settled_locked); one that
  // exited since is kept for the samples of it the next round drains, and
  // forgotten by a later drained() or end_round(). Those whose exit it was
  // not told of are found by asking /proc, unless `every_exit_seen`
  // (process records, none missed this round), and noted as exited now.
  void end_round(bool every_exit_seen = false);
  // Called after each drain of the BPF maps with the pids the round has
  // samples of: a process whose exit was noted before the previous drain
  // began and that has none is forgotten now, not at the round's end (a
  // machine starting hundreds of processes a second would otherwise hold
  // every one of them for a whole round).
  void drained(const std::unordered_set<int32_t>& sampled_this_round);
  // Exited processes that wait on a drain to be forgotten.
  size_t exits_awaiting_drain() const;

  ProcessTrackerStats stats() const;
  size_t size() const;

 private:
  // get() with a snapshot `read` earlier (scan), used if the process still
  // maps the same; null reads it now.
  std::shared_ptr<const ProcessSnapshot> get(int32_t pid, std::shared_ptr<ProcessSnapshot> read);
  // The executable mappings of /proc/PID/maps, sorted by start; none if gone.
  // Notes when the read began (mappings_read_ns_).
  std::optional<std::vector<ProcMapping>> executable_mappings(int32_t pid);
  std::shared_ptr<ProcessSnapshot> describe(int32_t pid);
  void resolve_executables(ProcessSnapshot& snapshot);
  // Opens and identifies the file of mappings[index] (its executables entry).
  void resolve_executable(ProcessSnapshot& snapshot, size_t index);
  // A process as the records have it so far: published by apply_records.
  struct RecordView {
    std::string comm, exe;
    // Null: read from /proc when published. An exec computes its resource
    // from its parent's facts with its own name, and reads its own later
    // (kFactsDelay): most short processes are gone by then, and reading
    // /proc at every exec of a busy machine costs more than the rest of
    // describing it.
    std::shared_ptr<const ProcessFacts> facts;
    std::shared_ptr<const ResourceAttributes> resource;
    std::string vdso_path;
    std::vector<ProcMapping> mappings;
    std::vector<ExecutableRef> executables;  // parallel; resolved[i] says if known
    std::vector<char> resolved;
    // The three above are `image`'s, not copied yet: most views taken from
    // a published process (a parent read for its fork, a child held) are
    // replaced by an exec or dropped before anything reads them.
    bool mappings_in_image = false;
    void materialize();
    bool has_mappings() const { return mappings_in_image ? !image->mappings.empty() : !mappings.empty(); }
    bool exited = false;
    // CLOCK_MONOTONIC of an exec whose image is still being mapped: set by
    // the exec's record, cleared by its [vdso] (see kExecMappingWaitNs).
    uint64_t exec_mapping_since_ns = 0;
    uint64_t first_record_ns = 0;  // CLOCK_MONOTONIC of the oldest record not yet published
    // As ProcessSnapshot's: 0 once the view changed since it was written.
    uint64_t in_process_info_since_ns = 0;
    // CLOCK_MONOTONIC of the fork of a child whose process_info entry the
    // kernel copied from its parent's current one: BPF walks it already, so
    // it is held (kForkHoldNs) rather than published, and most such
    // children exec before then, which replaces the view unpublished.
    // Cleared by anything else that changes the view.
    uint64_t fork_held_since_ns = 0;
    // The published snapshot this view still equals (its parent's for a
    // forked child): what an exec replacing it keeps for the round's
    // naming (earlier_images_). Null once the view changed.
    std::shared_ptr<const ProcessSnapshot> image;
  };
  // The view of `pid` among `views`, started from what the tracker has
  // published for it, or (`read_proc`) from /proc; null if it knows
  // nothing of it.
  RecordView* record_view(int32_t pid, std::unordered_map<int32_t, RecordView>& views, bool read_proc);
  static void add_mapping(RecordView& view, const ProcMapping& mapping);
  void publish_record_view(int32_t pid, RecordView& view);
  // Reads the facts of execs described from their parent's, once they have
  // lived kFactsDelay, into their snapshot.
  void read_deferred_facts();
  static constexpr std::chrono::milliseconds kFactsDelay{100};
  // How long a forked child's view is held unpublished (RecordView::
  // fork_held_since_ns): a shell's child execs within a millisecond or two;
  // one that does not is published after this, or at its exit.
  static constexpr uint64_t kForkHoldNs = 10'000'000;
  // At most this many replaced images are kept at once (earlier_images_).
  static constexpr size_t kMaxEarlierImages = 4096;
  // Keeps `image`, which an exec of `pid` replaced, for the drains that
  // bring the samples taken in it (recent_images).
  void keep_earlier_image(int32_t pid, std::shared_ptr<const ProcessSnapshot> image);
  // An exec maps the executable, then its interpreter (ld.so), then the
  // [vdso], all before execve returns: no sample can walk the new image
  // until the last of them, so a view is published once, at the [vdso],
  // not at each (a publish costs more than the wake-up that brought it).
  // Only once some exec has shown a [vdso] record (a kernel that sends
  // none never waits), and at most this long after the exec's record (a
  // record lost in a full ring).
  static constexpr uint64_t kExecMappingWaitNs = 2'000'000;
  uint64_t exec_mapping_wait_ns_ = kExecMappingWaitNs;
  bool execs_end_with_vdso_ = false;  // the event thread's, as the views are
  // Takes references on the snapshot's executables, writes process_info
  // (asking the plugins which runtime it is, noted in the snapshot), stores
  // it as its pid's, and only then has the tables of files new to the host
  // built: a round closing meanwhile names the process. Returns the
  // snapshot it replaced, if any.
  std::shared_ptr<ProcessSnapshot> publish(const std::shared_ptr<ProcessSnapshot>& snapshot);
  // process_info of the snapshot, with the interpreter plugin that claims it
  // (its runtime, version and interpreter files noted in the snapshot).
  void write_process_info(ProcessSnapshot& snapshot);
  // Drops the snapshot's references to its executables; returns the files
  // (as the process mapped them, comma-separated) whose last reference it
  // was, their tables kept for a while (ExecutableInfoManager::kKeepUnmapped).
  std::string release(const ProcessSnapshot& snapshot);
  // Nothing mapped or unmapped: a refresh has nothing to publish.
  static bool same_mappings(const ProcessSnapshot& a, const ProcessSnapshot& b);
  // The [vdso] is in no file: its image is copied out of the process once
  // per distinct content (one per kernel, in practice), so its unwind table
  // and symbols come from an ELF file like everything else.
  std::string vdso_copy(int32_t pid, const ProcMapping& mapping);
  void forget_in_plugins(int32_t pid);
  // Removes a process (its process_info too) and moves its snapshot to
  // `forgotten`, for let_go; caller holds mutex_.
  std::unordered_map<int32_t, std::shared_ptr<ProcessSnapshot>>::iterator forget_locked(
      std::unordered_map<int32_t, std::shared_ptr<ProcessSnapshot>>::iterator it,
      std::vector<std::shared_ptr<ProcessSnapshot>>& forgotten);
  // Releases forgotten processes' executables and tells the plugins.
  void let_go(const std::vector<std::shared_ptr<ProcessSnapshot>>& forgotten);
  void count(uint64_t ProcessTrackerStats::*counter);

  // Reading /proc, taking executable references (whose first one builds the
  // unwind table) and asking plugins run outside mutex_, so a slow table
  // build blocks no other process. Instead, one operation at a time holds a
  // pid's claim (describe, exec, refresh); others on the same pid wait for it
  // on claim_released_. An exit that arrives meanwhile is noted and applied
  // when the claim is released, after the snapshot is published.
  class PidClaim;
  void wait_and_claim(std::unique_lock<std::mutex>& lock, int32_t pid);
  void release_claim(int32_t pid);
  void mark_exited_locked(int32_t pid);

  BpfMaps* maps_;
  PluginHost* plugins_;
  ExecutableInfoManager* executables_ = nullptr;
  OpenExecutables* files_ = nullptr;
  ElfSymbolizer* symbolizer_ = nullptr;
  // A process's resource attributes from its facts, by resource_settings_.
  std::shared_ptr<const ResourceAttributes> resource_for(const ProcessFacts& facts) const;

  ResourceSettings resource_settings_;
  ResourceAttributes host_attributes_ = host_attributes();
  // Never held while calling a plugin or the ExecutableInfoManager.
  mutable std::mutex mutex_;
  std::condition_variable claim_released_;
  std::unordered_set<int32_t> claimed_;
  std::unordered_set<int32_t> exited_while_claimed_;
  std::unordered_map<int32_t, std::shared_ptr<ProcessSnapshot>> processes_;
  static constexpr std::chrono::milliseconds kRefreshInterval{1000};
  // After an exec notice (no process records): re-read at these delays,
  // doubling, so that however long ld.so takes (a millisecond here; tens
  // over an emulated machine's 9p, where 10 and 100 ms left five of 58
  // samples in the gap) its libraries are published within about as long
  // again. Each publishes only if the mappings changed; a process gone
  // costs an access() each.
  static constexpr std::chrono::milliseconds kExecRereadDelays[] = {
      std::chrono::milliseconds(5),  std::chrono::milliseconds(10), std::chrono::milliseconds(20),
      std::chrono::milliseconds(40), std::chrono::milliseconds(80), std::chrono::milliseconds(160)};
  static constexpr size_t kMaxExecRereads = 4096;
  struct ExecReread {
    int32_t pid;
    std::chrono::steady_clock::time_point exec_noticed;
  };
  // exec_rereads_[i]: the processes whose re-read i is next, oldest first;
  // under mutex_ (handle_event may run on any thread).
  std::deque<ExecReread> exec_rereads_[std::size(kExecRereadDelays)];
  // Re-reads a claimed process's mappings, publishing them if changed (the
  // old ones released after): refresh_for_unknown_address's and
  // reread_execs_due's read.
  std::shared_ptr<const ProcessSnapshot> reread_claimed(int32_t pid, std::shared_ptr<ProcessSnapshot> old);
  std::unordered_map<int32_t, std::chrono::steady_clock::time_point> last_refresh_;
  // CLOCK_MONOTONIC when the latest read of each process's mappings began;
  // under mutex_.
  std::unordered_map<int32_t, uint64_t> mappings_read_ns_;
  // When the latest read of the records began (apply_records), and the
  // processes one of BPF's notes was answered for by the records: a second
  // note of one reads /proc (a record the kernel lost).
  std::atomic<uint64_t> records_read_ns_{0};
  std::unordered_set<int32_t> notes_answered_by_records_;
  // New mappings published for `pid` (an exec, a re-read that found others):
  // a walk may find a pc outside them too (ld.so's libraries mapped after the
  // read), so BPF may say so at once rather than a second after its last
  // note (BpfMaps::allow_request). Outside mutex_.
  void allow_notes_again(int32_t pid);
  // Processes found gone this round: not looked for again until the next.
  std::unordered_map<int32_t, bool> gone_this_round_;
  std::atomic<bool> records_active_{false};
  std::atomic<bool> fork_copies_{false};
  uint64_t drains_ = 0;  // under mutex_
  std::unordered_map<int32_t, uint64_t> exit_noted_at_drain_;  // under mutex_: drains_ when its exit was noted
  // Under mutex_: every sample of the exited `pid` has been drained (its
  // exit noted before the previous drain began, or never noted).
  bool exit_settled_locked(int32_t pid) const;
  std::chrono::steady_clock::time_point last_process_info_warning_{};  // under mutex_
  // Execs whose mappings have not come yet, and forked children held
  // (RecordView::fork_held_since_ns): the event thread's alone.
  std::unordered_map<int32_t, RecordView> pending_record_views_;
  // Images execs replaced, oldest first, each with the drain count when it
  // was replaced: kept while a sample taken in it may be in BPF, until the
  // drain after next (drained(), end_round()); under mutex_, at most
  // kMaxEarlierImages.
  struct EarlierImage {
    std::shared_ptr<const ProcessSnapshot> image;
    uint64_t replaced_at_drain = 0;
  };
  std::unordered_map<int32_t, std::vector<EarlierImage>> earlier_images_;
  size_t earlier_image_count_ = 0;
  void prune_earlier_images_locked(const std::function<bool(int32_t pid, const EarlierImage& earlier)>& keep);
  // Execs whose own facts are to be read (the event thread's alone;
  // at most kMaxPendingRecordViews, past which they keep their parent's).
  std::deque<std::pair<int32_t, std::chrono::steady_clock::time_point>> deferred_facts_;
  // The file a mapping's (device, inode) was last identified as, while its
  // descriptor is held: the kernel cannot reuse an inode that is open, so
  // the key names that one file, and the next process mapping it (every
  // exec of /bin/sh maps the same four files) is described without an open.
  struct MappedFileKey {
    uint32_t dev_major, dev_minor;
    uint64_t inode;
    bool operator==(const MappedFileKey&) const = default;
  };
  struct MappedFileKeyHash {
    size_t operator()(const MappedFileKey& k) const {
      return std::hash<uint64_t>()(k.inode) ^ (static_cast<size_t>(k.dev_major) << 20 ^ k.dev_minor);
    }
  };
  std::mutex mapped_files_mutex_;
  std::unordered_map<MappedFileKey, std::weak_ptr<const OpenExecutable>, MappedFileKeyHash> mapped_files_;
  ProcessTrackerStats stats_;
  std::mutex vdso_mutex_;
  std::string vdso_dir_;
  std::unordered_map<uint64_t, std::string> vdso_files_;  // content hash -> copy
  std::unordered_set<uint64_t> vdso_sizes_;  // of the copies
  std::unordered_map<std::string, std::weak_ptr<const OpenExecutable>> vdso_opened_;  // copy -> its kept descriptor
};

}  // namespace omniprof
