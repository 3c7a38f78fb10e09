// What kind of code a profile frame is: "kernel", "native", or the type a
// plugin gives its frames ("python", "ruby", "jit": omniprof_plugin.frame_type).
//
// In pprof the type of a plugin's frame travels in Function.system_name as
// "<type>:<name>". That also keeps every pprof reader from rewriting the
// name: pprof treats a function whose system_name equals its name as a
// possibly demangled C++ name and strips what looks like template or
// parameter lists from it, which turns Python's `<module>` into a blank and
// Ruby's `block in <main>` into `block in `. A system_name that differs from
// the name tells pprof the name is final. Native and kernel frames keep
// system_name = the linker's name (pprof simplifies C++ names as its users
// expect); kernel frames are told by their mapping, `[kernel.kallsyms]`.
#pragma once

#include <string>
#include <string_view>

namespace omniprof {

inline constexpr std::string_view kKernelMappingName = "[kernel.kallsyms]";

// "<type>:<name>", the system_name of a plugin's frame.
std::string typed_system_name(std::string_view type, std::string_view name);

// Whether `type` may be a frame type: 1 to 31 of [a-z0-9_].
bool valid_frame_type(std::string_view type);

// `name` lowercased, each character outside [a-z0-9_] made '_', cut to 31
// ("other" if empty): the type of a plugin that names none.
std::string frame_type_from_name(std::string_view name);

// The type of a frame read back from a profile: the plugin's type when
// system_name is "<type>:<name>", else "kernel" for the kernel's mapping,
// else "native".
std::string frame_type_of(std::string_view name, std::string_view system_name, std::string_view mapping_file);

}  // namespace omniprof
