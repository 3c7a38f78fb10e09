// Which files make up the agent's configuration, and merging them.
//
// The main file, then the drop-ins `conf.d/*.yaml` beside it in file-name
// order (byte order: `10-ruby.yaml` before `20-local.yaml`), each applied
// over the result so far: a drop-in sets only the keys it names, later wins.
//   - no --config: the main file is $OMNIPROF_CONFIG_DIR/omniprof.yaml
//     (default /etc/omniprof/omniprof.yaml) and the drop-ins are
//     $OMNIPROF_CONFIG_DIR/conf.d/*.yaml; either may be missing (defaults).
//   - --config FILE: FILE (which must exist) and the conf.d/ beside it.
// Every file is checked by check_trusted_path first (trust/path_trust.h):
// an untrusted drop-in is skipped with one warning naming it and what is
// wrong; an untrusted main file is an error (the agent does not start),
// because running on the defaults instead of the operator's settings would
// profile and write where nobody asked. Bad YAML or a bad value anywhere is
// an error naming the file, line and key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "omniprof/support/result.h"
#include "trust/path_trust.h"

namespace omniprof {

inline constexpr char kDefaultConfigDirectory[] = "/etc/omniprof";
// Replaces kDefaultConfigDirectory (for tests, and for trying a config tree).
inline constexpr char kConfigDirectoryVariable[] = "OMNIPROF_CONFIG_DIR";

struct ConfigSources {
  std::string main_file;
  bool main_file_required = false;  // --config FILE: it must be there
  std::string drop_in_directory;    // its *.yaml files, if it exists
};

// The sources for `--config` (empty: not given), reading
// OMNIPROF_CONFIG_DIR when it is not given.
ConfigSources config_sources(const std::string& config_flag);

struct LoadedConfig {
  Config config;
  ValueOrigins origins;
  std::vector<std::string> files_read;  // in the order applied
  std::vector<std::string> refused;     // "PATH: why", each also logged
};

// The *.yaml files of `directory`, sorted by name (none if it is missing);
// an error if it exists and cannot be read whole.
Result<std::vector<std::string>> drop_in_files(const std::string& directory);

Result<LoadedConfig> load_config_sources(const ConfigSources& sources, uint32_t default_frequency_hz,
                                         const PathTrustPolicy& policy = PathTrustPolicy::for_this_process());

// What the agent's environment says of its resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES), applied where the files said nothing: the
// files win, as an OpenTelemetry SDK's explicit configuration wins over its
// environment. Noted in `origins` as "environment VARIABLE"; a malformed
// variable is logged and ignored. load_config_sources calls it last.
void apply_resource_environment(LoadedConfig& loaded);

// The OTLP exporter's standard variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT, _PROTOCOL, _HEADERS, _INSECURE,
// _CERTIFICATE, _TIMEOUT, each also as OTEL_EXPORTER_OTLP_PROFILES_<NAME>,
// which wins), applied where the files said nothing, as for the resource. A
// malformed value is logged and ignored. load_config_sources calls it last.
void apply_export_environment(LoadedConfig& loaded);

// The merged configuration as `omniprof config` prints it: every setting,
// one per line, `key: value  # FILE:LINE` or `# default`, then the files read
// and those refused.
std::string describe_config(const LoadedConfig& loaded);

}  // namespace omniprof
