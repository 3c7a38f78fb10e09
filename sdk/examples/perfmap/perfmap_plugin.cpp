// perfmap: a third-party plugin (built like one: only the SDK) that names
// JIT frames from the perf map the process writes (/tmp/perf-PID.map:
// Node.js --perf-basic-prof, JVM perf-map agents, .NET, LuaJIT).
//
// detect_process claims a process that has a perf map and anonymous
// executable memory, and gives the native walker that memory as the ranges
// to mark (jit_code.h); the BPF program (perfmap.bpf.c) turns each marked
// frame into one of this plugin's kind in the native frame's place
// (OMNIPROF_FRAME_REPLACES_MARK), which symbolize_frame names from the map.
// tick reads what the JIT appended meanwhile, so that code of a process
// that exits before the round ends is still named.
//
// Limits: the host offers a process to detect_process when it first sees
// it, at exec and when its file mappings change. A process seen before it
// wrote its perf map (sampled in the first milliseconds of node's start)
// is claimed only at the next of those; the JIT code ranges are those of
// that moment (a JIT's code reservation is covered whole, so V8 and the JVM
// growing inside theirs are covered; a new anonymous mapping made
// executable later is not, until the host re-reads the process).
//
// Threading: the host holds this instance's lock for every hook call
// (plugin.h), so nothing here takes a lock of its own.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "jit_code.h"
#include "omniprof/bpf/code_address.h"
#include "omniprof/plugin.hpp"
#include "omniprof/support/regular_file.h"
#include "perf_map.h"
#include "perfmap.h"
#include "perfmap.skel.h"

namespace {

namespace pm = omniprof::perfmap;

// bpf_loop walk where the kernel has it (5.17+), else the tail-call one.
const omniprof_program_slot kPrograms[] = {
    {"perfmap_unwind_loop", OMNIPROF_SLOT_THIRD_PARTY_FIRST, OMNIPROF_PROGRAM_NEEDS_BPF_LOOP},
    {"perfmap_unwind", OMNIPROF_SLOT_THIRD_PARTY_FIRST, 0},
};

// In the order of enum perfmap_stat.
const char* const kStatNames[] = {"walks", "frames", "truncated", "malformed_lines", "read_errors", "ranges_left_out"};
static_assert(sizeof(kStatNames) / sizeof(kStatNames[0]) == PERFMAP_STAT_END);

// A /proc file's text (their size is 0 to stat: read to the end).
omniprof::Result<std::string> read_text(const std::string& path) {
  auto file = omniprof::open_regular_file(path);
  if (!file) return file.error();
  std::string text;
  if (int error = omniprof::read_to_end(file->fd.get(), text); error != 0) {
    return omniprof::make_error(path + ": " + std::strerror(error));
  }
  return text;
}

class PerfmapPlugin {
 public:
  PerfmapPlugin(const omniprof_host_api* host, uint32_t slot)
      : log_(host), stats_fd_(host->map_fd ? host->map_fd(host->host, OMNIPROF_MAP_PERCPU_STATS) : -1), slot_(slot) {}

  omniprof_status detect(const omniprof_process& process, omniprof_process_attach& attach, char* error) {
    const int32_t pid = process.pid;
    const std::string proc = "/proc/" + std::to_string(pid);
    auto status = read_text(proc + "/status");
    if (!status) return OMNIPROF_NOT_MINE;  // exited meanwhile
    const int32_t ns_pid = pm::namespace_pid(*status, pid);
    std::string map_path;
    for (const std::string& candidate : pm::perf_map_candidates(pid, ns_pid)) {
      if (access(candidate.c_str(), F_OK) == 0) {
        map_path = candidate;
        break;
      }
    }
    if (map_path.empty()) return OMNIPROF_NOT_MINE;
    auto maps_text = read_text(proc + "/maps");
    if (!maps_text) return OMNIPROF_NOT_MINE;
    auto maps = omniprof::parse_proc_maps(*maps_text);
    if (!maps) {
      omniprof::sdk::set_error(error, proc + "/maps: " + maps.error().message);
      return OMNIPROF_ERR_PARSE;
    }
    size_t left_out = 0;
    auto ranges = pm::jit_code_ranges(*maps, OMNIPROF_MAX_INTERPRETER_RANGES, &left_out);
    if (ranges.empty()) {
      log_.debug("perfmap: pid " + std::to_string(pid) + " (" + process.comm + ") has " + map_path +
                 " but no anonymous executable memory: nothing to name");
      return OMNIPROF_NOT_MINE;
    }
    if (left_out) {
      ranges_left_out_ += left_out;
      log_.warn("perfmap: pid " + std::to_string(pid) + " (" + process.comm + "): " + std::to_string(left_out) +
                " JIT code ranges left out (the walker checks " + std::to_string(OMNIPROF_MAX_INTERPRETER_RANGES) +
                "): their frames stay unnamed");
    }
    attach.num_interpreter_ranges = static_cast<uint32_t>(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) attach.interpreter_ranges[i] = {ranges[i].start, ranges[i].end};
    std::snprintf(attach.runtime_version, sizeof(attach.runtime_version), "perf map");

    auto& known = processes_[pid];
    if (!known || known->path() != map_path) {
      known = std::make_unique<pm::PerfMapReader>(map_path);
      log_.info("perfmap: pid " + std::to_string(pid) + " (" + process.comm + "): JIT frames named from " + map_path);
    }
    refresh(pid, *known);
    publish_gauges();
    return OMNIPROF_OK;
  }

  omniprof_status symbolize(int32_t pid, const omniprof_frame_data& frame, omniprof_symbol& symbol, char* error) {
    auto it = processes_.find(pid);
    if (it == processes_.end()) {
      omniprof::sdk::set_error(error, "pid " + std::to_string(pid) + " has no perf map known");
      return OMNIPROF_ERR_INVALID_ARGUMENT;
    }
    pm::PerfMapReader& reader = *it->second;
    const uint64_t pc = omniprof_code_address(frame.address, (frame.detail & PERFMAP_DETAIL_RETURN_ADDRESS) != 0);
    const std::string* name = reader.symbols().lookup(pc);
    if (!name) {
      refresh(pid, reader);  // written since the last tick
      name = reader.symbols().lookup(pc);
    }
    if (!name) {
      char address[32];
      std::snprintf(address, sizeof(address), "%#llx", static_cast<unsigned long long>(pc));
      omniprof::sdk::set_error(error, std::string(address) + " is in no entry of " + reader.path());
      return OMNIPROF_NOT_MINE;
    }
    symbol.function = name->c_str();
    symbol.file = nullptr;
    symbol.line = 0;
    return OMNIPROF_OK;
  }

  void tick() {
    for (auto& [pid, reader] : processes_) refresh(pid, *reader);
    publish_gauges();
  }

  void gone(int32_t pid) { processes_.erase(pid); }

 private:
  void refresh(int32_t pid, pm::PerfMapReader& reader) {
    auto update = reader.refresh();
    if (!update) {
      // What was read stays to name this round's frames. A process that
      // exited (its /proc/PID/root is gone) is no read error: it is
      // forgotten at the round's end (process_gone).
      if (access(("/proc/" + std::to_string(pid)).c_str(), F_OK) == 0) {
        read_errors_++;
        log_.debug("perfmap: pid " + std::to_string(pid) + ": " + update.error().message);
      }
      return;
    }
    malformed_lines_ += update->malformed;
    if (update->first_malformed) {
      log_.warn("perfmap: " + *update->first_malformed + " (skipped; further malformed lines of this file are only "
                "counted: perfmap.malformed_lines)");
    }
    if (update->reread) {
      log_.debug("perfmap: " + reader.path() + " was truncated or replaced: read again from the start");
    }
  }

  // Gauges in the plugin's percpu_stats range (summed over CPUs by the
  // host, so the value goes in CPU 0's slot): printed with every counter.
  void publish_gauges() {
    if (stats_fd_ < 0) return;
    static const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) return;
    std::vector<uint64_t> values(static_cast<size_t>(cpus), 0);
    auto set = [&](uint32_t stat, uint64_t value) {
      uint32_t key = OMNIPROF_STATS_BASE(slot_) + stat;
      values[0] = value;
      bpf_map_update_elem(stats_fd_, &key, values.data(), BPF_ANY);
    };
    set(PERFMAP_STAT_MALFORMED_LINES, malformed_lines_);
    set(PERFMAP_STAT_READ_ERRORS, read_errors_);
    set(PERFMAP_STAT_RANGES_LEFT_OUT, ranges_left_out_);
  }

  omniprof::sdk::HostLog log_;
  int stats_fd_;
  uint32_t slot_;
  std::map<int32_t, std::unique_ptr<pm::PerfMapReader>> processes_;
  uint64_t malformed_lines_ = 0;
  uint64_t read_errors_ = 0;
  uint64_t ranges_left_out_ = 0;
};

omniprof_status create(const omniprof_host_api* host, const char* /*data_dir*/, uint32_t assigned_slot,
                       void** instance, char* error) {
  return omniprof::sdk::guarded(error, [&] {
    *instance = new PerfmapPlugin(host, assigned_slot);
    return OMNIPROF_OK;
  });
}

omniprof_plugin make_entry() {
  omniprof_plugin entry = omniprof::sdk::make_plugin_entry("perfmap", "0.1.0", "perfmap", OMNIPROF_MODULE_THIRD_PARTY,
                                                           perfmap_bpf__elf_bytes, kPrograms, kStatNames);
  entry.create = create;
  // JIT-compiled code (V8, the JVM, .NET, LuaJIT), whatever wrote the map.
  entry.frame_type = "jit";
  omniprof::sdk::set_instance_hooks<PerfmapPlugin>(entry);
  return entry;
}

const omniprof_plugin kEntry = make_entry();

}  // namespace

OMNIPROF_DEFINE_PLUGIN(&kEntry)
