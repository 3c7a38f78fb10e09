#include "plugins/plugin_abi.h"

#include <fmt/format.h>

#include <cstddef>

#include "omniprof/bpf/abi.h"

namespace omniprof {
namespace {

// One entry per minor of OMNIPROF_PLUGIN_ABI_MAJOR: the struct ended there.
// A minor appends fields, so its size is offsetof(its first field) of the
// next; add a line when OMNIPROF_PLUGIN_ABI_MINOR grows.
constexpr size_t kPluginStructSizeByMinor[] = {
    offsetof(omniprof_plugin, frame_type),  // 2.0: through num_label_values
    offsetof(omniprof_plugin, frame_type),  // 2.1: no field added (OMNIPROF_FRAME_REPLACES_MARK honoured, claims in slot order)
    offsetof(omniprof_plugin, describe_file),  // 2.2: frame_type, function_bounds
    offsetof(omniprof_plugin, tick_flags),     // 2.3: describe_file
    sizeof(omniprof_plugin),                   // 2.4: tick_flags
};
static_assert(std::size(kPluginStructSizeByMinor) == OMNIPROF_PLUGIN_ABI_MINOR + 1,
              "a plugin ABI minor without its struct size (kPluginStructSizeByMinor)");

}  // namespace

std::string host_accepted_abi_text() {
  return fmt::format("host accepts plugin ABI {}.{} and older {}.x, BPF ABI {}", OMNIPROF_PLUGIN_ABI_MAJOR,
                     OMNIPROF_PLUGIN_ABI_MINOR, OMNIPROF_PLUGIN_ABI_MAJOR, OMNIPROF_BPF_ABI_VERSION);
}

std::string plugin_abi_text(const omniprof_plugin& entry) {
  return fmt::format("plugin ABI {}.{}, BPF ABI {}", entry.abi_major, entry.abi_minor, entry.bpf_abi_version);
}

size_t plugin_struct_size_of_minor(uint16_t minor) {
  return minor < std::size(kPluginStructSizeByMinor) ? kPluginStructSizeByMinor[minor] : 0;
}

Result<void> check_plugin_abi(const omniprof_plugin& e) {
  if (e.abi_major != OMNIPROF_PLUGIN_ABI_MAJOR) {
    return make_error(fmt::format("built for plugin ABI {}.{}, this host speaks {}.{} (major must match)",
                                  e.abi_major, e.abi_minor, OMNIPROF_PLUGIN_ABI_MAJOR, OMNIPROF_PLUGIN_ABI_MINOR));
  }
  if (e.abi_minor > OMNIPROF_PLUGIN_ABI_MINOR) {
    return make_error(fmt::format("built for plugin ABI {}.{}, newer than this host's {}.{} (it may need hooks "
                                  "this host never calls)",
                                  e.abi_major, e.abi_minor, OMNIPROF_PLUGIN_ABI_MAJOR, OMNIPROF_PLUGIN_ABI_MINOR));
  }
  size_t needed = plugin_struct_size_of_minor(e.abi_minor);
  if (e.struct_size < needed) {
    return make_error(fmt::format("entry struct is {} bytes, ABI {}.{} needs {}", e.struct_size, e.abi_major,
                                  e.abi_minor, needed));
  }
  if (e.bpf_abi_version != OMNIPROF_BPF_ABI_VERSION) {
    return make_error(fmt::format("BPF object built against BPF ABI {}, this host has {} (must be equal)",
                                  e.bpf_abi_version, OMNIPROF_BPF_ABI_VERSION));
  }
  return ok();
}

}  // namespace omniprof
