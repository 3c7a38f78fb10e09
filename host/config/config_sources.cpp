#include "config/config_sources.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "log/logger.h"

namespace omniprof {

namespace fs = std::filesystem;

ConfigSources config_sources(const std::string& config_flag) {
  ConfigSources sources;
  if (!config_flag.empty()) {
    sources.main_file = config_flag;
    sources.main_file_required = true;
    sources.drop_in_directory = (fs::path(config_flag).parent_path() / "conf.d").string();
    return sources;
  }
  const char* overridden = std::getenv(kConfigDirectoryVariable);
  fs::path directory = overridden && *overridden ? overridden : kDefaultConfigDirectory;
  sources.main_file = (directory / "omniprof.yaml").string();
  sources.drop_in_directory = (directory / "conf.d").string();
  return sources;
}

std::vector<std::string> drop_in_files(const std::string& directory) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    // Only *.yaml: a package manager's leftovers (.dpkg-old, .bak) are not
    // settings.
    if (entry.path().extension() == ".yaml" && !entry.is_directory(ec)) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Result<LoadedConfig> load_config_sources(const ConfigSources& sources, uint32_t default_frequency_hz,
                                         const PathTrustPolicy& policy) {
  LoadedConfig loaded;
  loaded.config = default_config(default_frequency_hz);
  // `open_path`: the canonical path check_trusted_path vouched for.
  auto apply_file = [&](const std::string& path, const std::string& open_path) -> Result<void> {
    auto text = read_config_text(open_path);
    if (!text) return text.error();
    if (auto r = apply_config_document(*text, path, loaded.config, &loaded.origins); !r) return r;
    loaded.files_read.push_back(path);
    return ok();
  };

  std::error_code ec;
  if (fs::exists(sources.main_file, ec)) {
    auto trusted = check_trusted_path(sources.main_file, policy);
    if (!trusted) {
      return make_error(fmt::format("config {} refused: {}", sources.main_file, trusted.error().message));
    }
    if (auto r = apply_file(sources.main_file, *trusted); !r) return r.error();
  } else if (sources.main_file_required) {
    // Fails, naming the file and why it cannot be opened.
    if (auto r = apply_file(sources.main_file, sources.main_file); !r) return r.error();
  }
  for (const std::string& path : drop_in_files(sources.drop_in_directory)) {
    auto trusted = check_trusted_path(path, policy);
    if (!trusted) {
      log().warn("config drop-in {} refused: {}", path, trusted.error().message);
      loaded.refused.push_back(fmt::format("{}: {}", path, trusted.error().message));
      continue;
    }
    if (auto r = apply_file(path, *trusted); !r) return r.error();
  }
  apply_resource_environment(loaded);
  return loaded;
}

void apply_resource_environment(LoadedConfig& loaded) {
  std::string error;
  EnvironmentResource environment =
      parse_environment_resource(std::getenv("OTEL_RESOURCE_ATTRIBUTES"), std::getenv("OTEL_SERVICE_NAME"), &error);
  if (!error.empty()) log().warn("{}", error);
  ResourceSettings& resource = loaded.config.resource;
  if (resource.default_service_name.empty() && !environment.service_name.empty()) {
    const char* from = std::getenv("OTEL_SERVICE_NAME") && *std::getenv("OTEL_SERVICE_NAME")
                           ? "environment OTEL_SERVICE_NAME"
                           : "environment OTEL_RESOURCE_ATTRIBUTES";
    loaded.origins["resource.service_name"] = ValueOrigin{from, 0};
  }
  for (const auto& [key, value] : environment.attributes) {
    const std::string path = "resource.attributes." + key;
    if (!loaded.origins.count(path)) loaded.origins[path] = ValueOrigin{"environment OTEL_RESOURCE_ATTRIBUTES", 0};
  }
  resource = with_environment(std::move(resource), environment);
}

namespace {

std::string origin_of(const LoadedConfig& loaded, const std::string& key) {
  auto it = loaded.origins.find(key);
  if (it == loaded.origins.end()) return "default";
  if (it->second.line == 0) return it->second.file;  // not a file: the environment
  return fmt::format("{}:{}", it->second.file, it->second.line);
}

std::string quoted_list(const std::vector<std::string>& values) {
  std::vector<std::string> quoted;
  for (const auto& v : values) quoted.push_back(fmt::format("\"{}\"", v));
  return fmt::format("[{}]", fmt::join(quoted, ", "));
}

}  // namespace

std::string describe_config(const LoadedConfig& loaded) {
  const Config& c = loaded.config;
  std::vector<std::pair<std::string, std::string>> settings = {
      {"sampling.frequency_hz", std::to_string(c.frequency_hz)},
      {"round_seconds", std::to_string(c.round_seconds)},
      {"output.directory", fmt::format("\"{}\"", c.output_directory)},
      {"plugins.directories", quoted_list(c.plugin_directories)},
  };
  for (const auto& [runtime, enabled] : c.runtimes) {
    settings.emplace_back("runtimes." + runtime, enabled ? "true" : "false");
  }
  settings.emplace_back("pids", fmt::format("[{}]", fmt::join(c.pids, ", ")));
  settings.emplace_back("maps.stack_traces", std::to_string(c.stack_traces_entries));
  settings.emplace_back("maps.stack_counts", std::to_string(c.stack_counts_entries));
  settings.emplace_back("maps.processes", std::to_string(c.process_entries));
  settings.emplace_back("maps.unwind_memory_mb", std::to_string(c.unwind_memory_mb));
  settings.emplace_back("maps.executables", std::to_string(c.executable_entries));
  settings.emplace_back("startup.unwind_tables_wait_seconds", std::to_string(c.unwind_tables_wait_seconds));
  settings.emplace_back("log_level", c.log_level);
  settings.emplace_back("profile.interpreter_internals", c.fold_interpreter_internals ? "fold" : "keep");
  settings.emplace_back("resource.service_name", fmt::format("\"{}\"", c.resource.default_service_name));
  for (const auto& [key, value] : c.resource.attributes) {
    settings.emplace_back("resource.attributes." + key, fmt::format("\"{}\"", value));
  }
  std::vector<std::string> rules;
  for (const ServiceNameRule& rule : c.resource.service_name_rules) {
    rules.push_back(fmt::format("{{{}: \"{}\", service_name: \"{}\"}}", service_name_rule_key(rule.match),
                                rule.pattern, rule.service_name));
  }
  settings.emplace_back("resource.service_names", fmt::format("[{}]", fmt::join(rules, ", ")));

  size_t width = 0;
  for (const auto& [key, value] : settings) width = std::max(width, key.size() + 2 + value.size());
  std::string text;
  for (const auto& [key, value] : settings) {
    text += fmt::format("{:<{}}  # {}\n", fmt::format("{}: {}", key, value), width, origin_of(loaded, key));
  }
  text += fmt::format("# files read: {}\n",
                      loaded.files_read.empty() ? "none (all defaults)" : fmt::to_string(fmt::join(loaded.files_read, ", ")));
  for (const auto& refused : loaded.refused) text += fmt::format("# refused: {}\n", refused);
  return text;
}

}  // namespace omniprof
