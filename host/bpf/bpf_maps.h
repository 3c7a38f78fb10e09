// BpfMaps: the owner of every shared BPF map and of the tail-call array. It loads the host's entry
// object, which creates the maps, and keeps their fds for its whole life: the
// kernel empties a PROG_ARRAY when its last user-space fd closes, which would
// silently unhook every unwinder.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bpf/load_cost.h"
#include "omniprof/support/result.h"
#include "omniprof/support/unique_fd.h"
#include "omniprof/bpf/abi.h"
#include "omniprof/plugin.h"

struct entry_bpf;
struct bpf_object;
struct ring_buffer;

namespace omniprof {

struct MapSizes {
  uint32_t stack_traces = OMNIPROF_DEFAULT_STACK_TRACES;
  uint32_t stack_counts = OMNIPROF_DEFAULT_STACK_COUNTS;
  uint32_t processes = OMNIPROF_DEFAULT_PROCESSES;
  // Budget of the unwind shards (inner maps of unwind_shards), created on
  // demand; also the max_entries of unwind_shards (1 MiB shards).
  uint32_t unwind_memory_mb = OMNIPROF_DEFAULT_UNWIND_MEMORY_MB;
  uint32_t executables = OMNIPROF_DEFAULT_EXECUTABLES;
};

struct StackCount {
  omniprof_stack_key key;
  uint64_t count;
};

class BpfMaps {
 public:
  ~BpfMaps();
  BpfMaps(const BpfMaps&) = delete;
  BpfMaps& operator=(const BpfMaps&) = delete;

  // Opens the host's entry object (not loaded yet).
  static Result<std::unique_ptr<BpfMaps>> open();

  // Before load: map sizes from the config, and whether -p filtering is on.
  Result<void> adjust_map_sizes(const MapSizes& sizes);
  void enable_pid_filter(bool enabled);
  // Before load: makes omniprof_stop write each counted sample's time to
  // sample_times, a ring of `ring_bytes` (rounded up to a power of two pages).
  Result<void> record_sample_times(uint64_t ring_bytes);
  // Loads the entry object: creates the shared maps and the host programs,
  // and puts the STOP program in its slot.
  Result<void> load();
  // What that load cost (load_cost.h); empty before it.
  const ObjectLoadCost& load_cost() const { return load_cost_; }

  // Points every shared map a plugin object declares at the host's map.
  // Must run between bpf_object__open and bpf_object__load of that object.
  Result<void> reuse_maps(bpf_object* plugin_object) const;
  Result<void> update_tail_call(uint32_t slot, int program_fd);
  Result<void> clear_tail_call(uint32_t slot);

  // Keeps only these processes (with enable_pid_filter before load).
  Result<void> set_debug_pids(const std::vector<int32_t>& pids);

  // Moves every count out of stack_counts: in batches
  // (BPF_MAP_LOOKUP_AND_DELETE_BATCH, a few syscalls a drain), else key by
  // key (atomic lookup-and-delete where the kernel has it, 5.14+; lookup
  // then delete before that). A batch failing half-way keeps the counts
  // taken before it (logged); the rest wait for the next drain.
  Result<std::vector<StackCount>> drain_stack_counts();
  // Moves every record out of sample_times, oldest first (none unless
  // record_sample_times was set). Called after drain_stack_counts, by the
  // same thread.
  Result<std::vector<omniprof_sample_time>> drain_sample_times();
  // The frames of each stack in `wanted` (stack id -> its length, from its
  // key), as stored: interpreter frames after the native ones
  // (splice_interpreter_frames); a stack not whole in the map is left out.
  // Then deletes the stacks no count has referenced (`referenced`, this
  // drain's) for two drains in a row. Two, not one: a stack stored just
  // after the counts were drained belongs to a count the next drain will
  // see. One pass over stack_traces in batches (BPF_MAP_LOOKUP_BATCH, the
  // deletes in one BPF_MAP_DELETE_BATCH), else key by key (a syscall per
  // fragment read, per key walked and per delete).
  Result<std::unordered_map<uint64_t, std::vector<omniprof_frame>>> read_stacks_and_sweep(
      const std::unordered_map<uint64_t, uint32_t>& wanted, const std::unordered_set<uint64_t>& referenced);
  // Fragments left in stack_traces by the last read_stacks_and_sweep.
  uint64_t stack_fragments_kept() const { return fragments_kept_; }

  Result<void> write_process_info(int32_t pid, const omniprof_process_info& info);
  void delete_process_info(int32_t pid);
  // Lets BPF ask the host about `pid` again at once (OMNIPROF_EVENT_REQUEST_KEY,
  // `type` an omniprof_event_type), not a second after it last asked.
  void allow_request(uint32_t type, int32_t pid);

  // A table of `file_id` is about to be built: writes the placeholder entry
  // (no chunks, OMNIPROF_UNWIND_INFO_BUILDING) in executable_unwind_info
  // unless the file has an entry already (abi.h). False when the map is full.
  bool mark_unwind_table_building(uint64_t file_id);
  // The build is over: removes the placeholder if nothing replaced it (the
  // file stored no table). Called by whoever serialises the builds
  // (ExecutableInfoManager), so no build of the file runs meanwhile.
  void clear_unwind_table_building(uint64_t file_id);

  // percpu_stats summed over CPUs, OMNIPROF_NUM_STATS entries.
  Result<std::vector<uint64_t>> read_stats() const { return read_stats(0, OMNIPROF_NUM_STATS); }
  // Counters [first, first + count) of percpu_stats, each summed over the
  // CPUs: one batch lookup where the kernel has them, else one per counter.
  Result<std::vector<uint64_t>> read_stats(uint32_t first, uint32_t count) const;
  // One counter of percpu_stats, summed over the CPUs (one lookup).
  Result<uint64_t> read_stat(uint32_t index) const;

  // What BPF added to the maps a drain empties, totals since load
  // (inflow_totals, abi.h: struct omniprof_inflow_totals); one lookup.
  Result<omniprof_inflow_totals> read_inflow_totals() const;
  // Arms BPF's OMNIPROF_EVENT_DRAIN_DUE at these totals (one update); it
  // fires once, so each look at the maps arms it again.
  Result<void> arm_drain_thresholds(const omniprof_drain_thresholds& thresholds);
  // The ring DRAIN_DUE is sent on (the host object's drain_due, apart from
  // events: the thread that drains reads it).
  int drain_due_fd() const;

  // Creates the inner map at `index` of the shared map-of-maps `name`, shaped
  // like its template, within that map's budget; keeps its fd for life and
  // writes it to *fd (the existing one if the index is already filled).
  // OMNIPROF_ERR_NO_SPACE past the budget or max_entries; *reason says why
  // on any failure. Safe from any thread (omniprof_host_api.create_inner_map).
  omniprof_status create_inner_map(const std::string& name, uint32_t index, int* fd, std::string* reason);
  // Inner maps created in the map-of-maps `name`, and how many its budget
  // allows.
  uint32_t inner_maps(const std::string& name) const;
  uint32_t inner_map_budget(const std::string& name) const;

  int map_fd(const std::string& name) const;  // shared maps only; -1 if unknown
  int events_fd() const;
  entry_bpf* skeleton() { return skel_; }
  bool lookup_and_delete_supported() const { return lookup_and_delete_ == Support::kYes; }
  // Whether the drains use batch operations (known after the first drain).
  // OMNIPROF_HIDE_BPF_FEATURES=map_batch turns them off before it.
  bool batch_ops_used() const { return batch_ops_ == Support::kYes; }
  // Entries per batch call (a batch that meets a larger hash bucket grows).
  static constexpr uint32_t kCountsBatch = 1024;
  static constexpr uint32_t kFragmentsBatch = 256;

  static const std::vector<std::string>& shared_map_names();

 private:
  enum class Support { kUnknown, kYes, kNo };
  explicit BpfMaps(entry_bpf* skel) : skel_(skel) {}

  // A shared map-of-maps: its inner-map template (read before load: libbpf
  // frees it once the outer map exists), budget and the inner maps made.
  struct InnerMaps {
    uint32_t type = 0, key_size = 0, value_size = 0, max_entries = 0, flags = 0;
    uint64_t budget_bytes = 0;
    uint32_t outer_entries = 0;
    uint64_t bytes = 0;
    std::map<uint32_t, UniqueFd> fds;
    uint64_t map_bytes() const;  // data bytes of one inner map
  };

  entry_bpf* skel_ = nullptr;
  ring_buffer* sample_times_ = nullptr;  // open once records are asked for
  std::vector<omniprof_sample_time> drained_times_;  // drain_sample_times's output
  mutable std::mutex inner_mutex_;
  std::map<std::string, InnerMaps> inner_maps_;
  std::unordered_map<std::string, int> shared_fds_;
  std::unordered_set<uint64_t> unreferenced_last_drain_;
  uint64_t fragments_kept_ = 0;  // read_stacks_and_sweep's
  Support lookup_and_delete_ = Support::kUnknown;
  Support batch_ops_ = Support::kUnknown;
  ObjectLoadCost load_cost_;

  // The frames stored under `stack_id`, `len` long, a lookup per fragment.
  Result<std::vector<omniprof_frame>> read_stack(uint64_t stack_id, uint32_t len) const;
  // See bpf_maps.cpp; sets batch_ops_ from what the kernel answers.
  Result<void> walk_in_batches(int fd, size_t key_size, size_t value_size, uint32_t chunk, bool and_delete,
                               const std::function<void(const void*, const void*)>& each);
};

}  // namespace omniprof
