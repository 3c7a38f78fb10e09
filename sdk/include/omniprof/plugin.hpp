// Header-only C++ conveniences for plugin authors, on top of the C boundary
// in plugin.h. Nothing here crosses the boundary: the host only ever sees the
// C structs, so a plugin built with another compiler still loads.
#pragma once

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>

#include "omniprof/bpf/abi.h"
#include "omniprof/plugin.h"

namespace omniprof::sdk {

// Logs through the host (never through a logger of the plugin's own).
class HostLog {
 public:
  explicit HostLog(const omniprof_host_api* api) : api_(api) {}
  void debug(const std::string& m) const { write(OMNIPROF_LOG_DEBUG, m); }
  void info(const std::string& m) const { write(OMNIPROF_LOG_INFO, m); }
  void warn(const std::string& m) const { write(OMNIPROF_LOG_WARN, m); }
  void error(const std::string& m) const { write(OMNIPROF_LOG_ERROR, m); }

 private:
  void write(omniprof_log_level level, const std::string& m) const {
    if (api_ && api_->log) api_->log(api_->host, level, m.c_str());
  }
  const omniprof_host_api* api_;
};

// Copies a reason into the host's error buffer (always NUL-terminated).
inline void set_error(char* error, const std::string& message) {
  if (!error) return;
  std::snprintf(error, OMNIPROF_ERROR_LEN, "%s", message.c_str());
}

// Runs `body`, turning any exception into OMNIPROF_ERR_INTERNAL plus its
// message: exceptions must never cross the C boundary.
template <typename Body>
omniprof_status guarded(char* error, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    set_error(error, e.what());
  } catch (...) {
    set_error(error, "unknown exception");
  }
  return OMNIPROF_ERR_INTERNAL;
}

// Names `file_id` as one of the files whose native code is the interpreter's
// own (omniprof_process_attach.interpreter_file_ids, plugin ABI 2.2): once
// each, 0 ignored; false when the attach has no room left.
inline bool add_interpreter_file(omniprof_process_attach& attach, uint64_t file_id) {
  if (file_id == 0) return true;
  for (uint32_t i = 0; i < attach.num_interpreter_file_ids; ++i) {
    if (attach.interpreter_file_ids[i] == file_id) return true;
  }
  if (attach.num_interpreter_file_ids >= OMNIPROF_MAX_INTERPRETER_FILES) return false;
  attach.interpreter_file_ids[attach.num_interpreter_file_ids++] = file_id;
  return true;
}

// A `struct omniprof_plugin` with the ABI fields filled in.
constexpr omniprof_plugin make_plugin_entry() {
  omniprof_plugin entry{};
  entry.abi_major = OMNIPROF_PLUGIN_ABI_MAJOR;
  entry.abi_minor = OMNIPROF_PLUGIN_ABI_MINOR;
  entry.struct_size = sizeof(omniprof_plugin);
  entry.bpf_abi_version = OMNIPROF_BPF_ABI_VERSION;
  return entry;
}

// The entry's identity and BPF side in one call, for the usual plugin whose
// programs and counter names are static arrays:
//   auto entry = make_plugin_entry("python", "0.1.0", "python", OMNIPROF_MODULE_PYPERF,
//                                  python_bpf__elf_bytes, kPrograms, kStatNames);
// then set the hooks it has.
template <size_t NumPrograms, size_t NumStats>
omniprof_plugin make_plugin_entry(const char* name, const char* version, const char* runtime,
                                  omniprof_module_type module_type, const void* (*bpf_elf_bytes)(size_t*),
                                  const omniprof_program_slot (&programs)[NumPrograms],
                                  const char* const (&stat_names)[NumStats]) {
  omniprof_plugin entry = make_plugin_entry();
  entry.name = name;
  entry.version = version;
  entry.runtime = runtime;
  entry.module_type = module_type;
  size_t size = 0;
  entry.bpf_object = bpf_elf_bytes(&size);
  entry.bpf_object_size = size;
  entry.programs = programs;
  entry.num_programs = NumPrograms;
  entry.stat_names = stat_names;
  entry.num_stat_names = NumStats;
  return entry;
}

namespace detail {
template <typename T, typename = void>
struct has_detect : std::false_type {};
template <typename T>
struct has_detect<T, std::void_t<decltype(std::declval<T&>().detect(std::declval<const omniprof_process&>(),
                                                                     std::declval<omniprof_process_attach&>(),
                                                                     std::declval<char*>()))>> : std::true_type {};
template <typename T, typename = void>
struct has_gone : std::false_type {};
template <typename T>
struct has_gone<T, std::void_t<decltype(std::declval<T&>().gone(int32_t{}))>> : std::true_type {};
template <typename T, typename = void>
struct has_symbolize : std::false_type {};
template <typename T>
struct has_symbolize<T, std::void_t<decltype(std::declval<T&>().symbolize(
                            int32_t{}, std::declval<const omniprof_frame_data&>(), std::declval<omniprof_symbol&>(),
                            std::declval<char*>()))>> : std::true_type {};
template <typename T, typename = void>
struct has_tick : std::false_type {};
template <typename T>
struct has_tick<T, std::void_t<decltype(std::declval<T&>().tick())>> : std::true_type {};
}  // namespace detail

// The hooks of a plugin whose instance is a C++ object of class `Plugin`
// (made by the plugin's own `create`, which owns construction): `destroy`
// deletes it, and each hook the class has a member for forwards to it,
// exceptions turned into OMNIPROF_ERR_INTERNAL (or swallowed, for hooks
// that return nothing) so that none crosses the C boundary:
//   omniprof_status detect(const omniprof_process&, omniprof_process_attach&, char* error)
//   void gone(int32_t pid)                                    -> process_gone
//   omniprof_status symbolize(int32_t pid, const omniprof_frame_data&, omniprof_symbol&, char* error)
//   void tick()
template <typename Plugin>
void set_instance_hooks(omniprof_plugin& entry) {
  entry.destroy = [](void* instance) { delete static_cast<Plugin*>(instance); };
  if constexpr (detail::has_detect<Plugin>::value) {
    entry.detect_process = [](void* instance, const omniprof_process* process, omniprof_process_attach* attach,
                              char* error) {
      return guarded(error, [&] { return static_cast<Plugin*>(instance)->detect(*process, *attach, error); });
    };
  }
  if constexpr (detail::has_gone<Plugin>::value) {
    entry.process_gone = [](void* instance, int32_t pid) {
      try {
        static_cast<Plugin*>(instance)->gone(pid);
      } catch (...) {
      }
    };
  }
  if constexpr (detail::has_symbolize<Plugin>::value) {
    entry.symbolize_frame = [](void* instance, int32_t pid, const omniprof_frame_data* frame, omniprof_symbol* symbol,
                               char* error) {
      return guarded(error, [&] { return static_cast<Plugin*>(instance)->symbolize(pid, *frame, *symbol, error); });
    };
  }
  if constexpr (detail::has_tick<Plugin>::value) {
    entry.tick = [](void* instance) {
      try {
        static_cast<Plugin*>(instance)->tick();
      } catch (...) {
      }
    };
  }
}

}  // namespace omniprof::sdk

// Defines the one exported symbol. `expr` yields a `const omniprof_plugin*`
// to an object of static storage duration.
#define OMNIPROF_DEFINE_PLUGIN(expr)                                                   \
  extern "C" OMNIPROF_PLUGIN_EXPORT const struct omniprof_plugin* omniprof_plugin_entry( \
      void) {                                                                          \
    return (expr);                                                                     \
  }
