#include "process/process_tracker.h"

#include <dirent.h>
#include <fcntl.h>
#include <xxhash.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "bpf/bpf_maps.h"
#include "omniprof/support/unique_fd.h"
#include "executables/executable_info_manager.h"
#include "omniprof/support/regular_file.h"
#include "executables/open_executables.h"
#include "process/mapped_file.h"
#include "symbolize/elf_symbolizer.h"
#include "log/logger.h"
#include "plugins/plugin_host.h"

namespace omniprof {

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string read_link(const std::string& path) {
  char buffer[4096];
  ssize_t n = readlink(path.c_str(), buffer, sizeof(buffer) - 1);
  if (n < 0) return {};
  return std::string(buffer, static_cast<size_t>(n));
}

}  // namespace

ProcessTracker::~ProcessTracker() {
  for (const auto& [pid, snapshot] : processes_) release(*snapshot);
  if (!vdso_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(vdso_dir_, ec);
  }
}

std::string ProcessTracker::vdso_copy(int32_t pid, const ProcMapping& mapping) {
  uint64_t size = mapping.end - mapping.start;
  if (size == 0 || size > (1u << 20)) return {};
  std::string image(size, '\0');
  auto mem = open_regular_file(fmt::format("/proc/{}/mem", pid));
  if (!mem || pread(mem->fd.get(), image.data(), size, static_cast<off_t>(mapping.start)) !=
                  static_cast<ssize_t>(size)) {
    return {};
  }
  uint64_t hash = XXH3_64bits(image.data(), image.size());
  std::lock_guard<std::mutex> lock(vdso_mutex_);
  if (auto it = vdso_files_.find(hash); it != vdso_files_.end()) return it->second;
  if (vdso_dir_.empty()) {
    std::string templ = (std::filesystem::temp_directory_path() / "omniprof-vdso-XXXXXX").string();
    if (!mkdtemp(templ.data())) return {};
    vdso_dir_ = templ;
  }
  std::string path = fmt::format("{}/vdso-{:016x}.so", vdso_dir_, hash);
  std::ofstream out(path, std::ios::binary);
  out.write(image.data(), static_cast<std::streamsize>(image.size()));
  if (!out) return {};
  vdso_files_.emplace(hash, path);
  return path;
}

void ProcessTracker::track_executables(ExecutableInfoManager* executables, OpenExecutables* files,
                                       ElfSymbolizer* symbolizer) {
  executables_ = executables;
  files_ = files;
  symbolizer_ = symbolizer;
}

void ProcessTracker::resolve_executables(ProcessSnapshot& snapshot) {
  snapshot.executables.assign(snapshot.mappings.size(), ExecutableRef{});
  for (size_t i = 0; i < snapshot.mappings.size(); ++i) {
    const ProcMapping& m = snapshot.mappings[i];
    ExecutableRef& ref = snapshot.executables[i];
    Result<OpenedMapping> opened = make_error("not a file");
    if (m.path == "[vdso]") {
      if (snapshot.vdso_path.empty()) snapshot.vdso_path = vdso_copy(snapshot.pid, m);
      if (snapshot.vdso_path.empty()) continue;
      auto copy = open_regular_file(snapshot.vdso_path);
      opened = copy ? Result<OpenedMapping>(OpenedMapping{std::move(*copy), snapshot.vdso_path})
                    : Result<OpenedMapping>(copy.error());
    } else if (m.is_file_backed()) {
      // The file the process maps, not what its path names now.
      opened = open_mapped_file(snapshot.pid, m);
    } else {
      continue;  // anonymous memory (JIT code), [vsyscall]
    }
    if (!opened) {
      count(&ProcessTrackerStats::unidentified_files);
      log().debug("{}", opened.error().message);
      continue;
    }
    ref.path = opened->path;
    if (!files_ || !symbolizer_) continue;
    auto id = files_->identify(std::move(opened->file), opened->path);
    if (!id) {
      count(&ProcessTrackerStats::unidentified_files);
      log().debug("pid {}: {}", snapshot.pid, id.error().message);
      continue;
    }
    if (id->file) {
      ref.file = id->file;
      ref.path = id->file->path;
    }
    // The debug file is looked for under the process's own root, by the
    // file's name there (the descriptor path names nothing).
    const std::string root = fmt::format("/proc/{}/root", snapshot.pid);
    const ElfSymbolizer::DebugLookup debug{m.path == "[vdso]" ? std::string_view() : std::string_view(m.path),
                                           root};
    auto vaddr = symbolizer_->runtime_to_elf_vaddr(id->file_id, ref.path, m.start, m.start, m.offset, debug);
    if (!vaddr) {
      count(&ProcessTrackerStats::unidentified_files);
      log().debug("pid {}: {}", snapshot.pid, vaddr.error().message);
      continue;
    }
    ref.file_id = id->file_id;
    ref.load_bias = m.start - *vaddr;
  }
}

bool ProcessTracker::same_mappings(const ProcessSnapshot& a, const ProcessSnapshot& b) {
  if (a.mappings.size() != b.mappings.size()) return false;
  for (size_t i = 0; i < a.mappings.size(); ++i) {
    const auto& x = a.mappings[i];
    const auto& y = b.mappings[i];
    if (x.start != y.start || x.end != y.end || x.offset != y.offset || x.inode != y.inode || x.path != y.path) {
      return false;
    }
  }
  return true;
}

std::string ProcessTracker::release(const ProcessSnapshot& snapshot) {
  if (!executables_) return {};
  std::vector<uint64_t> seen;
  std::string unloaded;
  for (size_t i = 0; i < snapshot.executables.size(); ++i) {
    const ExecutableRef& e = snapshot.executables[i];
    if (e.file_id == 0 || std::find(seen.begin(), seen.end(), e.file_id) != seen.end()) continue;
    seen.push_back(e.file_id);
    if (executables_->remove_or_dec_ref(e.file_id) && i < snapshot.mappings.size()) {
      unloaded += (unloaded.empty() ? "" : ", ") + snapshot.mappings[i].path;
    }
  }
  return unloaded;
}

std::optional<std::vector<ProcMapping>> ProcessTracker::executable_mappings(int32_t pid) {
  auto maps = read_proc_maps(pid);
  if (!maps) return std::nullopt;
  std::vector<ProcMapping> mappings;
  for (auto& m : *maps) {
    if (m.executable()) mappings.push_back(std::move(m));
  }
  std::sort(mappings.begin(), mappings.end(),
            [](const ProcMapping& a, const ProcMapping& b) { return a.start < b.start; });
  return mappings;
}

void ProcessTracker::set_resource_settings(ResourceSettings settings) { resource_settings_ = std::move(settings); }

std::shared_ptr<ProcessSnapshot> ProcessTracker::describe(int32_t pid) {
  auto mappings = executable_mappings(pid);
  if (!mappings) return nullptr;
  auto snapshot = std::make_shared<ProcessSnapshot>();
  snapshot->pid = pid;
  snapshot->comm = read_first_line(fmt::format("/proc/{}/comm", pid));
  snapshot->exe = read_link(fmt::format("/proc/{}/exe", pid));
  snapshot->resource = std::make_shared<const ResourceAttributes>(
      process_resource(resource_settings_, read_process_facts(pid, snapshot->comm, snapshot->exe), host_attributes_));
  snapshot->mappings = std::move(*mappings);
  resolve_executables(*snapshot);
  return snapshot;
}

std::shared_ptr<ProcessSnapshot> ProcessTracker::publish(const std::shared_ptr<ProcessSnapshot>& snapshot) {
  // References first (each file seen for the first time is marked as being
  // built), then process_info, then the table builds: walks of the process
  // meanwhile use the tables already stored and count those being built
  // (native.walks_table_building), instead of walking by frame pointers
  // alone as a process without process_info does.
  std::vector<uint64_t> to_load;
  if (executables_) {
    std::vector<ExecutableInfoManager::Reference> references;
    std::vector<uint64_t> seen;
    for (size_t i = 0; i < snapshot->executables.size(); ++i) {
      uint64_t id = snapshot->executables[i].file_id;
      if (id == 0 || std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
      seen.push_back(id);
      references.push_back({id, snapshot->host_path(snapshot->mappings[i]), snapshot->executables[i].file,
                            snapshot->mappings[i].path});
    }
    to_load = executables_->add_refs(references);
  }
  write_process_info(*snapshot);
  std::shared_ptr<ProcessSnapshot> replaced = snapshot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    processes_[snapshot->pid].swap(replaced);
  }
  if (executables_) executables_->load_referenced(to_load);
  return replaced;
}

void ProcessTracker::write_process_info(ProcessSnapshot& snapshot) {
  if (!maps_) return;
  // ~4 KiB: on the heap, not on the stack.
  auto info_storage = std::make_unique<omniprof_process_info>();
  omniprof_process_info& info = *info_storage;
  std::memset(&info, 0, sizeof(info));
  info.flags = OMNIPROF_PROCESS_KNOWN;
  for (size_t i = 0; i < snapshot.mappings.size(); ++i) {
    if (info.num_mappings == OMNIPROF_MAX_MAPPINGS) {
      info.flags |= OMNIPROF_PROCESS_MAPPINGS_TRUNCATED;
      count(&ProcessTrackerStats::mappings_truncated);
      break;
    }
    const auto& m = snapshot.mappings[i];
    const auto& e = snapshot.executables[i];
    info.mappings[info.num_mappings++] = omniprof_process_mapping{m.start, m.end, e.load_bias, e.file_id};
  }
  // Interpreter plugins claim processes here (detect_process); the native
  // plugin walks every process and needs nothing per process yet.
  if (plugins_) {
    std::vector<omniprof_mapping> mappings;
    std::vector<std::string> paths;
    paths.reserve(snapshot.mappings.size());
    for (const auto& m : snapshot.mappings) paths.push_back(snapshot.host_path(m));
    std::vector<const char*> names;
    for (size_t i = 0; i < snapshot.mappings.size(); ++i) {
      const auto& m = snapshot.mappings[i];
      const auto& e = snapshot.executables[i];
      mappings.push_back({m.start, m.end, m.offset, e.load_bias, e.file_id, paths[i].c_str()});
      names.push_back(m.path.c_str());
    }
    std::string exe = fmt::format("/proc/{}/exe", snapshot.pid);
    omniprof_process process{snapshot.pid, exe.c_str(), snapshot.comm.c_str(), mappings.data(),
                             mappings.size(), names.data(), nullptr};  // descriptions: PluginHost's
    snapshot.runtime.clear();
    snapshot.runtime_version.clear();
    snapshot.interpreter_file_ids.clear();
    for (Plugin* plugin : plugins_in_claim_order(plugins_->plugins())) {
      omniprof_process_attach attach{};
      std::string error;
      omniprof_status status = PluginHost::detect_process(*plugin, process, attach, error);
      if (status == OMNIPROF_OK) {
        info.interpreter_slot = plugin->slot;
        std::memcpy(info.interpreter_data, attach.interpreter_data, sizeof(info.interpreter_data));
        uint32_t ranges = std::min<uint32_t>(attach.num_interpreter_ranges, OMNIPROF_MAX_INTERPRETER_RANGES);
        for (uint32_t r = 0; r < ranges; ++r) {
          info.interpreter_ranges[r] = {attach.interpreter_ranges[r].start, attach.interpreter_ranges[r].end};
        }
        info.num_interpreter_ranges = ranges;
        snapshot.runtime = plugin->runtime;
        snapshot.runtime_version.assign(attach.runtime_version,
                                        strnlen(attach.runtime_version, sizeof(attach.runtime_version)));
        const uint32_t files = std::min<uint32_t>(attach.num_interpreter_file_ids, OMNIPROF_MAX_INTERPRETER_FILES);
        for (uint32_t f = 0; f < files; ++f) {
          if (attach.interpreter_file_ids[f] != 0) snapshot.interpreter_file_ids.push_back(attach.interpreter_file_ids[f]);
        }
        break;
      }
      if (status != OMNIPROF_NOT_MINE) {
        log().warn("plugin {}: pid {} ({}): {}", plugin->name, snapshot.pid, snapshot.comm, error);
      }
    }
  }
  if (auto r = maps_->write_process_info(snapshot.pid, info); !r) {
    count(&ProcessTrackerStats::process_info_errors);
    log().warn("{} (raise maps.processes in the config)", r.error().message);
  }
}

void ProcessTracker::scan(const std::vector<int32_t>& pids, const ScanObserver& on_read,
                          const std::atomic<bool>* stop) {
  std::vector<int32_t> targets = pids;
  if (targets.empty()) {
    DIR* dir = opendir("/proc");
    if (!dir) return;
    while (dirent* entry = readdir(dir)) {
      char* end = nullptr;
      long pid = strtol(entry->d_name, &end, 10);
      if (*end == '\0' && pid > 0) targets.push_back(static_cast<int32_t>(pid));
    }
    closedir(dir);
  }
  auto stopped = [stop] { return stop && stop->load(); };
  // Every process is read before any table is built (reading is quick, the
  // builds are not): the observer knows at once how many files there are.
  std::vector<std::shared_ptr<ProcessSnapshot>> read;
  for (int32_t pid : targets) {
    if (stopped()) return;
    if (auto snapshot = describe(pid)) read.push_back(std::move(snapshot));
  }
  if (on_read) {
    std::vector<ScannedFile> files;
    std::unordered_set<uint64_t> seen;
    for (const auto& snapshot : read) {
      for (size_t i = 0; i < snapshot->executables.size(); ++i) {
        uint64_t id = snapshot->executables[i].file_id;
        if (id != 0 && seen.insert(id).second) files.push_back({id, snapshot->mappings[i].path});
      }
    }
    on_read(files);
  }
  for (auto& snapshot : read) {
    if (stopped()) return;
    const int32_t pid = snapshot->pid;
    get(pid, std::move(snapshot));
  }
}

bool ProcessTracker::busy(const std::vector<int32_t>& pids) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int32_t pid : pids) {
    if (claimed_.count(pid)) return true;
  }
  return false;
}

void ProcessTracker::count(uint64_t ProcessTrackerStats::*counter) {
  std::lock_guard<std::mutex> lock(mutex_);
  (stats_.*counter)++;
}

// Releases a pid's claim however the operation ends (an exception from
// /proc parsing or a plugin must not leave the pid claimed forever).
class ProcessTracker::PidClaim {
 public:
  PidClaim(ProcessTracker& tracker, int32_t pid) : tracker_(tracker), pid_(pid) {}
  ~PidClaim() { tracker_.release_claim(pid_); }
  PidClaim(const PidClaim&) = delete;
  PidClaim& operator=(const PidClaim&) = delete;

 private:
  ProcessTracker& tracker_;
  int32_t pid_;
};

void ProcessTracker::wait_and_claim(std::unique_lock<std::mutex>& lock, int32_t pid) {
  claim_released_.wait(lock, [&] { return !claimed_.count(pid); });
  claimed_.insert(pid);
}

void ProcessTracker::release_claim(int32_t pid) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    claimed_.erase(pid);
    if (exited_while_claimed_.erase(pid) > 0) mark_exited_locked(pid);
  }
  claim_released_.notify_all();
  // An exit noticed meanwhile reaches plugins at the round's end (end_round).
}

void ProcessTracker::mark_exited_locked(int32_t pid) {
  auto it = processes_.find(pid);
  if (it != processes_.end()) {
    auto copy = std::make_shared<ProcessSnapshot>(*it->second);
    copy->exited = true;
    it->second = copy;
  }
  if (maps_) maps_->delete_process_info(pid);
}

std::shared_ptr<const ProcessSnapshot> ProcessTracker::get(int32_t pid) { return get(pid, nullptr); }

std::shared_ptr<const ProcessSnapshot> ProcessTracker::get(int32_t pid, std::shared_ptr<ProcessSnapshot> read) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Fast path, and the answer of an operation on this pid that was in flight.
    auto known = [&]() -> bool { return processes_.count(pid) || gone_this_round_.count(pid); };
    claim_released_.wait(lock, [&] { return known() || !claimed_.count(pid); });
    if (auto it = processes_.find(pid); it != processes_.end()) return it->second;
    if (gone_this_round_.count(pid)) return nullptr;
    claimed_.insert(pid);
  }
  PidClaim claim(*this, pid);
  // Read a while ago (scan): read again if it mapped or unmapped anything
  // since (dlopen, exec), or is gone.
  std::shared_ptr<ProcessSnapshot> snapshot;
  if (read) {
    auto now = executable_mappings(pid);
    ProcessSnapshot current;
    if (now) current.mappings = std::move(*now);
    if (now && same_mappings(*read, current)) snapshot = std::move(read);
  }
  if (!snapshot) snapshot = describe(pid);
  if (!snapshot) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.gone_before_read++;
    gone_this_round_[pid] = true;
    return nullptr;
  }
  count(&ProcessTrackerStats::described);
  publish(snapshot);
  return snapshot;
}

std::shared_ptr<const ProcessSnapshot> ProcessTracker::refresh_for_unknown_address(int32_t pid) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Being described, re-read or refreshed already: what that publishes is
    // as fresh as this would be; the event thread does not wait for its
    // table builds.
    if (auto it = processes_.find(pid); it != processes_.end() && claimed_.count(pid)) return it->second;
    wait_and_claim(lock, pid);
  }
  PidClaim claim(*this, pid);
  std::shared_ptr<ProcessSnapshot> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = processes_.find(pid);
    auto now = std::chrono::steady_clock::now();
    auto last = last_refresh_.find(pid);
    bool recent = last != last_refresh_.end() && now - last->second < kRefreshInterval;
    if (it != processes_.end() && (it->second->exited || recent)) return it->second;
    last_refresh_[pid] = now;
    if (it != processes_.end()) old = it->second;
  }
  auto snapshot = describe(pid);
  if (!snapshot) return old;
  count(&ProcessTrackerStats::maps_refreshes);
  if (old && same_mappings(*old, *snapshot)) return old;
  // Before releasing the old mappings: what both map stays loaded.
  if (auto replaced = publish(snapshot)) release(*replaced);
  return snapshot;
}

void ProcessTracker::forget_in_plugins(int32_t pid) {
  if (!plugins_) return;
  for (const auto& plugin : plugins_->plugins()) {
    if (plugin->state == PluginState::kLoaded) PluginHost::process_gone(*plugin, pid);
  }
}

void ProcessTracker::handle_event(const omniprof_event& event) {
  int32_t pid = static_cast<int32_t>(event.pid);
  switch (event.type) {
    case OMNIPROF_EVENT_PROCESS_UNKNOWN:
      get(pid);
      break;
    case OMNIPROF_EVENT_EXEC: {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wait_and_claim(lock, pid);
      }
      PidClaim claim(*this, pid);
      forget_in_plugins(pid);
      auto snapshot = describe(pid);
      if (!snapshot) break;
      count(&ProcessTrackerStats::described);
      // Before releasing the old image: shared libraries stay loaded.
      if (auto replaced = publish(snapshot)) release(*replaced);
      break;
    }
    case OMNIPROF_EVENT_MAPPINGS_STALE:
      refresh_for_unknown_address(pid);
      break;
    case OMNIPROF_EVENT_EXIT: {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (claimed_.count(pid)) {
          // Being described or refreshed: applied when that is published.
          exited_while_claimed_.insert(pid);
          break;
        }
        mark_exited_locked(pid);
      }
      // Plugins hear of it at the round's end (end_round), once this round's
      // frames of the process are named: an interpreter plugin names them
      // from what it read while the process lived.
      break;
    }
    default:
      log().debug("unknown BPF event type {} for pid {}", event.type, event.pid);
  }
}

void ProcessTracker::end_round() {
  std::vector<std::shared_ptr<ProcessSnapshot>> forgotten;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone_this_round_.clear();
    for (auto it = processes_.begin(); it != processes_.end();) {
      // A claimed pid is being republished: it is looked at next round.
      bool gone = !claimed_.count(it->first) &&
                  (it->second->exited || access(fmt::format("/proc/{}", it->first).c_str(), F_OK) != 0);
      if (gone) {
        last_refresh_.erase(it->first);
        if (maps_) maps_->delete_process_info(it->first);
        forgotten.push_back(std::move(it->second));
        it = processes_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // The last reference to an executable unloads its table in the plugins.
  // Which process took which tables with it is logged (debug) per process:
  // host.executables_unloaded counts them machine-wide.
  for (const auto& snapshot : forgotten) {
    const std::string unloaded = release(*snapshot);
    if (!unloaded.empty()) {
      log().debug("pid {} gone: unwind tables unloaded (no other process maps them): {}", snapshot->pid, unloaded);
    }
  }
  // After the round's profile is assembled (the agent calls end_round then):
  // plugins may drop what they kept to name the process's frames.
  for (const auto& snapshot : forgotten) forget_in_plugins(snapshot->pid);
}

std::shared_ptr<const KnownProcesses> ProcessTracker::snapshot() const {
  auto known = std::make_shared<KnownProcesses>();
  std::lock_guard<std::mutex> lock(mutex_);
  known->by_pid.insert(processes_.begin(), processes_.end());
  return known;
}

ProcessTrackerStats ProcessTracker::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

size_t ProcessTracker::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return processes_.size();
}

}  // namespace omniprof
