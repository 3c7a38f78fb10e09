#include "config/config_sources.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "common/directory_listing.h"
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

Result<std::vector<std::string>> drop_in_files(const std::string& directory) {
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::exists(directory, ec)) return files;
  auto entries = list_directory(directory);
  if (!entries) return make_error(fmt::format("config drop-ins: {}", entries.error().message));
  for (const fs::path& entry : *entries) {
    // Only *.yaml: a package manager's leftovers (.dpkg-old, .bak) are not
    // settings.
    if (entry.extension() == ".yaml" && !fs::is_directory(entry, ec)) files.push_back(entry.string());
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
  auto drop_ins = drop_in_files(sources.drop_in_directory);
  if (!drop_ins) return drop_ins.error();
  for (const std::string& path : *drop_ins) {
    auto trusted = check_trusted_path(path, policy);
    if (!trusted) {
      log().warn("config drop-in {} refused: {}", path, trusted.error().message);
      loaded.refused.push_back(fmt::format("{}: {}", path, trusted.error().message));
      continue;
    }
    if (auto r = apply_file(path, *trusted); !r) return r.error();
  }
  apply_resource_environment(loaded);
  apply_export_environment(loaded);
  return loaded;
}

namespace {

// OTEL_EXPORTER_OTLP_PROFILES_<NAME> if set, else OTEL_EXPORTER_OTLP_<NAME>,
// and which of the two it was.
std::pair<std::string, std::string> otlp_variable(const std::string& name) {
  for (const std::string& variable : {"OTEL_EXPORTER_OTLP_PROFILES_" + name, "OTEL_EXPORTER_OTLP_" + name}) {
    if (const char* value = std::getenv(variable.c_str()); value && *value) return {variable, value};
  }
  return {"", ""};
}

// "%41" -> "A": OTEL_EXPORTER_OTLP_HEADERS values are URL-encoded.
std::string percent_decoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string trimmed(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

}  // namespace

void apply_export_environment(LoadedConfig& loaded) {
  OtlpSettings& otlp = loaded.config.export_to.otlp;
  auto unset = [&](const std::string& key) { return !loaded.origins.count(key); };
  auto note = [&](const std::string& key, const std::string& variable) {
    loaded.origins[key] = ValueOrigin{"environment " + variable, 0};
  };
  if (unset("export.otlp.endpoint")) {
    if (const char* full = std::getenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"); full && *full) {
      otlp.endpoint = full;
      otlp.endpoint_is_full_url = true;
      note("export.otlp.endpoint", "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT");
    } else if (const char* base = std::getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base && *base) {
      otlp.endpoint = base;
      otlp.endpoint_is_full_url = false;
      note("export.otlp.endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT");
    }
  }
  if (auto [variable, value] = otlp_variable("PROTOCOL"); !variable.empty() && unset("export.otlp.protocol")) {
    if (value == "grpc" || value == "http/protobuf") {
      otlp.protocol = value;
      note("export.otlp.protocol", variable);
    } else {
      log().warn("{}={}: omniprof sends grpc or http/protobuf; ignored, using {}", variable, value, otlp.protocol);
    }
  }
  if (auto [variable, value] = otlp_variable("HEADERS"); !variable.empty() && unset("export.otlp.headers")) {
    std::vector<std::pair<std::string, std::string>> headers;
    std::stringstream list(value);
    std::string item;
    bool bad = false;
    while (std::getline(list, item, ',')) {
      size_t equals = item.find('=');
      if (equals == std::string::npos || trimmed(item.substr(0, equals)).empty()) {
        bad = true;
        break;
      }
      headers.emplace_back(trimmed(item.substr(0, equals)), percent_decoded(trimmed(item.substr(equals + 1))));
    }
    if (bad) {
      log().warn("{}: expected key=value,key=value; \"{}\" is not; the headers are ignored", variable, item);
    } else {
      otlp.headers = std::move(headers);
      note("export.otlp.headers", variable);
    }
  }
  if (auto [variable, value] = otlp_variable("INSECURE"); !variable.empty() && unset("export.otlp.insecure")) {
    std::string lower = value;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower == "true" || lower == "false") {
      otlp.insecure = lower == "true";
      note("export.otlp.insecure", variable);
    } else {
      log().warn("{}={}: expected true or false; ignored", variable, value);
    }
  }
  if (auto [variable, value] = otlp_variable("CERTIFICATE"); !variable.empty() && unset("export.otlp.certificate")) {
    otlp.certificate = value;
    note("export.otlp.certificate", variable);
  }
  if (auto [variable, value] = otlp_variable("TIMEOUT"); !variable.empty() && unset("export.otlp.timeout_seconds")) {
    char* end = nullptr;
    long ms = std::strtol(value.c_str(), &end, 10);
    if (*end == '\0' && ms >= 1 && ms <= 600000) {
      otlp.timeout_ms = static_cast<uint32_t>(ms);
      note("export.otlp.timeout_seconds", variable);
    } else {
      log().warn("{}={}: expected milliseconds, 1 to 600000; ignored", variable, value);
    }
  }
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
  settings.emplace_back("processes.nice", std::to_string(c.describe_nice));
  settings.emplace_back("maps.stack_traces",
                        c.stack_traces_entries ? std::to_string(c.stack_traces_entries) : "auto");
  settings.emplace_back("maps.stack_counts",
                        c.stack_counts_entries ? std::to_string(c.stack_counts_entries) : "auto");
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
  const ExportConfig& e = c.export_to;
  settings.emplace_back("metrics.listen", fmt::format("\"{}\"", c.metrics_listen));
  settings.emplace_back("export.queue_rounds", std::to_string(e.queue_rounds));
  settings.emplace_back("export.retry_max_seconds", std::to_string(e.retry_max_seconds));
  settings.emplace_back("export.shutdown_wait_seconds", std::to_string(e.shutdown_wait_seconds));
  settings.emplace_back("export.otlp.endpoint", fmt::format("\"{}\"{}", e.otlp.endpoint,
                                                            e.otlp.endpoint_is_full_url ? " (used as given)" : ""));
  settings.emplace_back("export.otlp.protocol", e.otlp.protocol);
  std::vector<std::string> headers;
  // Header values are often credentials: their names only.
  for (const auto& [key, value] : e.otlp.headers) headers.push_back(fmt::format("{}: <{} bytes>", key, value.size()));
  settings.emplace_back("export.otlp.headers", fmt::format("{{{}}}", fmt::join(headers, ", ")));
  settings.emplace_back("export.otlp.insecure", e.otlp.insecure ? "true" : "false");
  settings.emplace_back("export.otlp.certificate", fmt::format("\"{}\"", e.otlp.certificate));
  settings.emplace_back("export.otlp.timeout_seconds", e.otlp.timeout_ms % 1000 == 0
                                                            ? std::to_string(e.otlp.timeout_ms / 1000)
                                                            : fmt::format("{:.3f}", e.otlp.timeout_ms / 1000.0));
  settings.emplace_back("export.pyroscope.url", fmt::format("\"{}\"", e.pyroscope.url));
  settings.emplace_back("export.pyroscope.basic_auth_user", fmt::format("\"{}\"", e.pyroscope.basic_auth_user));
  settings.emplace_back("export.pyroscope.basic_auth_password",
                        e.pyroscope.basic_auth_password.empty() ? "\"\"" : "<set>");
  settings.emplace_back("export.pyroscope.tenant_id", fmt::format("\"{}\"", e.pyroscope.tenant_id));

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
