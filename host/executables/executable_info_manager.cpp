#include "executables/executable_info_manager.h"

#include <algorithm>

#include <fmt/format.h>

#include "bpf/bpf_maps.h"
#include "common/thread_priority.h"
#include "log/logger.h"
#include "plugins/plugin_host.h"

namespace omniprof {

namespace {

// Unloads `file_id` from the plugins that load executables, those before
// `stop` only (null: all of them).
void unload_from_loading_plugins(PluginHost& plugins, uint64_t file_id, const Plugin* stop = nullptr) {
  for (const auto& plugin : plugins.plugins()) {
    if (plugin.get() == stop) break;
    if (plugin->state == PluginState::kLoaded && plugin->hooks.load_executable) {
      PluginHost::unload_executable(*plugin, file_id);
    }
  }
}

}  // namespace

omniprof_status PluginExecutableLoader::load(uint64_t file_id, const std::string& path, std::string& error) {
  for (const auto& plugin : plugins_.plugins()) {
    if (plugin->state != PluginState::kLoaded) continue;
    std::string reason;
    omniprof_status status = PluginHost::load_executable(*plugin, file_id, path, reason);
    if (status == OMNIPROF_OK) {
      if (!reason.empty()) {  // loaded, with parts left out
        if (!error.empty()) error += "; ";
        error += plugin->name + ": " + reason;
      }
      continue;
    }
    unload_from_loading_plugins(plugins_, file_id, plugin.get());
    error = plugin->name + ": " + reason;
    return status;
  }
  return OMNIPROF_OK;
}

void PluginExecutableLoader::unload(uint64_t file_id) {
  for (const auto& plugin : plugins_.plugins()) {
    if (plugin->state == PluginState::kLoaded) PluginHost::unload_executable(*plugin, file_id);
  }
}

void PluginExecutableLoader::evict(uint64_t file_id) { unload_from_loading_plugins(plugins_, file_id); }

void PluginExecutableLoader::mark_building(uint64_t file_id) {
  if (maps_) maps_->mark_unwind_table_building(file_id);
}

void PluginExecutableLoader::clear_building(uint64_t file_id) {
  if (maps_) maps_->clear_unwind_table_building(file_id);
}

bool ExecutableInfoManager::evict_one(uint64_t for_file_id, Clock::time_point now) {
  scan_due_ = Clock::time_point::min();
  apply_sampled_locked();
  // First what no process maps: it costs nobody a walk.
  if (auto unmapped = longest_unmapped_locked(); unmapped != entries_.end()) {
    unload_unmapped_locked(unmapped->first, unmapped->second, "to make room");
    return true;
  }
  Entry* oldest = nullptr;
  uint64_t oldest_id = 0;
  for (auto& [id, e] : entries_) {
    if (id == for_file_id || !e.loaded || now - e.last_sampled < kEvictAfterIdle) continue;
    if (!oldest || e.last_sampled < oldest->last_sampled) {
      oldest = &e;
      oldest_id = id;
    }
  }
  if (!oldest) return false;
  loader_.evict(oldest_id);
  oldest->loaded = false;
  oldest->evicted = true;
  stats_.loaded--;
  stats_.evicted++;
  log().info("unloaded {} ({:#x}), not sampled for {} s, to make room",
             oldest->name, oldest_id,
             std::chrono::duration_cast<std::chrono::seconds>(now - oldest->last_sampled).count());
  return true;
}

std::unordered_map<uint64_t, ExecutableInfoManager::Entry>::iterator ExecutableInfoManager::longest_unmapped_locked() {
  auto longest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (kept_unmapped(it->second) &&
        (longest == entries_.end() || it->second.unmapped_since < longest->second.unmapped_since)) {
      longest = it;
    }
  }
  return longest;
}

void ExecutableInfoManager::unload_unmapped_locked(uint64_t file_id, Entry& entry, std::string_view why) {
  loader_.unload(file_id);
  entry.loaded = false;
  entry.keep_alive.reset();
  stats_.loaded--;
  stats_.unloaded++;
  stats_.kept_unmapped--;
  {
    std::lock_guard<std::mutex> status_lock(status_mutex_);
    settled_.erase(file_id);
  }
  log().debug("unloaded {} ({:#x}): no process maps it, {}", entry.name, file_id, why);
}

void ExecutableInfoManager::erase_unreferenced_locked() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    const Entry& e = it->second;
    it = e.references == 0 && !e.loaded && !e.first_load_pending ? entries_.erase(it) : std::next(it);
  }
}

bool ExecutableInfoManager::load(uint64_t file_id, Entry& entry, Clock::time_point now) {
  entry.first_load_pending = false;
  loader_.mark_building(file_id);  // a retry's (the first load's was marked by add_refs)
  {
    std::lock_guard<std::mutex> status_lock(status_mutex_);
    building_ = entry.mapped_name;
  }
  std::string error;
  omniprof_status status;
  {
    // A table build is long work: never at the agent's event thread's
    // lower nice (processes.nice).
    NiceAtLeast normal_priority(0);
    status = loader_.load(file_id, entry.path, error);
    while (status == OMNIPROF_ERR_NO_SPACE && evict_one(file_id, now)) {
      error.clear();
      status = loader_.load(file_id, entry.path, error);
    }
  }
  loader_.clear_building(file_id);
  {
    std::lock_guard<std::mutex> status_lock(status_mutex_);
    building_.clear();
    settled_.insert(file_id);
  }
  if (status == OMNIPROF_OK) {
    entry.loaded = true;
    entry.evicted = false;
    entry.backoff = std::chrono::seconds(0);
    entry.last_sampled = now;
    stats_.loaded++;
    // Loaded with parts left out (the native plugin: malformed FDEs): said
    // once per load, with the file's name (the plugin saw a descriptor).
    if (!error.empty()) {
      stats_.partial_loads++;
      log().warn("{} ({:#x}): loaded in part: {}; the rest is used", entry.name, file_id, error);
    }
    return true;
  }
  entry.last_error = error.empty() ? "load failed" : error;
  if (status == OMNIPROF_ERR_TOO_LARGE) {
    entry.permanent_failure = true;
    stats_.permanent_failures++;
    log().warn("{} ({:#x}): {}; it can never be loaded: not retried, nothing evicted for it", entry.name, file_id,
               entry.last_error);
    return false;
  }
  if (status == OMNIPROF_ERR_NO_SPACE) stats_.no_space++;
  stats_.load_failures++;
  entry.backoff = entry.backoff.count() == 0 ? kFirstRetry : std::min(entry.backoff * 2, kMaxRetry);
  entry.next_retry = now + entry.backoff;
  scan_due_ = std::min(scan_due_.load(), entry.next_retry);
  log().warn("{} ({:#x}): {}; retrying in {} s", entry.name, file_id, entry.last_error, entry.backoff.count());
  if (retry_scheduled_) retry_scheduled_();
  return false;
}

bool ExecutableInfoManager::add_ref_locked(const Reference& reference) {
  Entry& entry = entries_[reference.file_id];
  if (kept_unmapped(entry)) {  // mapped again while kept: nothing to load
    entry.references = 1;
    stats_.kept_unmapped--;
    stats_.reused++;
    std::lock_guard<std::mutex> status_lock(status_mutex_);
    referenced_.insert(reference.file_id);
    return false;
  }
  const bool first = entry.references++ == 0;
  if (!first && entry.loaded) return false;  // fast path: already known
  // A deferred entry retries from the newest path: the one it had may have
  // been the map_files entry of a process gone since.
  entry.path = reference.path;
  entry.keep_alive = reference.keep_alive;
  const std::string& name = reference.name;
  entry.name = name.empty() || name == reference.path ? reference.path : name + " (" + reference.path + ")";
  entry.mapped_name = name.empty() ? reference.path : name;
  if (first) {
    entry.first_load_pending = true;
    std::lock_guard<std::mutex> status_lock(status_mutex_);
    referenced_.insert(reference.file_id);
  }
  return first;
}

void ExecutableInfoManager::add_or_inc_ref(uint64_t file_id, const std::string& path,
                                           std::shared_ptr<const void> keep_alive, const std::string& name) {
  load_referenced(add_refs({Reference{file_id, path, std::move(keep_alive), name}}));
}

std::vector<uint64_t> ExecutableInfoManager::add_refs(const std::vector<Reference>& references) {
  std::lock_guard<std::mutex> lock(mutex_);
  scan_due_ = Clock::time_point::min();
  std::vector<uint64_t> to_load;
  for (const Reference& reference : references) {
    if (!add_ref_locked(reference)) continue;
    loader_.mark_building(reference.file_id);
    to_load.push_back(reference.file_id);
  }
  return to_load;
}

void ExecutableInfoManager::load_referenced(const std::vector<uint64_t>& file_ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  scan_due_ = Clock::time_point::min();
  for (uint64_t file_id : file_ids) {
    auto it = entries_.find(file_id);
    // Gone (its last reference dropped) or loaded meanwhile: nothing to do.
    if (it == entries_.end() || !it->second.first_load_pending) continue;
    load(file_id, it->second, Clock::now());
  }
}

bool ExecutableInfoManager::remove_or_dec_ref(uint64_t file_id, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(file_id);
  if (it == entries_.end() || it->second.references == 0) return false;
  if (--it->second.references > 0) return false;
  scan_due_ = Clock::time_point::min();
  Entry& entry = it->second;
  {
    std::lock_guard<std::mutex> status_lock(status_mutex_);
    referenced_.erase(file_id);
  }
  if (entry.loaded) {  // kept for the next process that maps it
    entry.unmapped_since = now;
    if (++stats_.kept_unmapped > kMaxKeptUnmapped) {
      auto longest = longest_unmapped_locked();
      unload_unmapped_locked(longest->first, longest->second,
                             fmt::format("more than {} files kept", kMaxKeptUnmapped));
      erase_unreferenced_locked();
    }
    return true;
  }
  loader_.unload(file_id);  // never loaded, or evicted: a description may be kept
  // A first load that never ran leaves no placeholder behind.
  if (entry.first_load_pending) loader_.clear_building(file_id);
  entries_.erase(it);
  std::lock_guard<std::mutex> status_lock(status_mutex_);
  settled_.erase(file_id);
  return false;
}

void ExecutableInfoManager::retry_deferred(Clock::time_point now) {
  // The main thread calls this before each drain: while another thread
  // builds a table (seconds for a large library on a cold cache) the drain,
  // and record's clock, must not wait for it. The retries run at a later drain.
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  apply_sampled_locked();
  if (now < scan_due_.load()) return;
  scan_due_ = Clock::time_point::max();  // a load below that evicts sets it back to min()
  for (auto& [file_id, entry] : entries_) {
    if (kept_unmapped(entry) && now - entry.unmapped_since >= kKeepUnmapped) {
      unload_unmapped_locked(file_id, entry,
                             fmt::format("kept {} s for another process to map it", kKeepUnmapped.count()));
    }
  }
  erase_unreferenced_locked();
  Clock::time_point due = Clock::time_point::max();
  for (auto& [file_id, entry] : entries_) {
    if (waits_for_retry(entry) && now >= entry.next_retry) load(file_id, entry, now);
    if (kept_unmapped(entry)) due = std::min(due, entry.unmapped_since + kKeepUnmapped);
    if (waits_for_retry(entry)) due = std::min(due, entry.next_retry);
  }
  scan_due_ = std::min(scan_due_.load(), due);
}

void ExecutableInfoManager::unload_unmapped() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [file_id, entry] : entries_) {
    if (kept_unmapped(entry)) unload_unmapped_locked(file_id, entry, "the agent stops");
  }
  erase_unreferenced_locked();
}

void ExecutableInfoManager::mark_sampled(uint64_t file_id, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(status_mutex_);
  sampled_[file_id] = now;
}

void ExecutableInfoManager::apply_sampled_locked() {
  std::unordered_map<uint64_t, Clock::time_point> sampled;
  {
    std::lock_guard<std::mutex> status_lock(status_mutex_);
    sampled.swap(sampled_);
  }
  for (const auto& [file_id, when] : sampled) {
    auto it = entries_.find(file_id);
    if (it == entries_.end()) continue;
    // A load since the mark counts as later use too.
    it->second.last_sampled = std::max(it->second.last_sampled, when);
    if (it->second.evicted) {
      // Wanted again: back in the retry queue, now.
      it->second.evicted = false;
      it->second.next_retry = when;
      scan_due_ = Clock::time_point::min();
    }
  }
}

size_t ExecutableInfoManager::references(uint64_t file_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(file_id);
  return it == entries_.end() ? 0 : it->second.references;
}

bool ExecutableInfoManager::is_loaded(uint64_t file_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(file_id);
  return it != entries_.end() && it->second.loaded;
}

bool ExecutableInfoManager::settled(uint64_t file_id) const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return settled_.count(file_id) > 0;
}

bool ExecutableInfoManager::referenced(uint64_t file_id) const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return referenced_.count(file_id) > 0;
}

std::string ExecutableInfoManager::building() const {
  std::lock_guard<std::mutex> lock(status_mutex_);
  return building_;
}

ExecutableStats ExecutableInfoManager::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ExecutableStats s = stats_;
  s.deferred = static_cast<uint64_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const auto& e) { return waits_for_retry(e.second); }));
  return s;
}

}  // namespace omniprof
