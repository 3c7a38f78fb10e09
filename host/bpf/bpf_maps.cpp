#include "bpf/bpf_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "bpf/bpf_support.h"
#include "entry.skel.h"
#include "log/logger.h"

namespace omniprof {

namespace {

std::string errno_text(int err) { return strerror(err < 0 ? -err : err); }

// Every key of a map, a syscall per key (BPF_MAP_GET_NEXT_KEY).
template <typename Key>
std::vector<Key> map_keys(int fd) {
  std::vector<Key> keys;
  Key key{}, next{};
  for (int err = bpf_map_get_next_key(fd, nullptr, &next); err == 0; err = bpf_map_get_next_key(fd, &key, &next)) {
    keys.push_back(next);
    key = next;
  }
  return keys;
}

}  // namespace

const std::vector<std::string>& BpfMaps::shared_map_names() {
  static const std::vector<std::string> names = {
      OMNIPROF_MAP_PROGRAMS,     OMNIPROF_MAP_STACK_COUNTS,  OMNIPROF_MAP_STACK_TRACES,
      OMNIPROF_MAP_PROCESS_INFO, OMNIPROF_MAP_PERCPU_STATS, OMNIPROF_MAP_UNWIND_STATE,
      OMNIPROF_MAP_UNWIND_SHARDS, OMNIPROF_MAP_UNWIND_RULES, OMNIPROF_MAP_UNWIND_INFO,
      OMNIPROF_MAP_EVENTS,       OMNIPROF_MAP_EVENT_REQUESTS};
  return names;
}

BpfMaps::~BpfMaps() {
  if (sample_times_) ring_buffer__free(sample_times_);
  if (skel_) entry_bpf__destroy(skel_);
}

Result<std::unique_ptr<BpfMaps>> BpfMaps::open() {
  entry_bpf* skel = entry_bpf__open();
  if (!skel) return make_error(fmt::format("cannot open the entry BPF object: {}", errno_text(errno)));
  auto maps = std::unique_ptr<BpfMaps>(new BpfMaps(skel));
  // The default sizes, so that every map-of-maps has its template recorded.
  if (auto r = maps->adjust_map_sizes(MapSizes{}); !r) return r.error();
  return maps;
}

Result<void> BpfMaps::adjust_map_sizes(const MapSizes& sizes) {
  // unwind_shards starts empty; its inner maps, created on demand, may take
  // up to the budget, which is also how many of them it can hold.
  bpf_map* shards = skel_->maps.unwind_shards;
  const bpf_map* shard = bpf_map__inner_map(shards);
  if (!shard) return make_error("unwind_shards has no inner-map template");
  InnerMaps pool;
  pool.type = bpf_map__type(shard);
  pool.key_size = bpf_map__key_size(shard);
  pool.value_size = bpf_map__value_size(shard);
  pool.max_entries = bpf_map__max_entries(shard);
  pool.flags = bpf_map__map_flags(shard);
  pool.budget_bytes = static_cast<uint64_t>(sizes.unwind_memory_mb) << 20;
  pool.outer_entries = static_cast<uint32_t>(pool.budget_bytes / pool.map_bytes());
  if (pool.outer_entries == 0) {
    return make_error(fmt::format("an unwind memory budget of {} MiB holds no {}-byte shard",
                                  sizes.unwind_memory_mb, pool.map_bytes()));
  }
  uint32_t shard_entries = pool.outer_entries;
  {
    std::lock_guard<std::mutex> lock(inner_mutex_);
    inner_maps_[OMNIPROF_MAP_UNWIND_SHARDS] = std::move(pool);
  }
  struct {
    bpf_map* map;
    uint32_t entries;
  } resizes[] = {{skel_->maps.stack_traces, sizes.stack_traces},
                 {skel_->maps.stack_counts, sizes.stack_counts},
                 {skel_->maps.process_info, sizes.processes},
                 {shards, shard_entries},
                 {skel_->maps.executable_unwind_info, sizes.executables}};
  for (auto& r : resizes) {
    if (int err = bpf_map__set_max_entries(r.map, r.entries); err) {
      return make_error(fmt::format("cannot size map {} to {} entries: {}", bpf_map__name(r.map),
                                    r.entries, errno_text(err)));
    }
  }
  // process_info is written only by the host and at a fork (never by a
  // sample, which only reads it): where the kernel lets perf_event programs
  // read an unpreallocated map, it holds the processes described (~2 KiB
  // each) instead of all maps.processes of them (9 MB at the default 4096).
  // A fork's copy failing for memory is counted (fork_copies_failed), and
  // the host describes the child itself, as on a kernel without the copy.
  if (perf_event_programs_take_unpreallocated_maps()) {
    if (int err = bpf_map__set_map_flags(skel_->maps.process_info,
                                         bpf_map__map_flags(skel_->maps.process_info) | BPF_F_NO_PREALLOC);
        err) {
      return make_error(fmt::format("cannot set map flags of process_info: {}", errno_text(err)));
    }
  }
  return ok();
}

void BpfMaps::enable_pid_filter(bool enabled) { skel_->rodata->filter_pids = enabled ? 1 : 0; }

Result<void> BpfMaps::record_sample_times(uint64_t ring_bytes) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t size = page;
  while (size < ring_bytes && size < (1ULL << 30)) size <<= 1;  // a power of two pages
  if (int err = bpf_map__set_max_entries(skel_->maps.sample_times, static_cast<uint32_t>(size)); err) {
    return make_error(fmt::format("cannot size map sample_times to {} bytes: {}", size, errno_text(err)));
  }
  skel_->rodata->record_sample_times = 1;
  return ok();
}

Result<std::vector<omniprof_sample_time>> BpfMaps::drain_sample_times() {
  drained_times_.clear();
  if (!skel_->rodata->record_sample_times) return std::vector<omniprof_sample_time>{};
  if (!sample_times_) {
    sample_times_ = ring_buffer__new(
        bpf_map__fd(skel_->maps.sample_times),
        [](void* ctx, void* data, size_t size) -> int {
          if (size < sizeof(omniprof_sample_time)) return 0;
          omniprof_sample_time record;
          std::memcpy(&record, data, sizeof(record));
          static_cast<std::vector<omniprof_sample_time>*>(ctx)->push_back(record);
          return 0;
        },
        &drained_times_, nullptr);
    if (!sample_times_) return make_error(fmt::format("cannot open the sample_times ring buffer: {}", errno_text(errno)));
  }
  if (int n = ring_buffer__consume(sample_times_); n < 0) {
    return make_error(fmt::format("cannot read the sample_times ring buffer: {}", errno_text(n)));
  }
  return std::move(drained_times_);
}

Result<void> BpfMaps::load() {
  const uint64_t began = boottime_ns();
  if (int err = entry_bpf__load(skel_); err) {
    return make_error(fmt::format("cannot load the entry BPF object: {}", errno_text(err)));
  }
  load_cost_ = object_load_cost(skel_->obj, began, boottime_ns());
  for (const auto& name : shared_map_names()) {
    bpf_map* map = bpf_object__find_map_by_name(skel_->obj, name.c_str());
    if (!map) return make_error(fmt::format("entry BPF object has no map {}", name));
    shared_fds_[name] = bpf_map__fd(map);
  }
  if (kernel_feature_hidden("map_batch")) {
    batch_ops_ = Support::kNo;
    log().info("map batch operations hidden (OMNIPROF_HIDE_BPF_FEATURES): stacks and counts are read key by key");
  }
  return update_tail_call(OMNIPROF_SLOT_STOP, bpf_program__fd(skel_->progs.omniprof_stop));
}

Result<void> BpfMaps::reuse_maps(bpf_object* plugin_object) const {
  bpf_map* map = nullptr;
  bpf_object__for_each_map(map, plugin_object) {
    auto it = shared_fds_.find(bpf_map__name(map));
    if (it == shared_fds_.end()) continue;  // the plugin's private map
    if (int err = bpf_map__reuse_fd(map, it->second); err) {
      return make_error(
          fmt::format("cannot reuse the host's map {}: {}", it->first, errno_text(err)));
    }
  }
  return ok();
}

Result<void> BpfMaps::update_tail_call(uint32_t slot, int program_fd) {
  if (slot >= OMNIPROF_NUM_SLOTS) return make_error(fmt::format("tail-call slot {} out of range", slot));
  if (bpf_map_update_elem(map_fd(OMNIPROF_MAP_PROGRAMS), &slot, &program_fd, BPF_ANY) != 0) {
    return make_error(fmt::format("cannot set tail-call slot {}: {}", slot, errno_text(errno)));
  }
  return ok();
}

Result<void> BpfMaps::clear_tail_call(uint32_t slot) {
  if (bpf_map_delete_elem(map_fd(OMNIPROF_MAP_PROGRAMS), &slot) != 0 && errno != ENOENT) {
    return make_error(fmt::format("cannot clear tail-call slot {}: {}", slot, errno_text(errno)));
  }
  return ok();
}

Result<void> BpfMaps::set_debug_pids(const std::vector<int32_t>& pids) {
  int fd = bpf_map__fd(skel_->maps.pid_filter);
  for (uint32_t pid : map_keys<uint32_t>(fd)) bpf_map_delete_elem(fd, &pid);
  for (int32_t pid : pids) {
    uint32_t k = static_cast<uint32_t>(pid);
    uint8_t one = 1;
    if (bpf_map_update_elem(fd, &k, &one, BPF_ANY) != 0) {
      return make_error(fmt::format("cannot add pid {} to the filter: {}", pid, errno_text(errno)));
    }
  }
  return ok();
}

namespace {

// Whether a batch operation's failure says the kernel has no batch
// operations for this map (then the caller goes key by key), rather than
// that this call went wrong.
// ENOTSUPP (524) is the kernel's own, not in the uapi headers.
bool batch_unsupported(int err) { return err == EINVAL || err == 524 || err == EOPNOTSUPP || err == ENOSYS; }

}  // namespace

// Walks a hash map in batches of up to `chunk` entries (BPF_MAP_LOOKUP_BATCH,
// or BPF_MAP_LOOKUP_AND_DELETE_BATCH with `and_delete`), calling
// `each(key, value)` for every entry. A bucket larger than the chunk
// (ENOSPC, nothing copied) doubles the chunk and asks again.
Result<void> BpfMaps::walk_in_batches(int fd, size_t key_size, size_t value_size, uint32_t chunk, bool and_delete,
                                      const std::function<void(const void*, const void*)>& each) {
  std::vector<uint8_t> keys(key_size * chunk), values(value_size * chunk);
  // The batch token: a bucket index (u32) for hash maps; room for a key.
  std::vector<uint8_t> in_token(std::max<size_t>(key_size, 8)), out_token(in_token.size());
  bool first = true;
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  for (;;) {
    uint32_t count = chunk;
    void* in = first ? nullptr : in_token.data();
    int ret = and_delete ? bpf_map_lookup_and_delete_batch(fd, in, out_token.data(), keys.data(), values.data(),
                                                            &count, &opts)
                         : bpf_map_lookup_batch(fd, in, out_token.data(), keys.data(), values.data(), &count, &opts);
    const int err = ret < 0 ? errno : 0;
    if (err != 0 && err != ENOENT) {
      if (err == ENOSPC && count == 0 && chunk < (1u << 20)) {
        chunk *= 2;
        keys.resize(key_size * chunk);
        values.resize(value_size * chunk);
        continue;
      }
      if (batch_ops_ != Support::kYes && batch_unsupported(err)) {
        batch_ops_ = Support::kNo;
        log().info("BPF map batch operations unsupported ({}): stacks and counts are read key by key",
                   errno_text(err));
      }
      return make_error(errno_text(err));
    }
    batch_ops_ = Support::kYes;
    for (uint32_t i = 0; i < count; ++i) each(&keys[i * key_size], &values[i * value_size]);
    if (err == ENOENT) return ok();  // the last batch
    std::swap(in_token, out_token);
    first = false;
  }
}

Result<std::vector<StackCount>> BpfMaps::drain_stack_counts() {
  int fd = map_fd(OMNIPROF_MAP_STACK_COUNTS);
  std::vector<StackCount> counts;
  if (batch_ops_ != Support::kNo) {
    auto walked = walk_in_batches(fd, sizeof(omniprof_stack_key), sizeof(uint64_t), kCountsBatch, true,
                                  [&](const void* key, const void* value) {
                                    StackCount c{};
                                    std::memcpy(&c.key, key, sizeof(c.key));
                                    std::memcpy(&c.count, value, sizeof(c.count));
                                    counts.push_back(c);
                                  });
    if (walked) return counts;
    if (batch_ops_ == Support::kYes) {
      // The counts taken before the failure are kept: deleted from the map,
      // they exist nowhere else.
      log().error("cannot drain stack_counts in batches: {}; {} counts taken, the rest at the next drain",
                  walked.error().message, counts.size());
      return counts;
    }
  }
  const std::vector<omniprof_stack_key> keys = map_keys<omniprof_stack_key>(fd);
  counts.reserve(keys.size());
  for (const auto& k : keys) {
    uint64_t value = 0;
    if (lookup_and_delete_ != Support::kNo) {
      if (bpf_map_lookup_and_delete_elem(fd, &k, &value) == 0) {
        lookup_and_delete_ = Support::kYes;
        counts.push_back({k, value});
        continue;
      }
      if (errno == ENOENT) continue;
      if (lookup_and_delete_ == Support::kYes) {
        return make_error(fmt::format("cannot drain stack_counts: {}", errno_text(errno)));
      }
      // Kernels before 5.14 reject lookup-and-delete on hash maps.
      lookup_and_delete_ = Support::kNo;
      log().debug("stack_counts: lookup-and-delete unsupported ({}), using lookup then delete",
                  errno_text(errno));
    }
    if (bpf_map_lookup_elem(fd, &k, &value) != 0) continue;
    bpf_map_delete_elem(fd, &k);
    counts.push_back({k, value});
  }
  return counts;
}

Result<std::vector<omniprof_frame>> BpfMaps::read_stack(uint64_t stack_id, uint32_t len) const {
  len = std::min<uint32_t>(len, OMNIPROF_MAX_STACK_DEPTH);
  int fd = map_fd(OMNIPROF_MAP_STACK_TRACES);
  std::vector<omniprof_frame> stored;
  stored.reserve(len);
  for (uint32_t index = 0; index * OMNIPROF_FRAGMENT_FRAMES < len; ++index) {
    omniprof_stack_fragment_key key{stack_id, index, 0};
    omniprof_stack_fragment fragment;
    if (bpf_map_lookup_elem(fd, &key, &fragment) != 0) {
      return make_error(fmt::format("stack {:#x} fragment {} not in stack_traces: {}", stack_id, index,
                                    errno_text(errno)));
    }
    uint32_t n = std::min<uint32_t>(OMNIPROF_FRAGMENT_FRAMES, len - index * OMNIPROF_FRAGMENT_FRAMES);
    stored.insert(stored.end(), fragment.frames, fragment.frames + n);
  }
  return stored;
}

Result<std::unordered_map<uint64_t, std::vector<omniprof_frame>>> BpfMaps::read_stacks_and_sweep(
    const std::unordered_map<uint64_t, uint32_t>& wanted, const std::unordered_set<uint64_t>& referenced) {
  int fd = map_fd(OMNIPROF_MAP_STACK_TRACES);
  std::unordered_map<uint64_t, std::vector<omniprof_frame>> stacks;
  std::vector<omniprof_stack_fragment_key> keys;
  bool walked = false;
  if (batch_ops_ != Support::kNo) {
    // Fragments land in place as they come; a stack is whole once every
    // fragment its length needs came (counted per stack).
    std::unordered_map<uint64_t, uint32_t> fragments_seen;
    auto batch = walk_in_batches(
        fd, sizeof(omniprof_stack_fragment_key), sizeof(omniprof_stack_fragment), kFragmentsBatch, false,
        [&](const void* key_bytes, const void* value) {
          omniprof_stack_fragment_key k;
          std::memcpy(&k, key_bytes, sizeof(k));
          keys.push_back(k);
          auto want = wanted.find(k.stack_id);
          if (want == wanted.end()) return;
          const uint32_t len = std::min<uint32_t>(want->second, OMNIPROF_MAX_STACK_DEPTH);
          const uint64_t first = static_cast<uint64_t>(k.index) * OMNIPROF_FRAGMENT_FRAMES;
          if (first >= len) return;
          std::vector<omniprof_frame>& frames = stacks[k.stack_id];
          frames.resize(len);
          const uint32_t n = std::min<uint32_t>(OMNIPROF_FRAGMENT_FRAMES, len - static_cast<uint32_t>(first));
          std::memcpy(&frames[first], static_cast<const omniprof_stack_fragment*>(value)->frames,
                      n * sizeof(omniprof_frame));
          fragments_seen[k.stack_id]++;
        });
    if (batch) {
      walked = true;
      for (auto it = stacks.begin(); it != stacks.end();) {
        const uint32_t len = std::min<uint32_t>(wanted.at(it->first), OMNIPROF_MAX_STACK_DEPTH);
        const uint32_t needed = (len + OMNIPROF_FRAGMENT_FRAMES - 1) / OMNIPROF_FRAGMENT_FRAMES;
        it = fragments_seen[it->first] == needed ? std::next(it) : stacks.erase(it);
      }
    } else {
      // This drain goes key by key: its counts are taken already.
      if (batch_ops_ == Support::kYes) {
        log().error("cannot read stack_traces in batches: {}; reading this drain's stacks key by key",
                    batch.error().message);
      }
      keys.clear();
      stacks.clear();
    }
  }
  if (!walked) {
    keys = map_keys<omniprof_stack_fragment_key>(fd);
    for (const auto& [id, len] : wanted) {
      if (auto stack = read_stack(id, len)) stacks.emplace(id, std::move(*stack));
    }
  }
  // Fragments go with their stack: a stack unreferenced for two drains in a
  // row loses all of them (and so do fragments of a stack whose store failed
  // half-way, which no count ever references).
  std::unordered_set<uint64_t> unreferenced;
  std::vector<omniprof_stack_fragment_key> doomed;
  for (const auto& k : keys) {
    if (referenced.count(k.stack_id)) continue;
    if (unreferenced_last_drain_.count(k.stack_id)) {
      doomed.push_back(k);
    } else {
      unreferenced.insert(k.stack_id);
    }
  }
  unreferenced_last_drain_ = std::move(unreferenced);
  size_t deleted = 0;
  if (!doomed.empty() && batch_ops_ == Support::kYes) {
    // Stops at the first key it cannot delete; the rest go one by one.
    uint32_t count = static_cast<uint32_t>(doomed.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (bpf_map_delete_batch(fd, doomed.data(), &count, &opts) == 0) count = static_cast<uint32_t>(doomed.size());
    deleted = std::min<size_t>(count, doomed.size());
  }
  for (size_t i = deleted; i < doomed.size(); ++i) bpf_map_delete_elem(fd, &doomed[i]);
  fragments_kept_ = keys.size() - doomed.size();
  return stacks;
}

Result<void> BpfMaps::write_process_info(int32_t pid, const omniprof_process_info& info) {
  uint32_t key = static_cast<uint32_t>(pid);
  if (bpf_map_update_elem(map_fd(OMNIPROF_MAP_PROCESS_INFO), &key, &info, BPF_ANY) != 0) {
    return make_error(
        fmt::format("cannot write process_info for pid {}: {}", pid, errno_text(errno)));
  }
  return ok();
}

void BpfMaps::delete_process_info(int32_t pid) {
  uint32_t key = static_cast<uint32_t>(pid);
  bpf_map_delete_elem(map_fd(OMNIPROF_MAP_PROCESS_INFO), &key);
}

void BpfMaps::allow_request(uint32_t type, int32_t pid) {
  uint64_t key = OMNIPROF_EVENT_REQUEST_KEY(type, static_cast<uint32_t>(pid));
  bpf_map_delete_elem(map_fd(OMNIPROF_MAP_EVENT_REQUESTS), &key);  // ENOENT: it has not asked
}

bool BpfMaps::mark_unwind_table_building(uint64_t file_id) {
  omniprof_executable_unwind_info placeholder{};
  placeholder.flags = OMNIPROF_UNWIND_INFO_BUILDING;
  // BPF_NOEXIST: a stored table (loaded for another process) stays as it is.
  return bpf_map_update_elem(map_fd(OMNIPROF_MAP_UNWIND_INFO), &file_id, &placeholder, BPF_NOEXIST) == 0 ||
         errno == EEXIST;
}

void BpfMaps::clear_unwind_table_building(uint64_t file_id) {
  int fd = map_fd(OMNIPROF_MAP_UNWIND_INFO);
  omniprof_executable_unwind_info info{};
  if (bpf_map_lookup_elem(fd, &file_id, &info) == 0 && (info.flags & OMNIPROF_UNWIND_INFO_BUILDING)) {
    bpf_map_delete_elem(fd, &file_id);
  }
}

Result<std::vector<uint64_t>> BpfMaps::read_stats(uint32_t first, uint32_t count) const {
  if (first > OMNIPROF_NUM_STATS || count > OMNIPROF_NUM_STATS - first) {
    return make_error(fmt::format("percpu_stats has {} counters, not [{}, {})", OMNIPROF_NUM_STATS, first,
                                  static_cast<uint64_t>(first) + count));
  }
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return make_error("cannot count possible CPUs");
  std::vector<uint64_t> totals(count, 0);
  int fd = map_fd(OMNIPROF_MAP_PERCPU_STATS);
  if (batch_ops_ != Support::kNo && count > 0) {
    // All of them in one call: a value per CPU per key, keys in order. An
    // array's batch starts after the key `in_batch` points at.
    std::vector<uint32_t> keys(count);
    std::vector<uint64_t> values(static_cast<size_t>(count) * cpus);
    uint32_t before_first = first - 1;
    uint32_t out_token = 0, got = count;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    int ret = bpf_map_lookup_batch(fd, first == 0 ? nullptr : &before_first, &out_token, keys.data(), values.data(),
                                   &got, &opts);
    if ((ret == 0 || errno == ENOENT) && got == count) {
      for (uint32_t k = 0; k < got; ++k) {
        if (keys[k] < first || keys[k] - first >= count) continue;
        for (int c = 0; c < cpus; ++c) totals[keys[k] - first] += values[static_cast<size_t>(k) * cpus + c];
      }
      return totals;
    }
  }
  for (uint32_t i = 0; i < count; ++i) {
    auto total = read_stat(first + i);
    if (!total) return total.error();
    totals[i] = *total;
  }
  return totals;
}

Result<omniprof_inflow_totals> BpfMaps::read_inflow_totals() const {
  omniprof_inflow_totals totals{};
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.inflow_totals), &zero, &totals) != 0) {
    return make_error(fmt::format("cannot read inflow_totals: {}", errno_text(errno)));
  }
  return totals;
}

Result<void> BpfMaps::arm_drain_thresholds(const omniprof_drain_thresholds& thresholds) {
  omniprof_drain_thresholds armed = thresholds;
  armed.armed = 1;
  const uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.drain_thresholds), &zero, &armed, BPF_ANY) != 0) {
    return make_error(fmt::format("cannot write drain_thresholds: {}", errno_text(errno)));
  }
  return ok();
}

Result<uint64_t> BpfMaps::read_stat(uint32_t index) const {
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return make_error("cannot count possible CPUs");
  std::vector<uint64_t> per_cpu(cpus);
  if (bpf_map_lookup_elem(map_fd(OMNIPROF_MAP_PERCPU_STATS), &index, per_cpu.data()) != 0) {
    return make_error(fmt::format("cannot read percpu_stats[{}]: {}", index, errno_text(errno)));
  }
  uint64_t total = 0;
  for (uint64_t v : per_cpu) total += v;
  return total;
}

uint64_t BpfMaps::InnerMaps::map_bytes() const {
  // An ARRAY's elements are 8-byte aligned; the kernel adds a few hundred
  // bytes of its own per map, which host.bpf_map_bytes (memlock) includes.
  return static_cast<uint64_t>((value_size + 7) / 8 * 8) * max_entries;
}

omniprof_status BpfMaps::create_inner_map(const std::string& name, uint32_t index, int* fd,
                                          std::string* reason) {
  auto fail = [&](omniprof_status status, std::string why) {
    if (reason) *reason = std::move(why);
    return status;
  };
  if (!fd) return fail(OMNIPROF_ERR_INVALID_ARGUMENT, "no fd to write to");
  std::lock_guard<std::mutex> lock(inner_mutex_);
  auto it = inner_maps_.find(name);
  int outer_fd = map_fd(name);
  if (it == inner_maps_.end() || outer_fd < 0) {
    return fail(OMNIPROF_ERR_INVALID_ARGUMENT, fmt::format("{} is not a shared map-of-maps", name));
  }
  InnerMaps& pool = it->second;
  if (auto existing = pool.fds.find(index); existing != pool.fds.end()) {
    *fd = existing->second.get();
    return OMNIPROF_OK;
  }
  if (index >= pool.outer_entries) {
    return fail(OMNIPROF_ERR_NO_SPACE, fmt::format("{}[{}]: past its {} entries (the memory budget)", name,
                                                   index, pool.outer_entries));
  }
  if (pool.bytes + pool.map_bytes() > pool.budget_bytes) {
    return fail(OMNIPROF_ERR_NO_SPACE, fmt::format("{}[{}]: {} more bytes would pass the budget of {}", name,
                                                   index, pool.map_bytes(), pool.budget_bytes));
  }
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = pool.flags);
  std::string inner_name = fmt::format("{}_{}", name.substr(0, 8), index);  // BPF_OBJ_NAME_LEN 16
  UniqueFd inner(bpf_map_create(static_cast<bpf_map_type>(pool.type), inner_name.c_str(), pool.key_size,
                                pool.value_size, pool.max_entries, &opts));
  if (!inner.valid()) {
    return fail(OMNIPROF_ERR_NO_MEMORY, fmt::format("cannot create {}[{}] ({} bytes): {}", name, index,
                                                    pool.map_bytes(), errno_text(errno)));
  }
  int inner_fd = inner.get();
  // BPF_ANY: fd arrays take no other flag; the index is known to be empty.
  if (bpf_map_update_elem(outer_fd, &index, &inner_fd, BPF_ANY) != 0) {
    return fail(OMNIPROF_ERR_NO_MEMORY,
                fmt::format("cannot put the new map in {}[{}]: {}", name, index, errno_text(errno)));
  }
  pool.bytes += pool.map_bytes();
  *fd = inner_fd;
  pool.fds.emplace(index, std::move(inner));
  log().debug("{}[{}] created: {} of {} bytes of the budget in use", name, index, pool.bytes, pool.budget_bytes);
  return OMNIPROF_OK;
}

uint32_t BpfMaps::inner_maps(const std::string& name) const {
  std::lock_guard<std::mutex> lock(inner_mutex_);
  auto it = inner_maps_.find(name);
  return it == inner_maps_.end() ? 0 : static_cast<uint32_t>(it->second.fds.size());
}

uint32_t BpfMaps::inner_map_budget(const std::string& name) const {
  std::lock_guard<std::mutex> lock(inner_mutex_);
  auto it = inner_maps_.find(name);
  return it == inner_maps_.end() ? 0 : it->second.outer_entries;
}

int BpfMaps::map_fd(const std::string& name) const {
  auto it = shared_fds_.find(name);
  return it == shared_fds_.end() ? -1 : it->second;
}

int BpfMaps::events_fd() const { return bpf_map__fd(skel_->maps.events); }
int BpfMaps::drain_due_fd() const { return bpf_map__fd(skel_->maps.drain_due); }

}  // namespace omniprof
