// What the host decides about a plugin file before it opens it: opening a
// .so runs its constructors, so a plugin the config disables, or one whose
// file someone other than root could have written, is never opened.
//
// The host knows a plugin's runtime before opening it from its file name:
// a plugin file is `<runtime>.so` (native.so, python.so, ruby.so, a third
// party's perfmap.so), and a plugin whose entry declares another runtime is
// refused once opened (sdk/include/omniprof/plugin.h says so to plugin
// authors). So `runtimes: {ruby: false}` keeps ruby.so out of the process.
#pragma once

#include <functional>
#include <string>

namespace omniprof {

// "ruby" for ".../ruby.so".
std::string plugin_runtime_from_file_name(const std::string& path);

enum class PluginAdmission { kOpen, kDisabled, kUntrusted };

struct PluginAdmissionDecision {
  PluginAdmission admission = PluginAdmission::kOpen;
  std::string runtime;  // from the file name
  std::string open_path;  // kOpen: the canonical path that was checked, to open
  std::string reason;   // why disabled or untrusted
};

// Disabled first (a disabled plugin is not an error, wherever it lies), then
// the path's trust (trust/path_trust.h).
PluginAdmissionDecision admit_plugin_file(const std::string& path,
                                          const std::function<bool(const std::string&)>& runtime_enabled);

}  // namespace omniprof
