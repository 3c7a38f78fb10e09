// PluginHost: finds plugin .so files, checks their entry against the ABI the
// host speaks, loads their BPF objects into the host's maps and tail-call
// slots, and owns their instances. A plugin that fails any step is refused
// with one line naming the file and the reason; the others go on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bpf/load_cost.h"
#include "omniprof/bpf/abi.h"
#include "omniprof/support/result.h"
#include "omniprof/plugin.h"

struct bpf_object;
namespace boost::dll {
class shared_library;
}

namespace omniprof {

class BpfMaps;
class ElfSymbolizer;

// kNotInstalled: a runtime the config enables whose <runtime>.so is in no
// plugin directory (its package removed, a drop-in enabling it left behind):
// not an error, the host runs with the others. Such an entry has no path.
enum class PluginState { kLoaded, kChecked, kDisabled, kRefused, kNotInstalled };
const char* plugin_state_name(PluginState state);

struct Plugin {
  std::string path;
  std::string name;
  std::string runtime;
  std::string version;
  // The type of its frames in profiles (omniprof_plugin.frame_type, else the
  // runtime): "python", "ruby", "jit".
  std::string frame_type;
  PluginState state = PluginState::kRefused;
  std::string reason;  // why refused or disabled
  std::string abi_versions;  // "plugin ABI 2.2, BPF ABI 5" once its entry was read
  uint32_t slot = 0;
  const omniprof_plugin* entry = nullptr;
  // The entry as this host's ABI sees it: hooks a plugin of an older minor
  // lacks are NULL here. Call hooks through this, not through `entry`.
  omniprof_plugin hooks{};
  void* instance = nullptr;
  bpf_object* object = nullptr;
  const char* program = nullptr;  // the program that fills the slot
  size_t program_index = 0;       // its index in hooks.programs
  ObjectLoadCost load_cost;       // what loading `object` cost the kernel (load_cost.h)
  // This plugin's own host API (its `host` context names the plugin, for
  // private_map_fd); lives as long as the Plugin, past `destroy`.
  omniprof_host_api api{};
  std::shared_ptr<void> api_context;
  std::shared_ptr<boost::dll::shared_library> library;
  // Held for every call into `instance` (PluginHost's hook calls): plugin.h
  // promises a plugin that one instance is never entered by two threads at
  // once, while the event thread and the main thread both call it.
  std::mutex hook_mutex;
  // What describe_file said about each file id (plugin ABI 2.3), kept from
  // the first detect_process of a process mapping it until
  // unload_executable of that id; the plugin owns what the pointers point
  // to. Under hook_mutex.
  std::unordered_map<uint64_t, const void*> file_descriptions;
};

// A frame as a plugin named it, copied before the plugin's lock is released
// (its strings are only valid until its next call).
struct PluginSymbol {
  std::string function;
  std::string file;
  int64_t line = 0;
};

// [start, end) of a function in a file's ELF virtual addresses
// (function_bounds).
struct FunctionBounds {
  uint64_t start = 0;
  uint64_t end = 0;
};

struct PluginHostOptions {
  std::vector<std::string> directories;  // searched in order
  std::string data_root;                 // <prefix>/share/omniprof/plugins
  std::function<bool(const std::string& runtime)> runtime_enabled;
  // Runtimes the config enables by name (runtimes.<name>: true, and the
  // defaults): load_all reports each one no <runtime>.so is found for as
  // kNotInstalled.
  std::vector<std::string> enabled_runtimes;
  // Without BPF maps, still create plugin instances (for `omniprof debug`,
  // whose commands read files and need no kernel).
  bool create_without_bpf = false;
};

class PluginHost {
 public:
  // maps may be null: then plugins are only checked (ABI, BPF object parses,
  // programs present), not loaded; used by `omniprof plugins` without BPF.
  PluginHost(BpfMaps* maps, ElfSymbolizer* symbolizer);
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // Loads every plugin file found in options.directories, then adds a
  // kNotInstalled entry (one info line each) for every enabled runtime
  // without a file.
  void load_all(const PluginHostOptions& options);
  // Loads one file; the result is also recorded in plugins().
  const Plugin& load_file(const std::string& path, const PluginHostOptions& options);

  const std::vector<std::unique_ptr<Plugin>>& plugins() const { return plugins_; }
  // The loaded plugin whose frames carry this kind, or null.
  Plugin* plugin_for_frame_kind(uint8_t kind) const;
  // The loaded plugin of module type OMNIPROF_MODULE_NATIVE, or null.
  Plugin* native_plugin() const;
  // The checked or loaded plugin offering `omniprof debug COMMAND`, or null.
  Plugin* plugin_for_debug_command(const std::string& command) const;
  // Names of percpu_stats counters owned by loaded plugins, by index.
  std::vector<std::pair<uint32_t, std::string>> stat_names() const;

  // Calls into a plugin instance. Each takes the plugin's hook_mutex for the
  // call and nothing else. Lock order: a caller may hold
  // ExecutableInfoManager's lock (load/unload_executable) but never
  // ProcessTracker's; inside, a plugin only reaches the host API, whose
  // functions take no lock a caller could hold (the symbolizer's own). A
  // missing optional hook behaves as a plugin that has nothing to do:
  // detect_process says NOT_MINE, load_executable OK. detect_process first
  // has the plugin describe each file of `process` it has not described yet
  // (describe_file, once per file id until unload_executable of that id)
  // and hands the plugin its descriptions with the process.
  static omniprof_status detect_process(Plugin& plugin, const omniprof_process& process,
                                        omniprof_process_attach& attach, std::string& error);
  static void process_gone(Plugin& plugin, int32_t pid);
  // The frame's name, or an error (no hook, the plugin failed, no function).
  static Result<PluginSymbol> symbolize_frame(Plugin& plugin, int32_t pid, const omniprof_frame& frame);
  static void tick(Plugin& plugin);
  // Whether the plugin is to be ticked about every second as well as on
  // notice: it has a tick hook and did not set OMNIPROF_TICK_ON_NOTICE_ONLY
  // (a plugin of ABI 2.3 or older never does).
  static bool ticks_every_second(const Plugin& plugin);
  // label_key and the name of label `value`, or nothing (0, out of range).
  static std::optional<std::pair<std::string, std::string>> label(const Plugin& plugin, uint8_t value);
  static omniprof_status load_executable(Plugin& plugin, uint64_t file_id, const std::string& path,
                                         std::string& error);
  static void unload_executable(Plugin& plugin, uint64_t file_id);
  // The function around ELF address `address` of executable `file_id`
  // (`path` reaches the file), from the plugin's function_bounds: nullopt
  // when the plugin has no such hook or no FDE covers the address; an error
  // when the plugin could not read the file.
  static Result<std::optional<FunctionBounds>> function_bounds(Plugin& plugin, uint64_t file_id,
                                                               const std::string& path, uint64_t address);
  static omniprof_status debug_command(Plugin& plugin, const std::string& command,
                                       const std::string& argument,
                                       void (*write)(void* context, const char* text, size_t len),
                                       void* context, std::string& error);

  static std::vector<std::string> find_plugin_files(const std::vector<std::string>& directories);
  // The host API as a plugin sees it, without a plugin of its own
  // (private_map_fd finds nothing): for tests of the API functions.
  const omniprof_host_api* host_api() const { return &api_; }

 private:
  Result<void> check_entry(Plugin& plugin) const;
  // Opens the plugin's BPF object with the first of its programs, from
  // `first_candidate` on, that the kernel can run (by its features).
  Result<void> open_object(Plugin& plugin, size_t first_candidate = 0);
  Result<void> assign_slot(Plugin& plugin);
  Result<void> load_object(Plugin& plugin);
  Result<void> create_instance(Plugin& plugin, const PluginHostOptions& options);
  void unload(Plugin& plugin);
  // The host API for `plugin` (null: the plugin-less one) into api/context.
  void init_host_api(Plugin* plugin, omniprof_host_api& api, std::shared_ptr<void>& context) const;

  BpfMaps* maps_;
  ElfSymbolizer* symbolizer_;
  std::vector<std::unique_ptr<Plugin>> plugins_;
  omniprof_host_api api_{};
  std::shared_ptr<void> api_context_;
};

// The loaded plugins in the order a process is offered to their
// detect_process: by slot (rbperf 2, pyperf 3, then third parties), so
// that the first to claim a process both could (a Python writing a perf
// map) is the in-tree interpreter plugin (plugin.h at detect_process).
std::vector<Plugin*> plugins_in_claim_order(const std::vector<std::unique_ptr<Plugin>>& plugins);

}  // namespace omniprof
