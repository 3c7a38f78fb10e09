#include "executables/executable_info_manager.h"

#include <algorithm>

#include "log/logger.h"
#include "plugins/plugin_host.h"

namespace omniprof {

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
    for (const auto& other : plugins_.plugins()) {
      if (other.get() == plugin.get()) break;
      if (other->state == PluginState::kLoaded) PluginHost::unload_executable(*other, file_id);
    }
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

bool ExecutableInfoManager::evict_one(uint64_t for_file_id, Clock::time_point now) {
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
  loader_.unload(oldest_id);
  oldest->loaded = false;
  oldest->evicted = true;
  stats_.loaded--;
  stats_.evicted++;
  log().info("unloaded {} ({:#x}), not sampled for {} s, to make room",
             oldest->name, oldest_id,
             std::chrono::duration_cast<std::chrono::seconds>(now - oldest->last_sampled).count());
  return true;
}

bool ExecutableInfoManager::load(uint64_t file_id, Entry& entry, Clock::time_point now) {
  std::string error;
  omniprof_status status = loader_.load(file_id, entry.path, error);
  while (status == OMNIPROF_ERR_NO_SPACE && evict_one(file_id, now)) {
    error.clear();
    status = loader_.load(file_id, entry.path, error);
  }
  if (status == OMNIPROF_OK) {
    entry.loaded = true;
    entry.evicted = false;
    entry.backoff = std::chrono::seconds(0);
    entry.last_sampled = now;
    stats_.loaded++;
    // The plugin logged what it left out; the host counts it.
    if (!error.empty()) stats_.partial_loads++;
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
  log().warn("{} ({:#x}): {}; retrying in {} s", entry.name, file_id, entry.last_error, entry.backoff.count());
  return false;
}

void ExecutableInfoManager::add_or_inc_ref(uint64_t file_id, const std::string& path,
                                           std::shared_ptr<const void> keep_alive, const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& entry = entries_[file_id];
  const bool first = entry.references++ == 0;
  if (!first && entry.loaded) return;  // fast path: already known
  // A deferred entry retries from the newest path: the one it had may have
  // been the map_files entry of a process gone since.
  entry.path = path;
  entry.keep_alive = std::move(keep_alive);
  entry.name = name.empty() || name == path ? path : name + " (" + path + ")";
  if (first) load(file_id, entry, Clock::now());
}

void ExecutableInfoManager::remove_or_dec_ref(uint64_t file_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(file_id);
  if (it == entries_.end() || it->second.references == 0) return;
  if (--it->second.references > 0) return;
  if (it->second.loaded) {
    loader_.unload(file_id);
    stats_.loaded--;
    stats_.unloaded++;
  }
  entries_.erase(it);
}

void ExecutableInfoManager::retry_deferred(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [file_id, entry] : entries_) {
    if (waits_for_retry(entry) && now >= entry.next_retry) load(file_id, entry, now);
  }
}

void ExecutableInfoManager::mark_sampled(uint64_t file_id, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(file_id);
  if (it == entries_.end()) return;
  it->second.last_sampled = now;
  if (it->second.evicted) {
    // Wanted again: back in the retry queue, now.
    it->second.evicted = false;
    it->second.next_retry = now;
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

ExecutableStats ExecutableInfoManager::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ExecutableStats s = stats_;
  s.deferred = static_cast<uint64_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const auto& e) { return waits_for_retry(e.second); }));
  return s;
}

}  // namespace omniprof
