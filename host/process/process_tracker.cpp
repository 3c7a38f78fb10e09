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
#include "common/clock.h"
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
  // Nobody is left to map what is kept: the plugins hear of every file.
  if (executables_) executables_->unload_unmapped();
  if (!vdso_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(vdso_dir_, ec);
  }
}

std::string ProcessTracker::vdso_copy(int32_t pid, const ProcMapping& mapping) {
  uint64_t size = mapping.end - mapping.start;
  if (size == 0 || size > (1u << 20)) return {};
  {
    // Every 64-bit process of one kernel maps the same image: with one copy
    // made, of this size, it is that one (no read of the process).
    std::lock_guard<std::mutex> lock(vdso_mutex_);
    if (vdso_files_.size() == 1 && vdso_sizes_.count(size)) return vdso_files_.begin()->second;
  }
  std::string image(size, '\0');
  auto mem = open_regular_file(fmt::format("/proc/{}/mem", pid));
  if (!mem || pread(mem->fd.get(), image.data(), size, static_cast<off_t>(mapping.start)) !=
                  static_cast<ssize_t>(size)) {
    // Gone already (described from the kernel's records): every process of
    // one kernel maps the same image, so the copy made for another serves.
    std::lock_guard<std::mutex> lock(vdso_mutex_);
    return vdso_files_.size() == 1 ? vdso_files_.begin()->second : std::string();
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
  vdso_sizes_.insert(size);
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
  for (size_t i = 0; i < snapshot.mappings.size(); ++i) resolve_executable(snapshot, i);
}

void ProcessTracker::resolve_executable(ProcessSnapshot& snapshot, size_t index) {
  const ProcMapping& m = snapshot.mappings[index];
  ExecutableRef& ref = snapshot.executables[index];
  ref = ExecutableRef{};
  Result<OpenedMapping> opened = make_error("not a file");
  // An identified file whose descriptor is held: its id and load bias
  // without opening anything.
  auto use_known = [&](std::shared_ptr<const OpenExecutable> known, std::string_view name) {
    if (!known || !symbolizer_) return false;
    const std::string root = fmt::format("/proc/{}/root", snapshot.pid);
    auto vaddr = symbolizer_->runtime_to_elf_vaddr(known->file_id, known->path, m.start, m.start, m.offset,
                                                   ElfSymbolizer::DebugLookup{name, root});
    if (!vaddr) return false;
    ref.file_id = known->file_id;
    ref.path = known->path;
    ref.file = std::move(known);
    ref.load_bias = m.start - *vaddr;
    return true;
  };
  if (m.path == "[vdso]") {
    if (snapshot.vdso_path.empty()) snapshot.vdso_path = vdso_copy(snapshot.pid, m);
    if (snapshot.vdso_path.empty()) return;
    std::shared_ptr<const OpenExecutable> known;
    {
      std::lock_guard<std::mutex> lock(vdso_mutex_);
      if (auto it = vdso_opened_.find(snapshot.vdso_path); it != vdso_opened_.end()) known = it->second.lock();
    }
    if (use_known(std::move(known), std::string_view())) return;
    auto copy = open_regular_file(snapshot.vdso_path);
    opened = copy ? Result<OpenedMapping>(OpenedMapping{std::move(*copy), snapshot.vdso_path})
                  : Result<OpenedMapping>(copy.error());
  } else if (m.is_file_backed()) {
    const MappedFileKey key{m.dev_major, m.dev_minor, m.inode};
    std::shared_ptr<const OpenExecutable> known;
    {
      std::lock_guard<std::mutex> lock(mapped_files_mutex_);
      if (auto it = mapped_files_.find(key); it != mapped_files_.end()) known = it->second.lock();
    }
    if (use_known(std::move(known), m.path)) return;
    // The file the process maps, not what its path names now.
    opened = open_mapped_file(snapshot.pid, m);
  } else {
    return;  // anonymous memory (JIT code), [vsyscall]
  }
  if (!opened) {
    count(&ProcessTrackerStats::unidentified_files);
    log().debug("{}", opened.error().message);
    return;
  }
  ref.path = opened->path;
  if (!files_ || !symbolizer_) return;
  auto id = files_->identify(std::move(opened->file), opened->path);
  if (!id) {
    count(&ProcessTrackerStats::unidentified_files);
    log().debug("pid {}: {}", snapshot.pid, id.error().message);
    return;
  }
  if (id->file) {
    ref.file = id->file;
    ref.path = id->file->path;
  }
  // The debug file is looked for under the process's own root, by the
  // file's name there (the descriptor path names nothing).
  const std::string root = fmt::format("/proc/{}/root", snapshot.pid);
  const ElfSymbolizer::DebugLookup debug{m.path == "[vdso]" ? std::string_view() : std::string_view(m.path), root};
  auto vaddr = symbolizer_->runtime_to_elf_vaddr(id->file_id, ref.path, m.start, m.start, m.offset, debug);
  if (!vaddr) {
    count(&ProcessTrackerStats::unidentified_files);
    log().debug("pid {}: {}", snapshot.pid, vaddr.error().message);
    return;
  }
  ref.file_id = id->file_id;
  ref.load_bias = m.start - *vaddr;
  if (ref.file && m.path == "[vdso]") {
    std::lock_guard<std::mutex> lock(vdso_mutex_);
    vdso_opened_[snapshot.vdso_path] = ref.file;
  } else if (ref.file && m.is_file_backed()) {
    std::lock_guard<std::mutex> lock(mapped_files_mutex_);
    if (mapped_files_.size() >= 4 * OpenExecutables::kDefaultMaxOpen) {
      std::erase_if(mapped_files_, [](const auto& entry) { return entry.second.expired(); });
    }
    mapped_files_[MappedFileKey{m.dev_major, m.dev_minor, m.inode}] = ref.file;
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    mappings_read_ns_[pid] = monotonic_ns();
  }
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

std::shared_ptr<const ResourceAttributes> ProcessTracker::resource_for(const ProcessFacts& facts) const {
  return std::make_shared<const ResourceAttributes>(process_resource(resource_settings_, facts, host_attributes_));
}

std::shared_ptr<ProcessSnapshot> ProcessTracker::describe(int32_t pid) {
  auto mappings = executable_mappings(pid);
  if (!mappings) return nullptr;
  auto snapshot = std::make_shared<ProcessSnapshot>();
  snapshot->pid = pid;
  snapshot->comm = read_first_line(fmt::format("/proc/{}/comm", pid));
  snapshot->exe = read_link(fmt::format("/proc/{}/exe", pid));
  snapshot->facts = std::make_shared<const ProcessFacts>(read_process_facts(pid, snapshot->comm, snapshot->exe));
  snapshot->resource = resource_for(*snapshot->facts);
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
  // ~4 KiB: not on the stack; one per thread that publishes, not one per
  // publish (a machine starting hundreds of processes a second publishes
  // a thousand times a second).
  thread_local std::unique_ptr<omniprof_process_info> info_storage = std::make_unique<omniprof_process_info>();
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
  // Already there (the kernel's copy at the fork), or gone with its process
  // (its exit record came with the records that describe it): nothing will
  // walk with what a write would bring.
  if (snapshot.in_process_info_since_ns != 0 || snapshot.exited) return;
  if (auto r = maps_->write_process_info(snapshot.pid, info); r) {
    snapshot.in_process_info_since_ns = monotonic_ns();
  } else {
    // Every process the machine starts is described now (process records):
    // a full map would otherwise log at each one. Counted always, logged at
    // most once a minute.
    uint64_t failures = 0;
    bool say = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failures = ++stats_.process_info_errors;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_process_info_warning_ >= std::chrono::minutes(1) || failures == 1) {
        last_process_info_warning_ = now;
        say = true;
      }
    }
    if (say) {
      log().warn("{} (raise maps.processes in the config; {} such failures so far, host.process_info_errors)",
                 r.error().message, failures);
    }
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
    exit_noted_at_drain_[pid] = drains_;
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

void ProcessTracker::allow_notes_again(int32_t pid) {
  if (maps_) maps_->allow_request(OMNIPROF_EVENT_MAPPINGS_STALE, pid);
}

std::shared_ptr<const ProcessSnapshot> ProcessTracker::refresh_for_unknown_address(int32_t pid, uint64_t noted_ns) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = processes_.find(pid);
    // Read since the walk noted it: that read saw what the walk missed
    // (the note can come after an exec's notice on another CPU's ring).
    if (auto read = mappings_read_ns_.find(pid);
        noted_ns != 0 && it != processes_.end() && read != mappings_read_ns_.end() && read->second > noted_ns) {
      return it->second;
    }
    // The records read since the note hold every mapping made before it,
    // and the process's view from them is published or about to be (held
    // for its exec's last mapping): the walk ran before it was. Only once
    // per process: a second note means the records miss a mapping (the
    // kernel lost a record), and /proc has it.
    if (noted_ns != 0 && it != processes_.end() && !it->second->exited && records_active_.load() &&
        records_read_ns_.load() > noted_ns && notes_answered_by_records_.insert(pid).second) {
      stats_.notes_answered_by_records++;
      std::shared_ptr<const ProcessSnapshot> current = it->second;
      lock.unlock();
      allow_notes_again(pid);
      return current;
    }
    if (it != processes_.end() && claimed_.count(pid)) {
      // Being described, re-read or refreshed already; the event thread does
      // not wait for its table builds. That read may have begun before what
      // the walk missed was mapped: BPF may note it again at once.
      std::shared_ptr<const ProcessSnapshot> current = it->second;
      lock.unlock();
      if (noted_ns != 0) allow_notes_again(pid);
      return current;
    }
    wait_and_claim(lock, pid);
  }
  PidClaim claim(*this, pid);
  std::shared_ptr<ProcessSnapshot> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = processes_.find(pid);
    // BPF's notes are limited by BPF; naming's requests here.
    auto now = std::chrono::steady_clock::now();
    auto last = last_refresh_.find(pid);
    bool recent = noted_ns == 0 && last != last_refresh_.end() && now - last->second < kRefreshInterval;
    if (it != processes_.end() && (it->second->exited || recent)) return it->second;
    if (noted_ns == 0) last_refresh_[pid] = now;
    if (it != processes_.end()) old = it->second;
  }
  count(&ProcessTrackerStats::maps_refreshes);
  return reread_claimed(pid, std::move(old));
}

std::shared_ptr<const ProcessSnapshot> ProcessTracker::reread_claimed(int32_t pid,
                                                                      std::shared_ptr<ProcessSnapshot> old) {
  auto snapshot = describe(pid);
  if (!snapshot) return old;
  if (old && same_mappings(*old, *snapshot)) return old;
  if (auto replaced = publish(snapshot)) {
    // The image it replaces names the samples taken in it: this read may
    // come before the exec notice does (BPF's note of a pc in no known
    // mapping, on another CPU's ring), or after an unmap. Before releasing
    // it: what both map stays loaded.
    keep_earlier_image(pid, replaced);
    release(*replaced);
  }
  allow_notes_again(pid);
  return snapshot;
}

void ProcessTracker::reread_execs_due() {
  const auto now = std::chrono::steady_clock::now();
  for (size_t delay = 0; delay < std::size(kExecRereadDelays); ++delay) {
    for (;;) {
      int32_t pid;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto& queue = exec_rereads_[delay];
        if (queue.empty() || now - queue.front().exec_noticed < kExecRereadDelays[delay]) break;
        const ExecReread due = queue.front();
        queue.pop_front();
        pid = due.pid;
        if (delay + 1 < std::size(kExecRereadDelays)) exec_rereads_[delay + 1].push_back(due);
      }
      std::shared_ptr<ProcessSnapshot> old;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        auto it = processes_.find(pid);
        // Gone, or described anew meanwhile (it is claimed: its describer
        // reads what this would).
        if (it == processes_.end() || it->second->exited || claimed_.count(pid)) continue;
        old = it->second;
        claimed_.insert(pid);
      }
      PidClaim claim(*this, pid);
      if (access(fmt::format("/proc/{}", pid).c_str(), F_OK) != 0) continue;
      count(&ProcessTrackerStats::exec_rereads);
      reread_claimed(pid, std::move(old));
    }
  }
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
      if (records_active_.load()) break;  // apply_records has it, with the mappings as they were made
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wait_and_claim(lock, pid);
      }
      PidClaim claim(*this, pid);
      forget_in_plugins(pid);
      auto snapshot = describe(pid);
      if (!snapshot) break;
      count(&ProcessTrackerStats::described);
      // Before releasing the old image: shared libraries stay loaded. The
      // old image names the samples taken in it (recent_images), unless a
      // read since the exec (reread_claimed) published this image and kept
      // the one before it already.
      if (auto replaced = publish(snapshot)) {
        if (!same_mappings(*replaced, *snapshot)) keep_earlier_image(pid, replaced);
        release(*replaced);
      }
      // The new image's first walks noting what ld.so maps after this read
      // are answered at once, not after the ld.so walks' note of a second ago.
      allow_notes_again(pid);
      std::lock_guard<std::mutex> lock(mutex_);
      size_t queued = 0;
      for (const auto& queue : exec_rereads_) queued += queue.size();
      if (queued >= kMaxExecRereads) {
        stats_.exec_rereads_dropped++;
        break;
      }
      exec_rereads_[0].push_back({pid, std::chrono::steady_clock::now()});
      break;
    }
    case OMNIPROF_EVENT_MAPPINGS_STALE:
      refresh_for_unknown_address(pid, event.ktime_ns);
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

ProcessTracker::RecordView* ProcessTracker::record_view(int32_t pid, std::unordered_map<int32_t, RecordView>& views,
                                                        bool read_proc) {
  if (auto it = views.find(pid); it != views.end()) return &it->second;
  if (auto it = pending_record_views_.find(pid); it != pending_record_views_.end()) {
    RecordView& view = views[pid] = std::move(it->second);
    pending_record_views_.erase(it);
    return &view;
  }
  std::shared_ptr<const ProcessSnapshot> known;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = processes_.find(pid); it != processes_.end() && !it->second->exited) known = it->second;
  }
  // Running since before the agent (or its exec record lost): read from
  // /proc now, once, so its children are known from their fork on.
  if (!known) {
    if (!read_proc) return nullptr;
    auto described = get(pid);
    if (!described || described->exited) return nullptr;
    known = std::move(described);
  }
  RecordView& view = views[pid];
  view.comm = known->comm;
  view.exe = known->exe;
  view.facts = known->facts;
  view.resource = known->resource;
  view.vdso_path = known->vdso_path;
  view.in_process_info_since_ns = known->in_process_info_since_ns;
  view.image = known;
  view.mappings_in_image = true;
  return &view;
}

void ProcessTracker::RecordView::materialize() {
  if (!mappings_in_image) return;
  mappings = image->mappings;
  executables = image->executables;
  executables.resize(mappings.size());
  resolved.assign(mappings.size(), 1);
  mappings_in_image = false;
}

void ProcessTracker::add_mapping(RecordView& view, const ProcMapping& mapping) {
  // A new mapping replaces whatever it overlaps (MAP_FIXED, a library
  // loaded where another was unmapped: perf reports no munmap).
  view.materialize();
  RecordView kept;
  auto keep = [&](const ProcMapping& m, size_t from) {
    kept.mappings.push_back(m);
    const bool whole = m.start == view.mappings[from].start && m.end == view.mappings[from].end;
    kept.executables.push_back(whole ? view.executables[from] : ExecutableRef{});
    kept.resolved.push_back(whole ? view.resolved[from] : 0);
  };
  for (size_t i = 0; i < view.mappings.size(); ++i) {
    const ProcMapping& m = view.mappings[i];
    if (m.end <= mapping.start || m.start >= mapping.end) {
      keep(m, i);
      continue;
    }
    if (m.start < mapping.start) {
      ProcMapping left = m;
      left.end = mapping.start;
      keep(left, i);
    }
    if (m.end > mapping.end) {
      ProcMapping right = m;
      right.offset += mapping.end - m.start;
      right.start = mapping.end;
      keep(right, i);
    }
  }
  size_t at = 0;
  while (at < kept.mappings.size() && kept.mappings[at].start < mapping.start) ++at;
  kept.mappings.insert(kept.mappings.begin() + static_cast<ptrdiff_t>(at), mapping);
  kept.executables.insert(kept.executables.begin() + static_cast<ptrdiff_t>(at), ExecutableRef{});
  kept.resolved.insert(kept.resolved.begin() + static_cast<ptrdiff_t>(at), 0);
  view.mappings = std::move(kept.mappings);
  view.executables = std::move(kept.executables);
  view.resolved = std::move(kept.resolved);
  view.in_process_info_since_ns = 0;
  view.fork_held_since_ns = 0;
  view.image.reset();
}

void ProcessTracker::publish_record_view(int32_t pid, RecordView& view) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_and_claim(lock, pid);
    gone_this_round_.erase(pid);
  }
  PidClaim claim(*this, pid);
  view.materialize();
  const bool copied_at_fork = view.in_process_info_since_ns != 0 && !view.exited;
  auto snapshot = std::make_shared<ProcessSnapshot>();
  snapshot->pid = pid;
  snapshot->comm = view.comm;
  snapshot->exe = view.exe;
  snapshot->vdso_path = view.vdso_path;
  snapshot->mappings = view.mappings;
  snapshot->executables = view.executables;
  snapshot->in_process_info_since_ns = view.in_process_info_since_ns;
  // Exited already: named from this snapshot, never walked with it.
  snapshot->exited = view.exited;
  for (size_t i = 0; i < snapshot->mappings.size(); ++i) {
    if (!view.resolved[i]) resolve_executable(*snapshot, i);
  }
  if (!view.facts) {
    view.facts = std::make_shared<const ProcessFacts>(read_process_facts(pid, snapshot->comm, snapshot->exe));
  }
  if (!view.resource) {
    view.resource = resource_for(*view.facts);
  }
  snapshot->facts = view.facts;
  snapshot->resource = view.resource;
  view.vdso_path = snapshot->vdso_path;
  view.executables = snapshot->executables;
  view.resolved.assign(view.mappings.size(), 1);
  // Before releasing the old image's references: what both map stays loaded.
  if (auto replaced = publish(snapshot); replaced && replaced != snapshot) release(*replaced);
  view.in_process_info_since_ns = snapshot->in_process_info_since_ns;
  view.image = snapshot;
  // From the first record to process_info holding the view: none for a
  // child the kernel gave its parent's entry at the fork.
  const uint64_t now_ns = monotonic_ns();
  const uint64_t since_ns = copied_at_fork ? view.first_record_ns : now_ns;
  const uint64_t delay_us = view.first_record_ns && since_ns > view.first_record_ns
                                ? (since_ns - view.first_record_ns) / 1000 : 0;
  view.first_record_ns = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.described_from_records++;
    stats_.record_delay_us_total += delay_us;
    stats_.record_delay_us_max = std::max(stats_.record_delay_us_max, delay_us);
    if (delay_us < 1000) stats_.record_delays_under_1ms++;
    else if (delay_us < 10000) stats_.record_delays_under_10ms++;
  }
  if (view.exited) {
    std::lock_guard<std::mutex> lock(mutex_);
    exited_while_claimed_.insert(pid);  // applied as the claim is released
  }
}

void ProcessTracker::read_deferred_facts() {
  const auto now = std::chrono::steady_clock::now();
  while (!deferred_facts_.empty() && now - deferred_facts_.front().second >= kFactsDelay) {
    const int32_t pid = deferred_facts_.front().first;
    deferred_facts_.pop_front();
    std::shared_ptr<const ProcessSnapshot> known;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = processes_.find(pid); it != processes_.end() && !it->second->exited) known = it->second;
    }
    if (!known || access(fmt::format("/proc/{}", pid).c_str(), F_OK) != 0) continue;
    auto facts = std::make_shared<const ProcessFacts>(read_process_facts(pid, known->comm, known->exe));
    auto resource = resource_for(*facts);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = processes_.find(pid);
    // Re-published meanwhile (its next mappings) it still has the facts it
    // inherited, unless an exec or /proc read replaced them.
    if (it == processes_.end() || it->second->facts != known->facts) continue;
    auto copy = std::make_shared<ProcessSnapshot>(*it->second);
    copy->facts = std::move(facts);
    copy->resource = std::move(resource);
    it->second = std::move(copy);
  }
}

int ProcessTracker::ms_until_due() const {
  std::optional<int64_t> due_ns;  // from now
  auto consider = [&](int64_t ns) { due_ns = std::min(due_ns.value_or(ns), ns); };
  if (!deferred_facts_.empty()) {
    const auto left = deferred_facts_.front().second + kFactsDelay - std::chrono::steady_clock::now();
    consider(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t delay = 0; delay < std::size(kExecRereadDelays); ++delay) {
      if (exec_rereads_[delay].empty()) continue;
      const auto left = exec_rereads_[delay].front().exec_noticed + kExecRereadDelays[delay] -
                        std::chrono::steady_clock::now();
      consider(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
    }
  }
  const uint64_t now_ns = monotonic_ns();
  for (const auto& [pid, view] : pending_record_views_) {
    if (view.fork_held_since_ns != 0) {
      consider(static_cast<int64_t>(view.fork_held_since_ns + kForkHoldNs) - static_cast<int64_t>(now_ns));
      continue;
    }
    if (view.exec_mapping_since_ns == 0 || !view.has_mappings()) continue;  // waits for records
    consider(static_cast<int64_t>(view.exec_mapping_since_ns + exec_mapping_wait_ns_) - static_cast<int64_t>(now_ns));
  }
  if (!due_ns) return -1;
  if (*due_ns <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((*due_ns + 999'999) / 1'000'000, INT32_MAX));
}

void ProcessTracker::apply_records(const std::vector<ProcessRecord>& records, uint64_t read_began_ns) {
  records_active_ = true;
  if (read_began_ns != 0) records_read_ns_ = read_began_ns;
  read_deferred_facts();
  // The processes these records touch, each published once at the end.
  std::unordered_map<int32_t, RecordView> views;
  std::vector<int32_t> order;
  auto touch = [&](int32_t pid) {
    if (std::find(order.begin(), order.end(), pid) == order.end()) order.push_back(pid);
  };
  auto noted = [&](int32_t pid, uint64_t time_ns) {
    if (auto it = views.find(pid); it != views.end() && it->second.first_record_ns == 0) {
      it->second.first_record_ns = time_ns;
    }
  };
  for (const ProcessRecord& record : records) {
    switch (record.kind) {
      case ProcessRecord::Kind::kFork: {
        RecordView* parent = record_view(record.parent_pid, views, true);
        if (!parent) {
          count(&ProcessTrackerStats::records_of_unknown);
          break;
        }
        RecordView child = *parent;
        child.exited = false;
        child.first_record_ns = 0;
        // The kernel copied the parent's entry as the fork ran (after its
        // record): the child's own when it already held the parent's view.
        const bool copied = fork_copies_ && parent->in_process_info_since_ns != 0 &&
                            parent->in_process_info_since_ns <= record.time_ns;
        child.in_process_info_since_ns = copied ? record.time_ns : 0;
        child.fork_held_since_ns = copied ? record.time_ns : 0;
        if (copied) count(&ProcessTrackerStats::forks_copied_in_kernel);
        views[record.pid] = std::move(child);
        noted(record.pid, record.time_ns);
        touch(record.pid);
        break;
      }
      case ProcessRecord::Kind::kExec: {
        RecordView view;
        view.comm = record.comm;
        view.exec_mapping_since_ns = record.time_ns;
        // Not from /proc: that shows the new image already.
        RecordView* before = record_view(record.pid, views, false);
        if (before && before->image) keep_earlier_image(record.pid, before->image);
        if (before && before->facts) {
          // The parent's cgroup and environment, this image's name (its
          // exe is the first mapping's path, set with it): read for real
          // if it lives kFactsDelay.
          auto facts = std::make_shared<ProcessFacts>(*before->facts);
          facts->comm = record.comm;
          facts->executable_path.clear();
          view.facts = std::move(facts);
          if (deferred_facts_.size() < kMaxPendingRecordViews) {
            deferred_facts_.emplace_back(record.pid, std::chrono::steady_clock::now());
          }
        }
        views[record.pid] = std::move(view);
        noted(record.pid, record.time_ns);
        touch(record.pid);
        break;
      }
      case ProcessRecord::Kind::kMmap: {
        RecordView* view = record_view(record.pid, views, true);
        if (!view) {
          count(&ProcessTrackerStats::records_of_unknown);
          break;
        }
        if (view->exe.empty()) {
          view->exe = record.mapping.path;  // an exec maps its executable first
          if (view->facts && view->facts->executable_path.empty()) {
            auto facts = std::make_shared<ProcessFacts>(*view->facts);
            facts->executable_path = view->exe;
            view->facts = std::move(facts);
          }
        }
        add_mapping(*view, record.mapping);
        if (record.mapping.path == "[vdso]") {
          view->exec_mapping_since_ns = 0;  // an exec's last mapping: its image starts next
          execs_end_with_vdso_ = true;      // this kernel sends them
        }
        noted(record.pid, record.time_ns);
        touch(record.pid);
        break;
      }
      case ProcessRecord::Kind::kExit:
        if (auto held = pending_record_views_.find(record.pid);
            held != pending_record_views_.end() && held->second.fork_held_since_ns != 0 && !views.count(record.pid)) {
          // A held child that never exec'd: published as it ends, to be named.
          views[record.pid] = std::move(held->second);
          pending_record_views_.erase(held);
          touch(record.pid);
        }
        if (auto it = views.find(record.pid); it != views.end()) {
          it->second.exited = true;
        } else {
          pending_record_views_.erase(record.pid);
          handle_event(omniprof_event{OMNIPROF_EVENT_EXIT, static_cast<uint32_t>(record.pid), 0});
        }
        break;
    }
  }
  // Views taken from those held (a held child that forked) go back unless
  // published; a parent's view read only for its fork is not published.
  for (const auto& [pid, view] : views) {
    if (view.fork_held_since_ns != 0 || view.exec_mapping_since_ns != 0) touch(pid);
  }
  const uint64_t now_ns = monotonic_ns();
  for (int32_t pid : order) {
    auto it = views.find(pid);
    if (it == views.end()) continue;
    RecordView& view = it->second;
    if (view.fork_held_since_ns != 0 && !view.exited && now_ns - view.fork_held_since_ns < kForkHoldNs &&
        (pending_record_views_.size() < kMaxPendingRecordViews || pending_record_views_.count(pid))) {
      count(&ProcessTrackerStats::forks_held);
      pending_record_views_[pid] = std::move(view);
      continue;
    }
    // An exec still mapping its image (kExecMappingWaitNs): nothing can
    // walk it yet. An exited one is published now, to be named.
    const bool image_not_started = execs_end_with_vdso_ && view.exec_mapping_since_ns != 0 && !view.exited &&
                                   now_ns - view.exec_mapping_since_ns < exec_mapping_wait_ns_;
    if (image_not_started && view.has_mappings()) count(&ProcessTrackerStats::publishes_held_for_exec);
    if (!view.has_mappings() || image_not_started) {
      // An exec whose mappings come in a later batch.
      if (view.exited) continue;
      if (pending_record_views_.size() >= kMaxPendingRecordViews) {
        // Execs whose exit record was lost: forget those that are gone.
        for (auto p = pending_record_views_.begin(); p != pending_record_views_.end();) {
          p = access(fmt::format("/proc/{}", p->first).c_str(), F_OK) != 0 ? pending_record_views_.erase(p)
                                                                             : std::next(p);
        }
      }
      if (pending_record_views_.size() >= kMaxPendingRecordViews && !pending_record_views_.count(pid)) {
        count(&ProcessTrackerStats::records_dropped);
        continue;
      }
      pending_record_views_[pid] = std::move(view);
      continue;
    }
    publish_record_view(pid, view);
  }
  // Held for an exec whose [vdso] record never came (lost): published once
  // the wait is over, at the first wake-up after it.
  std::vector<int32_t> overdue;
  for (const auto& [pid, view] : pending_record_views_) {
    const bool exec_overdue = view.exec_mapping_since_ns != 0 && view.has_mappings() &&
                              now_ns - view.exec_mapping_since_ns >= exec_mapping_wait_ns_;
    const bool fork_hold_over = view.fork_held_since_ns != 0 && now_ns - view.fork_held_since_ns >= kForkHoldNs;
    if (exec_overdue || fork_hold_over) overdue.push_back(pid);
  }
  for (int32_t pid : overdue) {
    RecordView view = std::move(pending_record_views_[pid]);
    pending_record_views_.erase(pid);
    publish_record_view(pid, view);
  }
}

void ProcessTracker::keep_earlier_image(int32_t pid, std::shared_ptr<const ProcessSnapshot> image) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (earlier_image_count_ >= kMaxEarlierImages) {
    stats_.earlier_images_dropped++;
    return;
  }
  earlier_images_[pid].push_back({std::move(image), drains_});
  earlier_image_count_++;
  stats_.earlier_images_kept++;
}

void ProcessTracker::prune_earlier_images_locked(
    const std::function<bool(int32_t pid, const EarlierImage& earlier)>& keep) {
  for (auto it = earlier_images_.begin(); it != earlier_images_.end();) {
    auto& images = it->second;
    const size_t before = images.size();
    images.erase(std::remove_if(images.begin(), images.end(),
                                [&](const EarlierImage& earlier) { return !keep(it->first, earlier); }),
                 images.end());
    earlier_image_count_ -= before - images.size();
    it = images.empty() ? earlier_images_.erase(it) : std::next(it);
  }
}

void ProcessTracker::end_round(bool every_exit_seen) {
  std::vector<std::shared_ptr<ProcessSnapshot>> forgotten;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone_this_round_.clear();
    // Only an image replaced since the round's last drain may have samples
    // still in BPF.
    prune_earlier_images_locked([&](int32_t, const EarlierImage& earlier) { return earlier.replaced_at_drain >= drains_; });
    for (auto it = processes_.begin(); it != processes_.end();) {
      // A claimed pid is being republished: it is looked at next round.
      if (claimed_.count(it->first)) {
        ++it;
        continue;
      }
      // Gone with no exit noted (no process records, or some lost): noted
      // now, and kept like any other exit below.
      if (!it->second->exited && !every_exit_seen && access(fmt::format("/proc/{}", it->first).c_str(), F_OK) != 0) {
        mark_exited_locked(it->first);
      }
      // An exit noted since the drain before the round's last may have
      // samples still in BPF, taken after the last drain read the maps:
      // they belong to the next round, which names them by this snapshot.
      // Forgotten then (drained(), or the next round's end), as in drained().
      // Forgotten here, such samples were named as of an unknown process
      // (107 of 11906 samples under `run`, 5 s rounds, bench/process_churn's
      // scene; 2 after, both of the first round).
      if (it->second->exited && exit_settled_locked(it->first)) {
        it = forget_locked(it, forgotten);
      } else {
        ++it;
      }
    }
    // Read but never published (gone before, or a read that failed) or
    // forgotten: a read time outlives no process.
    for (auto it = mappings_read_ns_.begin(); it != mappings_read_ns_.end();) {
      it = processes_.count(it->first) || claimed_.count(it->first) ? std::next(it) : mappings_read_ns_.erase(it);
    }
  }
  let_go(forgotten);
}

void ProcessTracker::drained(const std::unordered_set<int32_t>& sampled_this_round) {
  std::vector<std::shared_ptr<ProcessSnapshot>> forgotten;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drains_++;
    // As an exit below: every sample taken in an image replaced before the
    // previous drain began is drained, its image chosen (pin_images).
    prune_earlier_images_locked(
        [&](int32_t, const EarlierImage& earlier) { return earlier.replaced_at_drain + 1 >= drains_; });
    for (auto it = exit_noted_at_drain_.begin(); it != exit_noted_at_drain_.end();) {
      const int32_t pid = it->first;
      // None in the round, and none still in BPF (exit_settled_locked):
      // nothing will be named after it.
      if (!exit_settled_locked(pid) || sampled_this_round.count(pid) || claimed_.count(pid)) {
        ++it;
        continue;
      }
      it = exit_noted_at_drain_.erase(it);
      auto known = processes_.find(pid);
      if (known == processes_.end() || !known->second->exited) continue;
      forget_locked(known, forgotten);
    }
  }
  let_go(forgotten);
}

bool ProcessTracker::exit_settled_locked(int32_t pid) const {
  // Its exit noted before the previous drain began: every sample it took
  // has been drained. (Noted during a drain, a sample taken before the exit
  // may be in a bucket that drain had passed: the next drain has it.)
  auto noted = exit_noted_at_drain_.find(pid);
  return noted == exit_noted_at_drain_.end() || noted->second + 1 < drains_;
}

size_t ProcessTracker::exits_awaiting_drain() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exit_noted_at_drain_.size();
}

std::unordered_map<int32_t, std::shared_ptr<ProcessSnapshot>>::iterator ProcessTracker::forget_locked(
    std::unordered_map<int32_t, std::shared_ptr<ProcessSnapshot>>::iterator it,
    std::vector<std::shared_ptr<ProcessSnapshot>>& forgotten) {
  last_refresh_.erase(it->first);
  mappings_read_ns_.erase(it->first);
  notes_answered_by_records_.erase(it->first);
  exit_noted_at_drain_.erase(it->first);
  // An exited process's entry went when its exit was noted (mark_exited_locked).
  if (maps_ && !it->second->exited) maps_->delete_process_info(it->first);
  forgotten.push_back(std::move(it->second));
  return processes_.erase(it);
}

void ProcessTracker::let_go(const std::vector<std::shared_ptr<ProcessSnapshot>>& forgotten) {
  // The last reference to an executable leaves its table stored for a
  // while (ExecutableInfoManager::kKeepUnmapped), for the next process that
  // maps it. Which process was the last to map which files is logged (debug)
  // per process; host.executables_kept_unmapped and _unloaded count them
  // machine-wide.
  for (const auto& snapshot : forgotten) {
    const std::string last = release(*snapshot);
    if (!last.empty()) {
      log().debug("pid {} gone: the last process mapping {}; their unwind tables are kept {} s for the next one",
                  snapshot->pid, last,
                  std::chrono::duration_cast<std::chrono::seconds>(ExecutableInfoManager::kKeepUnmapped).count());
    }
  }
  // After the round's profile is assembled (the agent calls end_round then),
  // or for a process none of whose samples are in the round: plugins may
  // drop what they kept to name the process's frames.
  for (const auto& snapshot : forgotten) forget_in_plugins(snapshot->pid);
}

std::shared_ptr<const KnownProcesses> ProcessTracker::snapshot() const {
  auto known = std::make_shared<KnownProcesses>();
  std::lock_guard<std::mutex> lock(mutex_);
  known->by_pid.insert(processes_.begin(), processes_.end());
  return known;
}

KnownProcesses ProcessTracker::recent_images() const {
  KnownProcesses recent;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [pid, images] : earlier_images_) {
    auto& out = recent.earlier_by_pid[pid];
    for (const EarlierImage& earlier : images) out.push_back(earlier.image);
    if (auto it = processes_.find(pid); it != processes_.end()) recent.by_pid.emplace(pid, it->second);
  }
  return recent;
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
