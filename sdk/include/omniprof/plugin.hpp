// Header-only C++ conveniences for plugin authors, on top of the C boundary
// in plugin.h. Nothing here crosses the boundary: the host only ever sees the
// C structs, so a plugin built with another compiler still loads.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>

#include "omniprof/bpf/abi.h"
#include "omniprof/plugin.h"

// The promises plugin.h makes about sizes it spells as literals (a C header
// of the boundary, it does not include the BPF ABI): held here, where every
// C++ plugin and the host see both.
static_assert(sizeof(omniprof_process_attach::interpreter_data) == sizeof(omniprof_process_info::interpreter_data),
              "omniprof_process_attach.interpreter_data is copied whole to omniprof_process_info.interpreter_data");
static_assert(sizeof(omniprof_process_attach::interpreter_ranges) /
                      sizeof(omniprof_process_attach::interpreter_ranges[0]) ==
                  OMNIPROF_MAX_INTERPRETER_RANGES,
              "omniprof_process_attach.interpreter_ranges holds OMNIPROF_MAX_INTERPRETER_RANGES");
static_assert(offsetof(omniprof_frame_data, address) == offsetof(omniprof_frame, address) &&
                  offsetof(omniprof_frame_data, detail) == offsetof(omniprof_frame, detail) &&
                  offsetof(omniprof_frame_data, kind) == offsetof(omniprof_frame, kind) &&
                  sizeof(omniprof_frame_data::address) == sizeof(omniprof_frame::address) &&
                  sizeof(omniprof_frame_data::detail) == sizeof(omniprof_frame::detail) &&
                  sizeof(omniprof_frame_data::kind) == sizeof(omniprof_frame::kind),
              "omniprof_frame_data is the first three fields of omniprof_frame (plugin.h)");

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

// Runs `body` of a hook that returns nothing; an exception is dropped
// there: none may cross the C boundary.
template <typename Body>
void swallowed(Body&& body) noexcept {
  try {
    body();
  } catch (...) {
  }
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
// Whether `Plugin` has a member of that name at all (a single function: an
// overloaded name is not looked at). set_instance_hooks then requires that
// it can be called as the hook's forwarder calls it: a member named like a
// hook with another signature is a compile error, not a hook left out.
#define OMNIPROF_SDK_NAMES_MEMBER(member)                                            \
  template <typename T, typename = void>                                             \
  struct names_##member : std::false_type {};                                        \
  template <typename T>                                                              \
  struct names_##member<T, std::void_t<decltype(&T::member)>> : std::true_type {};
OMNIPROF_SDK_NAMES_MEMBER(detect)
OMNIPROF_SDK_NAMES_MEMBER(gone)
OMNIPROF_SDK_NAMES_MEMBER(symbolize)
OMNIPROF_SDK_NAMES_MEMBER(tick)
OMNIPROF_SDK_NAMES_MEMBER(describe)
OMNIPROF_SDK_NAMES_MEMBER(unload)
#undef OMNIPROF_SDK_NAMES_MEMBER

// Member `Member` of Plugin, called with Args, gives something a Result
// takes (any result, for a void Result).
template <typename Plugin, typename Member, typename Result, typename... Args>
constexpr bool fits_hook = std::is_invocable_r_v<Result, Member, Plugin&, Args...>;
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
//   const void* describe(uint64_t file_id, const std::string& path, const std::string& name)
//                                                             -> describe_file (2.3); a pointer to
//                                                                any object type will do
//   void unload(uint64_t file_id)                             -> unload_executable
// A member with one of these names that cannot be called that way (a
// mistyped parameter, another return type) does not compile: it is never
// left out as "no hook". An overloaded member name is not recognised.
template <typename Plugin>
void set_instance_hooks(omniprof_plugin& entry) {
  entry.destroy = [](void* instance) { delete static_cast<Plugin*>(instance); };
  if constexpr (detail::names_detect<Plugin>::value) {
    static_assert(detail::fits_hook<Plugin, decltype(&Plugin::detect), omniprof_status, const omniprof_process&,
                                    omniprof_process_attach&, char*>,
                  "Plugin::detect is named like the detect_process hook but does not have its signature");
    entry.detect_process = [](void* instance, const omniprof_process* process, omniprof_process_attach* attach,
                              char* error) {
      return guarded(error, [&] { return static_cast<Plugin*>(instance)->detect(*process, *attach, error); });
    };
  }
  if constexpr (detail::names_gone<Plugin>::value) {
    static_assert(detail::fits_hook<Plugin, decltype(&Plugin::gone), void, int32_t>,
                  "Plugin::gone is named like the process_gone hook but does not have its signature");
    entry.process_gone = [](void* instance, int32_t pid) {
      swallowed([&] { static_cast<Plugin*>(instance)->gone(pid); });
    };
  }
  if constexpr (detail::names_symbolize<Plugin>::value) {
    static_assert(detail::fits_hook<Plugin, decltype(&Plugin::symbolize), omniprof_status, int32_t,
                                    const omniprof_frame_data&, omniprof_symbol&, char*>,
                  "Plugin::symbolize is named like the symbolize_frame hook but does not have its signature");
    entry.symbolize_frame = [](void* instance, int32_t pid, const omniprof_frame_data* frame, omniprof_symbol* symbol,
                               char* error) {
      return guarded(error, [&] { return static_cast<Plugin*>(instance)->symbolize(pid, *frame, *symbol, error); });
    };
  }
  if constexpr (detail::names_tick<Plugin>::value) {
    static_assert(detail::fits_hook<Plugin, decltype(&Plugin::tick), void>,
                  "Plugin::tick is named like the tick hook but does not have its signature");
    entry.tick = [](void* instance) { swallowed([&] { static_cast<Plugin*>(instance)->tick(); }); };
  }
  if constexpr (detail::names_describe<Plugin>::value) {
    static_assert(detail::fits_hook<Plugin, decltype(&Plugin::describe), const void*, uint64_t, const std::string&,
                                    const std::string&>,
                  "Plugin::describe is named like the describe_file hook but does not have its signature");
    entry.describe_file = [](void* instance, uint64_t file_id, const char* path, const char* name,
                             const void** description, char* error) {
      return guarded(error, [&] {
        *description = static_cast<Plugin*>(instance)->describe(file_id, path ? path : "", name ? name : "");
        return OMNIPROF_OK;
      });
    };
  }
  if constexpr (detail::names_unload<Plugin>::value) {
    static_assert(detail::fits_hook<Plugin, decltype(&Plugin::unload), void, uint64_t>,
                  "Plugin::unload is named like the unload_executable hook but does not have its signature");
    entry.unload_executable = [](void* instance, uint64_t file_id) {
      swallowed([&] { static_cast<Plugin*>(instance)->unload(file_id); });
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
