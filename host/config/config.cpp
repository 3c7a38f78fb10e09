#include "config/config.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string_view>
#include <utility>

#include <omniprof/yaml_support.hpp>

#include "common/file_io.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {

bool Config::runtime_enabled(const std::string& runtime) const {
  auto it = runtimes.find(runtime);
  return it == runtimes.end() || it->second;
}

uint32_t fitted_stack_traces_entries(uint32_t cpus, uint32_t frequency_hz) {
  const uint64_t worst_four_seconds = 4ULL * std::max<uint32_t>(cpus, 1) * frequency_hz * 8;
  uint64_t entries = 4096;
  while (entries < worst_four_seconds && entries < OMNIPROF_DEFAULT_STACK_TRACES) entries <<= 1;
  return static_cast<uint32_t>(entries);
}

uint32_t fitted_stack_counts_entries(uint32_t cpus, uint32_t frequency_hz, uint32_t round_seconds) {
  const uint64_t four_rounds = 4ULL * std::max<uint32_t>(cpus, 1) * frequency_hz * std::max<uint32_t>(round_seconds, 1);
  uint64_t entries = 1024;
  while (entries < four_rounds && entries < OMNIPROF_DEFAULT_STACK_COUNTS) entries <<= 1;
  return static_cast<uint32_t>(std::min<uint64_t>(entries, OMNIPROF_DEFAULT_STACK_COUNTS));
}

Config default_config(uint32_t default_frequency_hz) {
  Config config;
  config.frequency_hz = default_frequency_hz;
  return config;
}

namespace {

struct IntegerRange {
  int64_t min;
  int64_t max;
};

constexpr IntegerRange kFrequencyRange{1, 1000};
constexpr IntegerRange kRoundSecondsRange{1, 3600};
constexpr IntegerRange kStackMapRange{1024, 1048576};
constexpr IntegerRange kProcessMapRange{64, 1048576};
// Unwind rows come in shards of OMNIPROF_ROWS_PER_SHARD rows of 8 bytes
// (1 MiB): at least one, at most 4 GiB of them.
constexpr IntegerRange kUnwindMemoryMbRange{1, 4096};
constexpr IntegerRange kExecutableMapRange{64, 1048576};
constexpr IntegerRange kWaitSecondsRange{0, 3600};
constexpr IntegerRange kQueueRoundsRange{1, 1000};
constexpr IntegerRange kRetryMaxSecondsRange{1, 86400};
constexpr IntegerRange kShutdownWaitRange{0, 600};
constexpr IntegerRange kTimeoutSecondsRange{1, 600};
constexpr IntegerRange kPidRange{1, std::numeric_limits<int32_t>::max()};
constexpr IntegerRange kNiceRange{-20, 19};

constexpr std::string_view kLogLevels[] = {"debug", "info", "warn", "error"};

using sdk::yaml::describe;
using sdk::yaml::line_of;
using sdk::yaml::Located;
using sdk::yaml::ParsedInteger;
using sdk::yaml::parse_integer;

// Applies one YAML document over a Config. Only the keys the document sets
// change, so a later document (a conf.d drop-in) can be applied over an
// earlier one with the same code.
class DocumentApplier {
 public:
  DocumentApplier(std::string_view source_name, Config& config, ValueOrigins* origins)
      : source_name_(source_name), config_(config), origins_(origins) {}

  Result<void> apply(const YAML::Node& root) {
    // A document with nothing in it (only comments, or a bare `---`) sets nothing.
    if (root.IsNull()) return ok();
    Located top{root, "", "", line_of(root, YAML::Mark::null_mark())};
    if (!root.IsMap()) {
      return error_at(top, fmt::format("expected a mapping of settings at the top level, got {}",
                                       describe(root)));
    }
    auto entries = mapping_entries(top, {"sampling", "round_seconds", "output", "plugins",
                                         "runtimes", "pids", "processes", "maps", "startup", "log_level", "profile",
                                         "resource", "export", "metrics"});
    if (!entries) return entries.error();
    for (const Located& entry : *entries) {
      Result<void> applied = apply_top_level(entry);
      if (!applied) return applied;
      // A section's fields were noted one by one (a drop-in sets only those).
      if (!entry.node.IsMap()) note_origin(entry);
    }
    return ok();
  }

 private:
  Result<void> apply_top_level(const Located& entry) {
    const std::string& key = entry.key;
    if (key == "sampling") {
      return apply_section(entry, {"frequency_hz"}, [&](const Located& field) {
        return read_unsigned(field, kFrequencyRange, config_.frequency_hz);
      });
    }
    if (key == "round_seconds")
      return read_unsigned(entry, kRoundSecondsRange, config_.round_seconds);
    if (key == "output") {
      return apply_section(entry, {"directory"}, [&](const Located& field) -> Result<void> {
        // "" writes no local files (a fleet agent that only exports).
        if (field.node.IsScalar() && field.node.Scalar().empty()) {
          config_.output_directory.clear();
          return ok();
        }
        return read_path(field, config_.output_directory);
      });
    }
    if (key == "plugins") {
      return apply_section(entry, {"directories"}, [&](const Located& field) {
        return read_path_list(field, config_.plugin_directories);
      });
    }
    if (key == "startup") {
      return apply_section(entry, {"unwind_tables_wait_seconds"}, [&](const Located& field) {
        return read_unsigned(field, kWaitSecondsRange, config_.unwind_tables_wait_seconds);
      });
    }
    if (key == "processes") {
      return apply_section(entry, {"nice"}, [&](const Located& field) -> Result<void> {
        auto value = read_integer(field, kNiceRange);
        if (!value) return value.error();
        config_.describe_nice = static_cast<int32_t>(*value);
        return ok();
      });
    }
    if (key == "runtimes") return apply_runtimes(entry);
    if (key == "pids") return read_pids(entry);
    if (key == "maps") {
      return apply_section(
          entry,
          {"stack_traces", "stack_counts", "processes", "unwind_memory_mb", "unwind_shards", "executables"},
          [&](const Located& field) -> Result<void> {
            const std::string& name = field.key;
            if (name == "stack_traces" || name == "stack_counts") {
              uint32_t& entries = name == "stack_traces" ? config_.stack_traces_entries : config_.stack_counts_entries;
              // "auto" (what `omniprof config` shows for the default): fitted
              // to the machine (fitted_stack_traces_entries,
              // fitted_stack_counts_entries).
              if (field.node.IsScalar() && field.node.Scalar() == "auto") {
                entries = 0;
                return ok();
              }
              int64_t number = 0;
              if (!field.node.IsScalar() ||
                  parse_integer(field.node.Scalar(), number) == ParsedInteger::kNotAnInteger) {
                return error_at(field, fmt::format("expected auto or an integer from {} to {}, got {}",
                                                   kStackMapRange.min, kStackMapRange.max, describe(field.node)));
              }
              return read_unsigned(field, kStackMapRange, entries);
            }
            if (name == "unwind_memory_mb")
              return read_unsigned(field, kUnwindMemoryMbRange, config_.unwind_memory_mb);
            if (name == "unwind_shards") {
              return error_at(field,
                              "replaced by maps.unwind_memory_mb: unwind shards (1 MiB each) are now "
                              "created as tables need them, up to that many MiB");
            }
            if (name == "executables")
              return read_unsigned(field, kExecutableMapRange, config_.executable_entries);
            return read_unsigned(field, kProcessMapRange, config_.process_entries);
          });
    }
    if (key == "profile") {
      return apply_section(entry, {"interpreter_internals"}, [&](const Located& field) -> Result<void> {
        if (field.node.IsScalar() && (field.node.Scalar() == "fold" || field.node.Scalar() == "keep")) {
          config_.fold_interpreter_internals = field.node.Scalar() == "fold";
          return ok();
        }
        return error_at(field, fmt::format("expected fold or keep, got {}", describe(field.node)));
      });
    }
    if (key == "resource") {
      return apply_section(entry, {"service_name", "attributes", "service_names"},
                           [&](const Located& field) -> Result<void> {
                             if (field.key == "service_name") {
                               return read_text(field, "a service name", config_.resource.default_service_name);
                             }
                             if (field.key == "attributes") return apply_resource_attributes(field);
                             return read_service_name_rules(field);
                           });
    }
    if (key == "export") return apply_export(entry);
    if (key == "metrics") {
      return apply_section(entry, {"listen"}, [&](const Located& field) -> Result<void> {
        if (field.node.IsScalar() && field.node.Scalar().empty()) {
          config_.metrics_listen.clear();
          return ok();
        }
        return read_text(field, "HOST:PORT (127.0.0.1:9464)", config_.metrics_listen);
      });
    }
    // mapping_entries() let only the known keys through.
    return read_log_level(entry);
  }

  // export: queue and retry settings, export.otlp and export.pyroscope.
  Result<void> apply_export(const Located& section) {
    ExportConfig& out = config_.export_to;
    return apply_section(
        section, {"queue_rounds", "retry_max_seconds", "shutdown_wait_seconds", "otlp", "pyroscope"},
        [&](const Located& field) -> Result<void> {
          if (field.key == "queue_rounds") return read_unsigned(field, kQueueRoundsRange, out.queue_rounds);
          if (field.key == "retry_max_seconds") return read_unsigned(field, kRetryMaxSecondsRange, out.retry_max_seconds);
          if (field.key == "shutdown_wait_seconds")
            return read_unsigned(field, kShutdownWaitRange, out.shutdown_wait_seconds);
          if (field.key == "otlp") {
            return apply_section(
                field, {"endpoint", "protocol", "headers", "insecure", "certificate", "timeout_seconds"},
                [&](const Located& otlp) -> Result<void> {
                  if (otlp.key == "endpoint") {
                    out.otlp.endpoint_is_full_url = false;
                    return read_text(otlp, "an endpoint URL (http://collector:4318, or host:4317 for grpc)",
                                     out.otlp.endpoint);
                  }
                  if (otlp.key == "protocol") {
                    if (otlp.node.IsScalar() && (otlp.node.Scalar() == "grpc" || otlp.node.Scalar() == "http/protobuf")) {
                      out.otlp.protocol = otlp.node.Scalar();
                      return ok();
                    }
                    return error_at(otlp, fmt::format("expected grpc or http/protobuf, got {}", describe(otlp.node)));
                  }
                  if (otlp.key == "headers") return read_string_map(otlp, out.otlp.headers);
                  if (otlp.key == "insecure") return read_bool(otlp, out.otlp.insecure);
                  if (otlp.key == "certificate") return read_text(otlp, "a PEM file path", out.otlp.certificate);
                  uint32_t seconds = 0;
                  if (auto r = read_unsigned(otlp, kTimeoutSecondsRange, seconds); !r) return r;
                  out.otlp.timeout_ms = seconds * 1000;
                  return ok();
                });
          }
          return apply_section(field, {"url", "basic_auth_user", "basic_auth_password", "tenant_id"},
                               [&](const Located& pyroscope) -> Result<void> {
                                 if (pyroscope.key == "url")
                                   return read_text(pyroscope, "a URL (http://pyroscope:4040)", out.pyroscope.url);
                                 if (pyroscope.key == "basic_auth_user")
                                   return read_text(pyroscope, "a user name", out.pyroscope.basic_auth_user);
                                 if (pyroscope.key == "basic_auth_password")
                                   return read_text(pyroscope, "a password", out.pyroscope.basic_auth_password);
                                 return read_text(pyroscope, "a tenant id", out.pyroscope.tenant_id);
                               });
        });
  }

  Result<void> read_bool(const Located& field, bool& out) {
    if (!field.node.IsScalar() || !YAML::convert<bool>::decode(field.node, out)) {
      return error_at(field, fmt::format("expected true or false, got {}", describe(field.node)));
    }
    return ok();
  }

  // NAME: VALUE pairs of strings, replacing the list.
  Result<void> read_string_map(const Located& section, std::vector<std::pair<std::string, std::string>>& out) {
    std::vector<std::pair<std::string, std::string>> pairs;
    if (!section.node.IsNull()) {
      auto entries = mapping_entries(section, {});
      if (!entries) return entries.error();
      for (const Located& entry : *entries) {
        std::string value;
        if (auto read = read_text(entry, "a header value (a string)", value); !read) return read;
        pairs.emplace_back(entry.key, value);
      }
    }
    out = std::move(pairs);
    return ok();
  }

  // A non-empty string.
  Result<void> read_text(const Located& field, std::string_view what, std::string& out) {
    if (!field.node.IsScalar() || field.node.Scalar().empty()) {
      return error_at(field, fmt::format("expected {}, got {}", what, describe(field.node)));
    }
    out = field.node.Scalar();
    return ok();
  }

  // resource.attributes: KEY: VALUE pairs, merged key by key like runtimes.
  Result<void> apply_resource_attributes(const Located& section) {
    if (section.node.IsNull()) return ok();
    auto entries = mapping_entries(section, {});
    if (!entries) return entries.error();
    for (const Located& entry : *entries) {
      if (entry.key.empty()) return error_at(entry, "an attribute needs a name");
      std::string value;
      if (auto read = read_text(entry, "an attribute value (a string)", value); !read) return read;
      auto& attributes = config_.resource.attributes;
      auto it = std::find_if(attributes.begin(), attributes.end(), [&](const auto& kv) { return kv.first == entry.key; });
      if (it != attributes.end()) {
        it->second = value;
      } else {
        attributes.emplace_back(entry.key, value);
      }
      note_origin(entry);
    }
    return ok();
  }

  // resource.service_names: a list of {MATCHER: GLOB, service_name: NAME},
  // MATCHER one of executable, systemd_unit, container_id.
  Result<void> read_service_name_rules(const Located& field) {
    auto elements = sequence_elements(field, "rules");
    if (!elements) return elements.error();
    std::vector<ServiceNameRule> rules;
    for (const Located& element : *elements) {
      auto entries =
          mapping_entries(element, {"executable", "systemd_unit", "container_id", "container_label", "service_name"});
      if (!entries) return entries.error();
      ServiceNameRule rule;
      int matchers = 0;
      bool named = false;
      for (const Located& entry : *entries) {
        if (entry.key == "service_name") {
          if (auto read = read_text(entry, "a service name", rule.service_name); !read) return read;
          named = true;
          continue;
        }
        ++matchers;
        rule.match = entry.key == "executable"        ? ServiceNameRule::Match::kExecutable
                     : entry.key == "systemd_unit"    ? ServiceNameRule::Match::kSystemdUnit
                     : entry.key == "container_label" ? ServiceNameRule::Match::kContainerLabel
                                                      : ServiceNameRule::Match::kContainerId;
        if (auto read = read_text(entry, entry.key == "container_label" ? "a label name" : "a pattern", rule.pattern);
            !read) {
          return read;
        }
      }
      // container_label alone takes the service name from the label's value.
      if (matchers != 1 || (!named && rule.match != ServiceNameRule::Match::kContainerLabel)) {
        return error_at(element, "a rule has one of executable, systemd_unit or container_id (a glob) and a "
                                 "service_name, or a container_label (a label name; its value is the service "
                                 "name unless service_name is given)");
      }
      rules.push_back(std::move(rule));
    }
    config_.resource.service_name_rules = std::move(rules);
    return ok();
  }

  // A nested mapping whose keys are all in `known`. A section left empty
  // (`maps:` with its children commented out) is a null node and sets nothing.
  template <typename ApplyField>
  Result<void> apply_section(const Located& section, std::initializer_list<std::string_view> known,
                             ApplyField apply_field) {
    if (section.node.IsNull()) return ok();
    auto entries = mapping_entries(section, known);
    if (!entries) return entries.error();
    for (const Located& field : *entries) {
      Result<void> applied = apply_field(field);
      if (!applied) return applied;
      note_origin(field);
    }
    return ok();
  }

  void note_origin(const Located& where) {
    if (origins_) (*origins_)[where.path] = ValueOrigin{std::string(source_name_), where.line + 1};
  }

  // The key/value pairs of a mapping, in document order, with their paths.
  // yaml-cpp keeps duplicate keys without a word, so they are caught here.
  // An empty `known` accepts any key (the caller validates it).
  Result<std::vector<Located>> mapping_entries(const Located& mapping,
                                               std::initializer_list<std::string_view> known) {
    if (!mapping.node.IsMap()) {
      return error_at(mapping, fmt::format("expected a mapping, got {}", describe(mapping.node)));
    }
    sdk::yaml::MappingEntries read = sdk::yaml::mapping_entries(mapping, known);
    if (!read.error) return std::move(read.entries);
    const sdk::yaml::KeyError& error = *read.error;
    switch (error.kind) {
      case sdk::yaml::KeyError::Kind::kNotAName:
        return error_at(error.key,
                        fmt::format("keys must be plain names, got {}", describe(error.key.node)));
      case sdk::yaml::KeyError::Kind::kUnknown:
        return error_at(error.key,
                        fmt::format("unknown key (known: {})", sdk::yaml::join(known)));
      case sdk::yaml::KeyError::Kind::kDuplicate:
        break;
    }
    return error_at(error.key,
                    fmt::format("duplicate key (first set on line {})", error.first_line + 1));
  }

  template <typename Unsigned>
  Result<void> read_unsigned(const Located& field, IntegerRange range, Unsigned& out) {
    auto value = read_integer(field, range);
    if (!value) return value.error();
    out = static_cast<Unsigned>(*value);
    return ok();
  }

  Result<int64_t> read_integer(const Located& field, IntegerRange range) {
    if (!field.node.IsScalar()) return expected_integer(field, range);
    int64_t value = 0;
    switch (parse_integer(field.node.Scalar(), value)) {
      case ParsedInteger::kNotAnInteger:
        return expected_integer(field, range);
      case ParsedInteger::kOutOfRange:
        return out_of_range(field, field.node.Scalar(), range);
      case ParsedInteger::kOk:
        break;
    }
    if (value < range.min || value > range.max)
      return out_of_range(field, field.node.Scalar(), range);
    return value;
  }

  Error expected_integer(const Located& field, IntegerRange range) {
    return error_at(field, fmt::format("expected an integer from {} to {}, got {}", range.min,
                                       range.max, describe(field.node)));
  }

  Error out_of_range(const Located& field, std::string_view text, IntegerRange range) {
    return error_at(field, fmt::format("{} is out of range {}..{}", text, range.min, range.max));
  }

  Result<void> read_path(const Located& field, std::string& out) {
    if (!field.node.IsScalar() || field.node.Scalar().empty()) {
      return error_at(field,
                      fmt::format("expected a directory path, got {}", describe(field.node)));
    }
    out = field.node.Scalar();
    return ok();
  }

  Result<void> read_path_list(const Located& field, std::vector<std::string>& out) {
    std::vector<std::string> paths;
    auto elements = sequence_elements(field, "directory paths");
    if (!elements) return elements.error();
    for (const Located& element : *elements) {
      Result<void> read = read_path(element, paths.emplace_back());
      if (!read) return read;
    }
    out = std::move(paths);
    return ok();
  }

  Result<void> read_pids(const Located& field) {
    auto elements = sequence_elements(field, "process ids");
    if (!elements) return elements.error();
    std::vector<int32_t> pids;
    for (const Located& element : *elements) {
      auto pid = read_integer(element, kPidRange);
      if (!pid) return pid.error();
      // A repeated pid is harmless to profile but is most likely a typo for
      // another process, which would then silently not be profiled.
      if (std::find(pids.begin(), pids.end(), *pid) != pids.end()) {
        return error_at(element, fmt::format("process {} is listed twice", *pid));
      }
      pids.push_back(static_cast<int32_t>(*pid));
    }
    config_.pids = std::move(pids);
    return ok();
  }

  // The elements of a list with their paths. A key left empty (`pids:` with
  // its entries commented out) is the empty list.
  Result<std::vector<Located>> sequence_elements(const Located& field, std::string_view what) {
    std::vector<Located> elements;
    if (field.node.IsNull()) return elements;
    if (!field.node.IsSequence()) {
      return error_at(field,
                      fmt::format("expected a list of {}, got {}", what, describe(field.node)));
    }
    for (std::size_t i = 0; i < field.node.size(); ++i) {
      YAML::Node element = field.node[i];
      elements.push_back(Located{element, "", sdk::yaml::element_path(field.path, i),
                                 element.IsNull() ? field.line : element.Mark().line});
    }
    return elements;
  }

  Result<void> apply_runtimes(const Located& section) {
    if (section.node.IsNull()) return ok();
    auto entries = mapping_entries(section, {});
    if (!entries) return entries.error();
    for (const Located& entry : *entries) {
      const std::string& name = entry.key;
      // Names must match the `runtime` a plugin declares, which are lowercase
      // identifiers; "Python" here would never match anything.
      if (!is_runtime_name(name)) {
        return error_at(entry, "runtime names are lowercase letters, digits, '_' and '-'");
      }
      bool enabled = false;
      if (!entry.node.IsScalar() || !YAML::convert<bool>::decode(entry.node, enabled)) {
        return error_at(entry, fmt::format("expected true or false, got {}", describe(entry.node)));
      }
      config_.runtimes[name] = enabled;
      note_origin(entry);
    }
    return ok();
  }

  static bool is_runtime_name(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
  }

  Result<void> read_log_level(const Located& field) {
    if (field.node.IsScalar() && std::find(std::begin(kLogLevels), std::end(kLogLevels),
                                           field.node.Scalar()) != std::end(kLogLevels)) {
      config_.log_level = field.node.Scalar();
      return ok();
    }
    return error_at(field, fmt::format("expected one of debug, info, warn, error, got {}",
                                       describe(field.node)));
  }

  Error error_at(const Located& where, std::string_view message) const {
    return make_error(sdk::yaml::format_error(source_name_, where, message));
  }

  std::string_view source_name_;
  Config& config_;
  ValueOrigins* origins_;
};

// The one document of `yaml_text`: null if there is none (an empty file).
Result<YAML::Node> load_document(const std::string& yaml_text, std::string_view source_name) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(yaml_text);
  } catch (const YAML::Exception& e) {
    return make_error(sdk::yaml::invalid_yaml_message(source_name, e));
  }
  if (documents.empty()) return YAML::Node();
  // Settings in a second document would otherwise be silently ignored.
  if (documents.size() > 1) {
    return make_error(fmt::format("{}:{}: expected one YAML document, found {}", source_name,
                                  documents[1].Mark().line + 1, documents.size()));
  }
  return documents.front();
}

}  // namespace

Result<std::string> read_config_text(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return make_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  std::string contents;
  if (int error = read_to_end(fd.get(), contents); error != 0) {
    return make_error(fmt::format("cannot read {}: {}", path, std::strerror(error)));
  }
  return contents;
}

Result<void> apply_config_document(const std::string& yaml_text, const std::string& source_name,
                                   Config& config, ValueOrigins* origins) {
  auto document = load_document(yaml_text, source_name);
  if (!document) return document.error();
  // Applied to copies, so that a document with an error changes nothing.
  Config updated = config;
  ValueOrigins updated_origins = origins ? *origins : ValueOrigins{};
  // The applier only reads nodes it has type-checked, so yaml-cpp should not
  // throw here; the catch keeps a yaml-cpp surprise from escaping the API.
  try {
    Result<void> applied =
        DocumentApplier(source_name, updated, origins ? &updated_origins : nullptr).apply(*document);
    if (!applied) return applied.error();
  } catch (const YAML::Exception& e) {
    return make_error(fmt::format("{}: cannot read configuration: {}", source_name, e.what()));
  }
  config = std::move(updated);
  if (origins) *origins = std::move(updated_origins);
  return ok();
}

Result<Config> parse_config(const std::string& yaml_text, const std::string& source_name,
                            uint32_t default_frequency_hz) {
  Config config = default_config(default_frequency_hz);
  if (auto applied = apply_config_document(yaml_text, source_name, config); !applied) return applied.error();
  return config;
}

Result<Config> load_config_file(const std::string& path, uint32_t default_frequency_hz) {
  auto text = read_config_text(path);
  if (!text) return text.error();
  return parse_config(*text, path, default_frequency_hz);
}

}  // namespace omniprof
