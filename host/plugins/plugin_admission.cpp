#include "plugins/plugin_admission.h"

#include <fmt/format.h>

#include <filesystem>

#include "trust/path_trust.h"

namespace omniprof {

std::string plugin_runtime_from_file_name(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

PluginAdmissionDecision admit_plugin_file(const std::string& path,
                                          const std::function<bool(const std::string&)>& runtime_enabled) {
  PluginAdmissionDecision decision;
  decision.runtime = plugin_runtime_from_file_name(path);
  if (runtime_enabled && !runtime_enabled(decision.runtime)) {
    decision.admission = PluginAdmission::kDisabled;
    decision.reason = fmt::format("runtime '{}' is disabled in the config (file not opened)", decision.runtime);
    return decision;
  }
  auto trusted = check_trusted_path(path);
  if (!trusted) {
    decision.admission = PluginAdmission::kUntrusted;
    decision.reason = fmt::format("untrusted path: {}", trusted.error().message);
    return decision;
  }
  decision.open_path = *trusted;
  return decision;
}

}  // namespace omniprof
