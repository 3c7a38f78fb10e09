#include "plugins/plugin_host.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>

#include <boost/dll/shared_library.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/directory_listing.h"
#include "bpf/bpf_maps.h"
#include "bpf/bpf_support.h"
#include "profile/frame_type.h"
#include "log/logger.h"
#include "omniprof/bpf/abi.h"
#include "omniprof/support/process_memory.h"
#include "plugins/plugin_admission.h"
#include "plugins/plugin_abi.h"
#include "symbolize/elf_symbolizer.h"

#include <bpf/bpf.h>

namespace omniprof {

namespace fs = std::filesystem;

const char* plugin_state_name(PluginState state) {
  switch (state) {
    case PluginState::kLoaded: return "loaded";
    case PluginState::kChecked: return "checked";
    case PluginState::kDisabled: return "disabled";
    case PluginState::kRefused: return "refused";
    case PluginState::kNotInstalled: return "not installed";
  }
  return "?";
}

namespace {

// ---- The host API given to plugins -----------------------------------------

void api_log(void* /*host*/, omniprof_log_level level, const char* message) {
  switch (level) {
    case OMNIPROF_LOG_DEBUG: log().debug("{}", message); break;
    case OMNIPROF_LOG_INFO: log().info("{}", message); break;
    case OMNIPROF_LOG_WARN: log().warn("{}", message); break;
    default: log().error("{}", message); break;
  }
}

// Each plugin's host API points at its own context, so that private_map_fd
// knows whose object to look in.
struct ApiContext {
  BpfMaps* maps;
  ElfSymbolizer* symbolizer;
  Plugin* plugin;
};

int api_map_fd(void* host, const char* name) {
  auto* ctx = static_cast<ApiContext*>(host);
  return ctx->maps && name ? ctx->maps->map_fd(name) : -1;
}

int64_t api_read_process_memory(void* /*host*/, int32_t pid, uint64_t address, void* buffer,
                                uint64_t len) {
  // One per call: the C API keeps no state per pid (hooks of different
  // plugins may call it at once), so a fallback opens /proc/PID/mem each time.
  return ProcessMemory(pid).read_or_errno(address, buffer, len);
}

omniprof_status api_elf_symbol(void* host, const char* path, const char* symbol, uint64_t* value,
                               uint64_t* size) {
  auto* ctx = static_cast<ApiContext*>(host);
  if (!ctx->symbolizer || !path || !symbol || !value || !size) return OMNIPROF_ERR_INVALID_ARGUMENT;
  auto found = ctx->symbolizer->find_symbol(path, symbol);
  if (!found) return OMNIPROF_ERR_IO;
  if (!found->has_value()) return OMNIPROF_NOT_MINE;
  *value = (*found)->first;
  *size = (*found)->second;
  return OMNIPROF_OK;
}

omniprof_status api_create_inner_map(void* host, const char* map_name, uint32_t index, int* fd) {
  auto* ctx = static_cast<ApiContext*>(host);
  if (!ctx->maps || !map_name || !fd) return OMNIPROF_ERR_INVALID_ARGUMENT;
  std::string reason;
  omniprof_status status = ctx->maps->create_inner_map(map_name, index, fd, &reason);
  if (status != OMNIPROF_OK) log().warn("a plugin's request for an inner map refused: {}", reason);
  return status;
}

int api_private_map_fd(void* host, const char* name) {
  auto* ctx = static_cast<ApiContext*>(host);
  if (!name || !ctx->plugin || !ctx->plugin->object) return -1;
  const auto& shared = BpfMaps::shared_map_names();
  if (std::find(shared.begin(), shared.end(), name) != shared.end()) return -1;
  bpf_map* map = bpf_object__find_map_by_name(ctx->plugin->object, name);
  return map ? bpf_map__fd(map) : -1;
}

uint32_t fixed_slot(omniprof_module_type type) {
  switch (type) {
    case OMNIPROF_MODULE_NATIVE: return OMNIPROF_SLOT_NATIVE;
    case OMNIPROF_MODULE_RBPERF: return OMNIPROF_SLOT_RUBY;
    case OMNIPROF_MODULE_PYPERF: return OMNIPROF_SLOT_PYTHON;
    default: return 0;
  }
}

}  // namespace

PluginHost::PluginHost(BpfMaps* maps, ElfSymbolizer* symbolizer)
    : maps_(maps), symbolizer_(symbolizer) {
  init_host_api(nullptr, api_, api_context_);
}

PluginHost::~PluginHost() {
  // Instances first (they may still use the host API), then BPF objects, then
  // the libraries their code lives in.
  for (auto it = plugins_.rbegin(); it != plugins_.rend(); ++it) unload(**it);
}

void PluginHost::init_host_api(Plugin* plugin, omniprof_host_api& api, std::shared_ptr<void>& context) const {
  auto made = std::make_shared<ApiContext>(ApiContext{maps_, symbolizer_, plugin});
  api = omniprof_host_api{};
  api.struct_size = sizeof(api);
  api.host = made.get();
  api.log = api_log;
  api.map_fd = api_map_fd;
  api.read_process_memory = api_read_process_memory;
  api.elf_symbol = api_elf_symbol;
  api.create_inner_map = api_create_inner_map;
  api.private_map_fd = api_private_map_fd;
  context = std::move(made);
}

void PluginHost::unload(Plugin& plugin) {
  {
    std::lock_guard<std::mutex> lock(plugin.hook_mutex);
    if (plugin.instance && plugin.entry && plugin.hooks.destroy) plugin.hooks.destroy(plugin.instance);
    plugin.instance = nullptr;
  }
  if (plugin.state == PluginState::kLoaded && maps_ && plugin.slot) {
    (void)maps_->clear_tail_call(plugin.slot);
  }
  if (plugin.object) bpf_object__close(plugin.object);
  plugin.object = nullptr;
  plugin.entry = nullptr;
  plugin.library.reset();
}

std::vector<std::string> PluginHost::find_plugin_files(const std::vector<std::string>& directories) {
  std::vector<std::string> files;
  std::set<std::string> seen_names;
  for (const auto& dir : directories) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> here;
    auto entries = list_directory(dir);
    if (!entries) {
      // The other directories' plugins are still offered; the log names
      // the directory whose plugins are missing.
      log().error("plugins: {}", entries.error().message);
      continue;
    }
    for (const fs::path& entry : *entries) {
      if (entry.extension() == ".so") here.push_back(entry.string());
    }
    std::sort(here.begin(), here.end());
    // A file name found in an earlier directory shadows later ones.
    for (auto& f : here) {
      if (seen_names.insert(fs::path(f).filename().string()).second) files.push_back(f);
    }
  }
  return files;
}

void PluginHost::load_all(const PluginHostOptions& options) {
  std::set<std::string> runtimes_with_a_file;
  for (const auto& path : find_plugin_files(options.directories)) {
    runtimes_with_a_file.insert(plugin_runtime_from_file_name(path));
    load_file(path, options);
  }
  for (const auto& runtime : options.enabled_runtimes) {
    if (runtimes_with_a_file.count(runtime)) continue;
    auto plugin = std::make_unique<Plugin>();
    plugin->runtime = runtime;
    plugin->state = PluginState::kNotInstalled;
    plugin->reason = fmt::format("runtime '{}' is enabled in the config but no {}.so is in {}", runtime,
                                 runtime, fmt::join(options.directories, ", "));
    log().info("{} not installed: {}; profiling without it", runtime, plugin->reason);
    plugins_.push_back(std::move(plugin));
  }
}

const Plugin& PluginHost::load_file(const std::string& path, const PluginHostOptions& options) {
  auto plugin = std::make_unique<Plugin>();
  plugin->path = path;
  Plugin& p = *plugin;
  plugins_.push_back(std::move(plugin));

  auto refuse = [&](const Error& error) -> const Plugin& {
    p.state = PluginState::kRefused;
    p.reason = error.message;
    log().warn("plugin {} refused: {}", path, error.message);
    unload(p);
    return p;
  };

  PluginAdmissionDecision admission = admit_plugin_file(path, options.runtime_enabled);
  p.runtime = admission.runtime;
  switch (admission.admission) {
    case PluginAdmission::kDisabled:
      p.state = PluginState::kDisabled;
      p.reason = admission.reason;
      log().info("plugin {} disabled by config: {}", path, admission.reason);
      return p;
    case PluginAdmission::kUntrusted:
      return refuse(make_error(admission.reason));
    case PluginAdmission::kOpen:
      break;
  }

  try {
    p.library = std::make_shared<boost::dll::shared_library>(
        admission.open_path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    return refuse(make_error(fmt::format("cannot load shared object: {}", e.what())));
  }
  if (!p.library->has(OMNIPROF_PLUGIN_ENTRY_SYMBOL)) {
    return refuse(make_error(fmt::format("no entry symbol {}: not an omniprof plugin",
                                         OMNIPROF_PLUGIN_ENTRY_SYMBOL)));
  }
  auto& entry_fn = p.library->get<const omniprof_plugin*()>(OMNIPROF_PLUGIN_ENTRY_SYMBOL);
  p.entry = entry_fn();
  if (auto r = check_entry(p); !r) return refuse(r.error());
  if (p.runtime != admission.runtime) {
    return refuse(make_error(fmt::format(
        "declares runtime '{}' but its file is named {}: a plugin file must be named <runtime>.so, "
        "which is how the host knows, before opening it, whether the config disables it",
        p.runtime, fs::path(path).filename().string())));
  }

  for (const auto& other : plugins_) {
    if (other.get() != &p && other->state == PluginState::kLoaded && other->name == p.name) {
      return refuse(make_error(fmt::format("another plugin named '{}' is already loaded from {}",
                                           p.name, other->path)));
    }
  }
  if (auto r = open_object(p); !r) return refuse(r.error());
  if (!maps_) {
    if (options.create_without_bpf) {
      if (auto r = create_instance(p, options); !r) return refuse(r.error());
    }
    p.state = PluginState::kChecked;
    return p;
  }
  if (auto r = assign_slot(p); !r) return refuse(r.error());
  Result<void> loaded = load_object(p);
  // The kernel's verifier refused the program its features chose (a newer
  // verifier may walk more states of a loop than its limit allows): the
  // next alternative the kernel can run takes the slot (the plugin's last
  // needs nothing), said once. A libbpf object that failed to load cannot
  // be loaded again, so it is opened anew.
  while (!loaded && p.program_index + 1 < p.hooks.num_programs) {
    const std::string refused = p.program, why = loaded.error().message;
    bpf_object__close(p.object);
    p.object = nullptr;
    if (auto r = open_object(p, p.program_index + 1); !r) return refuse(r.error());
    log().warn("plugin {}: this kernel refuses its program {} ({}): loading {} instead", p.name, refused, why,
               p.program);
    if (auto r = assign_slot(p); !r) return refuse(r.error());
    loaded = load_object(p);
  }
  if (!loaded) return refuse(loaded.error());
  if (auto r = create_instance(p, options); !r) return refuse(r.error());
  bpf_program* prog = bpf_object__find_program_by_name(p.object, p.program);
  if (auto r = maps_->update_tail_call(p.slot, bpf_program__fd(prog)); !r) return refuse(r.error());
  p.state = PluginState::kLoaded;
  log().info("plugin {} {} loaded from {} (slot {}, program {})", p.name, p.version, path, p.slot, p.program);
  return p;
}

Result<void> PluginHost::check_entry(Plugin& p) const {
  const omniprof_plugin* e = p.entry;
  if (!e) return make_error("the entry function returned null");
  // Versions first: the fields below are only known to mean what this host
  // thinks once the ABI is its own (plugin_abi.h, VERSIONING.md).
  p.abi_versions = plugin_abi_text(*e);
  if (auto r = check_plugin_abi(*e); !r) return r;
  if (!e->name || !*e->name || !e->runtime || !*e->runtime || !e->version) {
    return make_error("entry lacks a name, runtime or version");
  }
  if (!e->create || !e->destroy) return make_error("entry lacks create/destroy hooks");
  if (!e->bpf_object || e->bpf_object_size == 0) return make_error("entry has no BPF object");
  if (!e->programs || e->num_programs == 0) return make_error("entry names no BPF programs");
  if (e->num_stat_names > OMNIPROF_STATS_PER_SLOT) {
    return make_error(fmt::format("declares {} counters, a slot has {}", e->num_stat_names,
                                  OMNIPROF_STATS_PER_SLOT));
  }
  uint32_t expected = fixed_slot(e->module_type);
  if (e->module_type == OMNIPROF_MODULE_THIRD_PARTY) expected = OMNIPROF_SLOT_THIRD_PARTY_FIRST;
  if (expected == 0) return make_error(fmt::format("unknown module type {}", int(e->module_type)));
  for (size_t i = 0; i < e->num_programs; ++i) {
    if (!e->programs[i].program_name) return make_error(fmt::format("program {} has no name", i));
    if (e->programs[i].slot != expected) {
      return make_error(fmt::format("program {} asks for slot {}, its module type gets slot {}",
                                    e->programs[i].program_name, e->programs[i].slot, expected));
    }
  }
  if (e->programs[e->num_programs - 1].needs != 0) {
    return make_error(fmt::format("its last program {} needs a kernel feature: a plugin must offer one "
                                  "that runs on every kernel (list it last)",
                                  e->programs[e->num_programs - 1].program_name));
  }
  if (e->num_label_values > 256 || (e->num_label_values > 0 && (!e->label_key || !e->label_values))) {
    return make_error("its label_key/label_values are inconsistent");
  }
  // Fields of later minors are absent from an older plugin's struct: read
  // them from a zeroed copy so they count as NULL.
  std::memset(&p.hooks, 0, sizeof(p.hooks));
  std::memcpy(&p.hooks, e, std::min<size_t>(e->struct_size, sizeof(p.hooks)));
  p.name = e->name;
  p.runtime = e->runtime;
  p.version = e->version;
  // What profiles call its frames; a 2.1 plugin (no frame_type) by its
  // runtime, made a valid type.
  if (p.hooks.frame_type) {
    p.frame_type = p.hooks.frame_type;
    if (!valid_frame_type(p.frame_type)) {
      return make_error(fmt::format("its frame_type '{}' is not 1 to 31 of [a-z0-9_]", p.frame_type));
    }
  } else {
    p.frame_type = frame_type_from_name(p.runtime);
  }
  return ok();
}

Result<void> PluginHost::open_object(Plugin& p, size_t first_candidate) {
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = p.hooks.name);
  p.object = bpf_object__open_mem(p.hooks.bpf_object, p.hooks.bpf_object_size, &opts);
  if (!p.object) {
    int err = errno;
    return make_error(fmt::format("its BPF object does not parse: {} ({})", strerror(err),
                                  take_libbpf_log_tail(3)));
  }
  for (size_t i = 0; i < p.hooks.num_programs; ++i) {
    if (!bpf_object__find_program_by_name(p.object, p.hooks.programs[i].program_name)) {
      return make_error(fmt::format("its BPF object has no program {}", p.hooks.programs[i].program_name));
    }
  }
  // The first program the kernel can run fills the slot; the others are not
  // loaded at all (a bpf_loop call would not pass a 5.10 verifier).
  p.program = nullptr;
  for (size_t i = 0; i < p.hooks.num_programs; ++i) {
    const omniprof_program_slot& program = p.hooks.programs[i];
    if (!p.program && i >= first_candidate && (program.needs & ~kernel_features()) == 0) {
      p.program = program.program_name;
      p.program_index = i;
      continue;
    }
    bpf_program__set_autoload(bpf_object__find_program_by_name(p.object, program.program_name), false);
  }
  return ok();
}

Result<void> PluginHost::assign_slot(Plugin& p) {
  uint32_t wanted = p.hooks.programs[0].slot;
  std::set<uint32_t> taken;
  for (const auto& other : plugins_) {
    if (other->state == PluginState::kLoaded) taken.insert(other->slot);
  }
  if (wanted != OMNIPROF_SLOT_THIRD_PARTY_FIRST) {
    if (taken.count(wanted)) return make_error(fmt::format("slot {} is already taken", wanted));
    p.slot = wanted;
    return ok();
  }
  for (uint32_t s = OMNIPROF_SLOT_THIRD_PARTY_FIRST; s < OMNIPROF_NUM_SLOTS; ++s) {
    if (!taken.count(s)) {
      p.slot = s;
      // Optional for the plugin: it needs it only to tail-call itself.
      set_rodata_u32(p.object, "omniprof_self_slot", s);
      return ok();
    }
  }
  return make_error(fmt::format("all {} third-party slots are taken",
                                OMNIPROF_NUM_SLOTS - OMNIPROF_SLOT_THIRD_PARTY_FIRST));
}

Result<void> PluginHost::load_object(Plugin& p) {
  if (auto r = maps_->reuse_maps(p.object); !r) return r;
  take_libbpf_log_tail(0);
  const uint64_t began = boottime_ns();
  if (int err = bpf_object__load(p.object); err) {
    return make_error(fmt::format("its BPF object does not load: {}: {}", strerror(-err),
                                  take_libbpf_log_tail(4)));
  }
  p.load_cost = object_load_cost(p.object, began, boottime_ns());
  log().debug("plugin {}: BPF load {}", p.name, describe_load_cost(p.load_cost));
  return ok();
}

Result<void> PluginHost::create_instance(Plugin& p, const PluginHostOptions& options) {
  std::string data_dir = (fs::path(options.data_root) / p.name).string();
  char error[OMNIPROF_ERROR_LEN] = {0};
  std::lock_guard<std::mutex> lock(p.hook_mutex);
  init_host_api(&p, p.api, p.api_context);
  omniprof_status status = p.hooks.create(&p.api, data_dir.c_str(), p.slot, &p.instance, error);
  if (status != OMNIPROF_OK) {
    p.instance = nullptr;
    return make_error(fmt::format("create failed ({}): {}", int(status), error[0] ? error : "no reason given"));
  }
  return ok();
}

namespace {

std::string reason_or(const char* error, const char* fallback) {
  return error[0] ? std::string(error) : std::string(fallback);
}

}  // namespace

namespace {

// What the plugin's describe_file says about each mapping's file, parallel
// to process.mappings: from plugin.file_descriptions, the files not yet in
// it described now (a failure logged and kept as NULL, like a file that is
// nothing of the plugin's). Under plugin.hook_mutex.
std::vector<const void*> file_descriptions(Plugin& plugin, const omniprof_process& process) {
  std::vector<const void*> descriptions(process.num_mappings, nullptr);
  for (size_t i = 0; i < process.num_mappings; ++i) {
    const omniprof_mapping& mapping = process.mappings[i];
    if (mapping.file_id == 0) continue;
    auto [it, first] = plugin.file_descriptions.try_emplace(mapping.file_id, nullptr);
    if (first) {
      const char* name = process.mapping_names ? process.mapping_names[i] : mapping.path;
      char reason[OMNIPROF_ERROR_LEN] = {0};
      omniprof_status status =
          plugin.hooks.describe_file(plugin.instance, mapping.file_id, mapping.path, name, &it->second, reason);
      if (status != OMNIPROF_OK) {
        it->second = nullptr;
        log().warn("plugin {}: describe_file of {} (file id {:#x}): {}", plugin.name, name, mapping.file_id,
                   reason_or(reason, "failed"));
      }
    }
    descriptions[i] = it->second;
  }
  return descriptions;
}

}  // namespace

omniprof_status PluginHost::detect_process(Plugin& plugin, const omniprof_process& process,
                                           omniprof_process_attach& attach, std::string& error) {
  std::lock_guard<std::mutex> lock(plugin.hook_mutex);
  if (!plugin.instance || !plugin.hooks.detect_process) return OMNIPROF_NOT_MINE;
  omniprof_process described = process;
  std::vector<const void*> descriptions;
  described.file_descriptions = nullptr;
  if (plugin.hooks.describe_file) {
    descriptions = file_descriptions(plugin, process);
    described.file_descriptions = descriptions.data();
  }
  char reason[OMNIPROF_ERROR_LEN] = {0};
  omniprof_status status = plugin.hooks.detect_process(plugin.instance, &described, &attach, reason);
  if (status != OMNIPROF_OK && status != OMNIPROF_NOT_MINE) error = reason_or(reason, "detect_process failed");
  return status;
}

void PluginHost::process_gone(Plugin& plugin, int32_t pid) {
  std::lock_guard<std::mutex> lock(plugin.hook_mutex);
  if (plugin.instance && plugin.hooks.process_gone) plugin.hooks.process_gone(plugin.instance, pid);
}

Result<PluginSymbol> PluginHost::symbolize_frame(Plugin& plugin, int32_t pid, const omniprof_frame& frame) {
  std::lock_guard<std::mutex> lock(plugin.hook_mutex);
  if (!plugin.instance || !plugin.hooks.symbolize_frame) return make_error("no symbolize_frame hook");
  omniprof_symbol symbol{};
  char reason[OMNIPROF_ERROR_LEN] = {0};
  omniprof_frame_data data{frame.address, frame.detail, frame.kind};
  omniprof_status status = plugin.hooks.symbolize_frame(plugin.instance, pid, &data, &symbol, reason);
  if (status != OMNIPROF_OK) return make_error(reason_or(reason, "symbolize_frame failed"));
  if (!symbol.function) return make_error("symbolize_frame gave no function");
  return PluginSymbol{symbol.function, symbol.file ? symbol.file : "", symbol.line};
}

omniprof_status PluginHost::load_executable(Plugin& plugin, uint64_t file_id, const std::string& path,
                                            std::string& error) {
  std::lock_guard<std::mutex> lock(plugin.hook_mutex);
  if (!plugin.instance || !plugin.hooks.load_executable) return OMNIPROF_OK;
  char reason[OMNIPROF_ERROR_LEN] = {0};
  omniprof_status status = plugin.hooks.load_executable(plugin.instance, file_id, path.c_str(), reason);
  // With OMNIPROF_OK, a reason says what the plugin left out (a partial load).
  error = status == OMNIPROF_OK ? std::string(reason) : reason_or(reason, "load_executable failed");
  return status;
}

void PluginHost::tick(Plugin& plugin) {
  std::lock_guard<std::mutex> lock(plugin.hook_mutex);
  if (plugin.instance && plugin.hooks.tick) plugin.hooks.tick(plugin.instance);
}

bool PluginHost::ticks_every_second(const Plugin& plugin) {
  return plugin.hooks.tick && !(plugin.hooks.tick_flags & OMNIPROF_TICK_ON_NOTICE_ONLY);
}

std::optional<std::pair<std::string, std::string>> PluginHost::label(const Plugin& plugin, uint8_t value) {
  // Set at load and never changed: no lock needed.
  if (value == 0 || value >= plugin.hooks.num_label_values || !plugin.hooks.label_values[value]) return std::nullopt;
  return std::make_pair(std::string(plugin.hooks.label_key), std::string(plugin.hooks.label_values[value]));
}

void PluginHost::unload_executable(Plugin& plugin, uint64_t file_id) {
  std::lock_guard<std::mutex> lock(plugin.hook_mutex);
  // Forgotten first: the plugin may free the description in its hook.
  plugin.file_descriptions.erase(file_id);
  if (plugin.instance && plugin.hooks.unload_executable) plugin.hooks.unload_executable(plugin.instance, file_id);
}

Result<std::optional<FunctionBounds>> PluginHost::function_bounds(Plugin& plugin, uint64_t file_id,
                                                                  const std::string& path, uint64_t address) {
  std::lock_guard<std::mutex> lock(plugin.hook_mutex);
  if (!plugin.instance || !plugin.hooks.function_bounds) return std::optional<FunctionBounds>();
  FunctionBounds bounds;
  char reason[OMNIPROF_ERROR_LEN] = {0};
  omniprof_status status =
      plugin.hooks.function_bounds(plugin.instance, file_id, path.c_str(), address, &bounds.start, &bounds.end, reason);
  if (status == OMNIPROF_NOT_MINE) return std::optional<FunctionBounds>();
  if (status != OMNIPROF_OK) return make_error(reason_or(reason, "function_bounds failed"));
  // A range that does not hold the address would name another function.
  if (!(bounds.start <= address && address < bounds.end)) {
    return make_error(fmt::format("function_bounds gave [{:#x}, {:#x}), which does not hold {:#x}", bounds.start,
                                  bounds.end, address));
  }
  return std::optional<FunctionBounds>(bounds);
}

omniprof_status PluginHost::debug_command(Plugin& plugin, const std::string& command,
                                          const std::string& argument,
                                          void (*write)(void* context, const char* text, size_t len),
                                          void* context, std::string& error) {
  std::lock_guard<std::mutex> lock(plugin.hook_mutex);
  if (!plugin.instance || !plugin.hooks.debug_command) {
    error = "no debug_command hook";
    return OMNIPROF_ERR_UNSUPPORTED;
  }
  char reason[OMNIPROF_ERROR_LEN] = {0};
  omniprof_status status =
      plugin.hooks.debug_command(plugin.instance, command.c_str(), argument.c_str(), write, context, reason);
  if (status != OMNIPROF_OK) error = reason_or(reason, "failed");
  return status;
}

Plugin* PluginHost::plugin_for_frame_kind(uint8_t kind) const {
  for (const auto& p : plugins_) {
    // A plugin's frames carry its slot as their kind (abi.h).
    if (p->state == PluginState::kLoaded && kind == p->slot) return p.get();
  }
  return nullptr;
}

Plugin* PluginHost::native_plugin() const {
  for (const auto& p : plugins_) {
    if (p->state == PluginState::kLoaded && p->hooks.module_type == OMNIPROF_MODULE_NATIVE) return p.get();
  }
  return nullptr;
}

Plugin* PluginHost::plugin_for_debug_command(const std::string& command) const {
  for (const auto& p : plugins_) {
    if (!p->instance || !p->hooks.debug_command) continue;
    for (size_t i = 0; i < p->hooks.num_debug_commands; ++i) {
      if (p->hooks.debug_commands[i] && command == p->hooks.debug_commands[i]) return p.get();
    }
  }
  return nullptr;
}

std::vector<std::pair<uint32_t, std::string>> PluginHost::stat_names() const {
  std::vector<std::pair<uint32_t, std::string>> names;
  for (const auto& p : plugins_) {
    if (p->state != PluginState::kLoaded || !p->hooks.stat_names) continue;
    for (size_t i = 0; i < p->hooks.num_stat_names; ++i) {
      if (p->hooks.stat_names[i]) {
        names.emplace_back(OMNIPROF_STATS_BASE(p->slot) + i,
                           fmt::format("{}.{}", p->name, p->hooks.stat_names[i]));
      }
    }
  }
  return names;
}

std::vector<Plugin*> plugins_in_claim_order(const std::vector<std::unique_ptr<Plugin>>& plugins) {
  std::vector<Plugin*> loaded;
  for (const auto& plugin : plugins) {
    if (plugin->state == PluginState::kLoaded) loaded.push_back(plugin.get());
  }
  std::stable_sort(loaded.begin(), loaded.end(), [](const Plugin* a, const Plugin* b) { return a->slot < b->slot; });
  return loaded;
}

}  // namespace omniprof
