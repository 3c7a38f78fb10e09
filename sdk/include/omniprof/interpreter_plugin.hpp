// The skeleton of an interpreter plugin (header-only C++, on top of
// plugin.hpp): what pyperf and rbperf share, for a third party writing one
// for another runtime.
//
// Per file, then per process (plugin ABI 2.3). An interpreter plugin reads
// each file whose name says it may hold the runtime (libpython3.12.so.1.0,
// ruby) once, in describe_file: its version, where its interpreter loop and
// globals are. The host keeps that description by file id and hands it to
// every detect_process of a process mapping the file, which then only adds
// the process's load bias and reads what the process itself says. The
// descriptions live here until unload_executable of their file id.
//
// Per process, it keeps what symbolize_frame needs (the version's offsets,
// addresses), says once per process why a process that looks like its
// runtime is not walked, and names frames through the plugin's reader.
//
// A plugin derives from InterpreterPlugin<Derived, File, Process, Table>
// (CRTP; Table: its BoundOffsetTable, read from <data_dir>/<kRuntime>.yaml)
// and has:
//   static constexpr const char* kRuntime;             // "python": name, runtime, frame type
//   File read_file(const std::string& path, const std::string& name);  // may throw
//   omniprof_status detect(const omniprof_process&, omniprof_process_attach&, char* error);
//   Result<FrameName> name_frame(int32_t pid, const Process&, const omniprof_frame_data&);
//   void forget_process(int32_t pid);   // what it keeps per process besides Process
// make_interpreter_plugin_entry<Derived> then fills every hook of the entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "omniprof/offsets.hpp"
#include "omniprof/plugin.hpp"
#include "omniprof/private_maps.hpp"
#include "omniprof/support/result.h"

namespace omniprof::sdk {

// Reads `len` bytes of process memory at `address` into `buffer`; true
// when all of them were read.
using ReadMemory = std::function<bool(uint64_t address, void* buffer, std::size_t len)>;

// A ReadMemory of process `pid` through the host's read_process_memory.
inline ReadMemory process_memory_reader(const omniprof_host_api* host, int32_t pid) {
  return [host, pid](uint64_t address, void* buffer, std::size_t len) {
    return host->read_process_memory(host->host, pid, address, buffer, len) == static_cast<int64_t>(len);
  };
}

// An interpreter frame's name, as a plugin's frame reader gives it.
struct FrameName {
  std::string function;
  std::string file;  // "" when the frame has none (a C function)
  int line = 0;      // 0 when unknown
};

// The descriptions of the files a plugin was asked to describe
// (describe_file), by file id, owned until unload_executable.
template <typename File>
class DescribedFiles {
 public:
  const File* keep(uint64_t file_id, File file) {
    auto& kept = files_[file_id];
    kept = std::make_unique<File>(std::move(file));
    return kept.get();
  }
  void forget(uint64_t file_id) { files_.erase(file_id); }
  // What describe_file gave for mapping `index` of `process`, or nullptr.
  static const File* of(const omniprof_process& process, std::size_t index) {
    return process.file_descriptions ? static_cast<const File*>(process.file_descriptions[index]) : nullptr;
  }

 private:
  std::unordered_map<uint64_t, std::unique_ptr<File>> files_;
};

template <typename Derived, typename File, typename Process, typename Table>
class InterpreterPlugin {
 public:
  using OffsetsTable = Table;
  using Layout = decltype(std::declval<typename Table::Entry>().bpf);

  // A file is read (describe_file) when its name's last component matches
  // `file_name_pattern` (an ECMAScript regex, whole); the version layouts
  // the BPF side reads go to the plugin's own array map `layouts_map` (at
  // most `layouts` of them).
  InterpreterPlugin(const omniprof_host_api* host, const char* file_name_pattern, Table table,
                    const char* layouts_map, uint32_t layouts)
      : host_(host),
        log_(host),
        table_(std::move(table)),
        file_name_pattern_(file_name_pattern),
        layouts_(host->private_map_fd(host->host, layouts_map), layouts, layouts_map) {}

  // describe_file: only a file the runtime's name rules admit is read.
  const File* describe(uint64_t file_id, const std::string& path, const std::string& name) {
    if (!runtime_named(name)) return nullptr;
    return files_.keep(file_id, derived().read_file(path, name));
  }

  // Whether a file the process calls `name` may be the runtime's.
  bool runtime_named(const std::string& name) const {
    std::string::size_type slash = name.rfind('/');
    return std::regex_match(slash == std::string::npos ? name : name.substr(slash + 1), file_name_pattern_);
  }
  void unload(uint64_t file_id) { files_.forget(file_id); }

  void gone(int32_t pid) {
    processes_.erase(pid);
    unsupported_logged_.erase(pid);
    derived().forget_process(pid);
  }

  omniprof_status symbolize(int32_t pid, const omniprof_frame_data& frame, omniprof_symbol& symbol, char* error) {
    auto process = processes_.find(pid);
    if (process == processes_.end()) {
      set_error(error, "pid " + std::to_string(pid) + " is not a known " + Derived::kRuntime + " process");
      return OMNIPROF_ERR_INVALID_ARGUMENT;
    }
    Result<FrameName> name = derived().name_frame(pid, process->second, frame);
    if (!name) {
      set_error(error, name.error().message);
      return OMNIPROF_ERR_IO;
    }
    // Valid until the next call: the host copies them before that.
    last_name_ = std::move(*name);
    symbol.function = last_name_.function.c_str();
    symbol.file = last_name_.file.empty() ? nullptr : last_name_.file.c_str();
    symbol.line = last_name_.line;
    return OMNIPROF_OK;
  }

 protected:
  ReadMemory reader(int32_t pid) const { return process_memory_reader(host_, pid); }

  const Table& offsets_table() const { return table_; }

  // Puts `layout` in the layouts map (once per distinct layout) and its
  // slot in *slot; false with `error` set when the map is full.
  bool store_layout(const Layout& layout, uint64_t* slot, char* error) {
    std::string reason;
    std::optional<uint32_t> stored = layouts_.slot_of(layout, &reason);
    if (!stored) {
      set_error(error, reason);
      return false;
    }
    *slot = *stored;
    return true;
  }

  // Why a process that maps the runtime is not walked: said once per process.
  void log_unsupported(const omniprof_process& process, const std::string& what) {
    if (!unsupported_logged_.insert(process.pid).second) return;
    log_.warn(std::string(Derived::kRuntime) + ": pid " + std::to_string(process.pid) + " (" + (process.comm ? process.comm : "?") +
              "): " + what + "; its native frames are still walked");
  }

  // Keeps `process` as pid's; true the first time the pid is kept.
  bool keep_process(int32_t pid, Process process) {
    return processes_.insert_or_assign(pid, std::move(process)).second;
  }
  const Process* process_of(int32_t pid) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? nullptr : &it->second;
  }
  bool knows_process(int32_t pid) const { return processes_.count(pid) != 0; }

  const omniprof_host_api* host_;
  HostLog log_;

 private:
  Derived& derived() { return static_cast<Derived&>(*this); }

  Table table_;
  std::regex file_name_pattern_;
  LayoutSlots<Layout> layouts_;
  DescribedFiles<File> files_;
  std::map<int32_t, Process> processes_;
  std::set<int32_t> unsupported_logged_;
  FrameName last_name_;
};

// The entry of an interpreter plugin (see the top of this file): identity,
// BPF side and frame type, `create` (which needs the host's private_map_fd,
// and reads <data_dir>/<kRuntime>.yaml as Plugin's OffsetsTable), and every
// hook Plugin has (set_instance_hooks).
template <typename Plugin, size_t NumPrograms, size_t NumStats>
omniprof_plugin make_interpreter_plugin_entry(const char* version, omniprof_module_type module_type,
                                              const void* (*bpf_elf_bytes)(size_t*),
                                              const omniprof_program_slot (&programs)[NumPrograms],
                                              const char* const (&stat_names)[NumStats]) {
  omniprof_plugin entry =
      make_plugin_entry(Plugin::kRuntime, version, Plugin::kRuntime, module_type, bpf_elf_bytes, programs, stat_names);
  entry.frame_type = Plugin::kRuntime;
  entry.create = [](const omniprof_host_api* host, const char* data_dir, uint32_t, void** instance, char* error) {
    if (!host->private_map_fd) {
      set_error(error, "the host gives no private_map_fd");
      return OMNIPROF_ERR_UNSUPPORTED;
    }
    return create_with_offsets(instance, error, [&] {
      std::string offsets = std::string(data_dir) + "/" + Plugin::kRuntime + ".yaml";
      return new Plugin(host, Plugin::OffsetsTable::load_file(offsets));
    });
  };
  set_instance_hooks<Plugin>(entry);
  return entry;
}

}  // namespace omniprof::sdk
