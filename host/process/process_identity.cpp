#include "process/process_identity.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fnmatch.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <cctype>
#include <optional>

#include "common/file_io.h"
#include "omniprof/support/text_fields.h"
#include "process/container_metadata.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {
namespace {

bool all_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

bool is_container_id(std::string_view text) { return text.size() == 64 && all_hex(text); }

bool strip_prefix(std::string_view& text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

bool strip_suffix(std::string_view& text, std::string_view suffix) {
  if (text.size() < suffix.size() || text.substr(text.size() - suffix.size()) != suffix) return false;
  text.remove_suffix(suffix.size());
  return true;
}

// A container named by one path component, with the runtime its form says.
struct ContainerComponent {
  std::string_view id;
  std::string_view runtime;
};

std::optional<ContainerComponent> container_of_component(std::string_view component) {
  // systemd driver: RUNTIME-ID.scope. The monitors beside the containers
  // (crio-conmon-ID, libpod-conmon-ID) carry the ID of the container they
  // watch but are not it.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kScopes{{
      {"docker-", "docker"},
      {"cri-containerd-", "containerd"},
      {"crio-", "cri-o"},
      {"libpod-", "podman"},
  }};
  std::string_view text = component;
  strip_suffix(text, ".scope");
  for (const auto& [prefix, runtime] : kScopes) {
    std::string_view id = text;
    if (strip_prefix(id, prefix) && is_container_id(id)) return ContainerComponent{id, runtime};
  }
  // containerd's systemd form on some setups: "...slice:cri-containerd:ID".
  if (auto colon = component.rfind(':'); colon != std::string_view::npos) {
    std::string_view id = component.substr(colon + 1);
    if (is_container_id(id)) {
      std::string_view runtime = component.find(":cri-containerd:") != std::string_view::npos ? "containerd"
                                 : component.find(":crio:") != std::string_view::npos        ? "cri-o"
                                 : component.find(":docker:") != std::string_view::npos      ? "docker"
                                                                                             : "";
      return ContainerComponent{id, runtime};
    }
  }
  // cgroupfs driver: the bare ID, its runtime said by the parent (docker/ID,
  // libpod_parent/...) or not at all (kubepods/QOS/podUID/ID: any CRI).
  if (is_container_id(component)) return ContainerComponent{component, ""};
  return std::nullopt;
}

// 32 hex digits in 8-4-4-4-12 with '-' (cgroupfs) or '_' (systemd).
std::string pod_uid_of(std::string_view text) {
  if (text.size() != 36) return {};
  std::string uid(text);
  for (size_t i = 0; i < uid.size(); ++i) {
    bool dash_at = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_at) {
      if (uid[i] != '-' && uid[i] != '_') return {};
      uid[i] = '-';
    } else if (!std::isxdigit(static_cast<unsigned char>(uid[i]))) {
      return {};
    }
  }
  return uid;
}

std::string pod_uid_of_component(std::string_view component) {
  // cgroupfs: podUID; systemd: kubepods[-QOS]-podUID.slice.
  std::string_view text = component;
  strip_suffix(text, ".slice");
  auto at = text.rfind("pod");
  if (at == std::string_view::npos) return {};
  if (at != 0 && text[at - 1] != '-') return {};
  return pod_uid_of(text.substr(at + 3));
}

bool is_unit(std::string_view component) {
  for (std::string_view suffix : {".service", ".scope"}) {
    if (component.size() > suffix.size() && component.substr(component.size() - suffix.size()) == suffix) return true;
  }
  return false;
}

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  for (std::string_view part = next_field(path, "/"); !part.empty(); part = next_field(path, "/")) out.push_back(part);
  return out;
}

// Merges what `more` knows into `facts` where `facts` knows nothing yet.
void fill_from(CgroupFacts& facts, const CgroupFacts& more) {
  if (facts.container_id.empty()) {
    facts.container_id = more.container_id;
    facts.container_runtime = more.container_runtime;
  }
  if (facts.k8s_pod_uid.empty()) facts.k8s_pod_uid = more.k8s_pod_uid;
  if (facts.systemd_unit.empty()) facts.systemd_unit = more.systemd_unit;
}

bool has_key(const ResourceAttributes& attributes, std::string_view key) {
  return std::any_of(attributes.begin(), attributes.end(), [&](const auto& kv) { return kv.first == key; });
}

void add_unless_present(ResourceAttributes& attributes, std::string key, std::string value) {
  if (value.empty() || has_key(attributes, key)) return;
  attributes.emplace_back(std::move(key), std::move(value));
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A /proc/PID/exe target of a deleted file ends in " (deleted)".
std::string without_deleted_suffix(std::string path) {
  std::string_view view = path;
  if (strip_suffix(view, " (deleted)")) path.resize(view.size());
  return path;
}

// What a process's executable is called: its file's name, or the comm of a
// kernel thread (which has none).
std::string executable_name(const ProcessFacts& facts) {
  return facts.executable_path.empty() ? facts.comm : base_name(facts.executable_path);
}

bool glob_matches(const std::string& pattern, const std::string& text) {
  return !text.empty() && fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

std::string trim(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

// %XX escapes of the W3C Baggage form OTEL_RESOURCE_ATTRIBUTES uses.
std::string percent_decoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) && std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

CgroupFacts cgroup_facts_of_path(std::string_view path) {
  CgroupFacts facts;
  auto parts = components(path);
  // Innermost first: a container's nested cgroups (libpod-ID.scope/container)
  // and a unit inside a container's scope name the innermost thing.
  for (size_t i = parts.size(); i-- > 0;) {
    std::string_view part = parts[i];
    if (facts.container_id.empty()) {
      if (auto container = container_of_component(part)) {
        facts.container_id = std::string(container->id);
        facts.container_runtime = std::string(container->runtime);
        if (facts.container_runtime.empty() && i > 0) {
          std::string_view parent = parts[i - 1];
          if (parent == "docker") facts.container_runtime = "docker";
          if (parent == "libpod_parent" || parent.substr(0, 7) == "libpod-") facts.container_runtime = "podman";
        }
      }
    }
    if (facts.k8s_pod_uid.empty()) facts.k8s_pod_uid = pod_uid_of_component(part);
    if (facts.systemd_unit.empty() && is_unit(part)) facts.systemd_unit = std::string(part);
  }
  return facts;
}

CgroupFacts cgroup_facts(std::string_view text) {
  std::string_view unified, systemd;
  std::vector<std::string_view> controllers;
  while (!text.empty()) {
    std::string_view line = next_line(text);
    auto first = line.find(':');
    if (first == std::string_view::npos) continue;
    auto second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view hierarchy = line.substr(0, first), names = line.substr(first + 1, second - first - 1);
    std::string_view path = line.substr(second + 1);
    if (hierarchy == "0" && names.empty()) {
      unified = path;
    } else if (names == "name=systemd") {
      systemd = path;
    } else {
      controllers.push_back(path);
    }
  }
  CgroupFacts facts = cgroup_facts_of_path(unified);
  fill_from(facts, cgroup_facts_of_path(systemd));
  for (std::string_view path : controllers) {
    CgroupFacts more = cgroup_facts_of_path(path);
    // On v1 the controllers' paths are set by whoever placed the process;
    // only the systemd hierarchy says its unit.
    more.systemd_unit.clear();
    fill_from(facts, more);
  }
  return facts;
}

std::string environ_value(std::string_view text, std::string_view name) {
  constexpr std::string_view kNul("\0", 1);
  for (std::string_view entry = next_field(text, kNul); !entry.empty(); entry = next_field(text, kNul)) {
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=') {
      return std::string(entry.substr(name.size() + 1));
    }
  }
  return {};
}

std::string_view service_name_rule_key(ServiceNameRule::Match match) {
  switch (match) {
    case ServiceNameRule::Match::kExecutable:
      return "executable";
    case ServiceNameRule::Match::kSystemdUnit:
      return "systemd_unit";
    case ServiceNameRule::Match::kContainerId:
      return "container_id";
    case ServiceNameRule::Match::kContainerLabel:
      return "container_label";
  }
  return "executable";
}

std::string service_name_for(const ResourceSettings& settings, const ProcessFacts& facts) {
  const std::string executable = executable_name(facts);
  for (const ServiceNameRule& rule : settings.service_name_rules) {
    bool matched = false;
    switch (rule.match) {
      case ServiceNameRule::Match::kExecutable:
        matched = glob_matches(rule.pattern,
                               rule.pattern.find('/') != std::string::npos ? facts.executable_path : executable);
        break;
      case ServiceNameRule::Match::kSystemdUnit:
        matched = glob_matches(rule.pattern, facts.cgroup.systemd_unit);
        break;
      case ServiceNameRule::Match::kContainerId:
        matched = glob_matches(rule.pattern, facts.cgroup.container_id);
        break;
      case ServiceNameRule::Match::kContainerLabel: {
        auto it = facts.container.labels.find(rule.pattern);
        if (it != facts.container.labels.end() && !it->second.empty()) {
          return rule.service_name.empty() ? it->second : rule.service_name;
        }
        break;
      }
    }
    if (matched) return rule.service_name;
  }
  if (!facts.own_service_name.empty()) return facts.own_service_name;
  if (!settings.default_service_name.empty()) return settings.default_service_name;
  return executable.empty() ? "[unknown executable]" : executable;
}

ResourceAttributes host_attributes() {
  ResourceAttributes host;
  struct utsname names {};
  if (uname(&names) == 0) add_unless_present(host, "host.name", names.nodename);
  add_unless_present(host, "host.id", trim(read_file_prefix("/etc/machine-id", 256)));
  return host;
}

ResourceAttributes process_resource(const ResourceSettings& settings, const ProcessFacts& facts,
                                    const ResourceAttributes& host) {
  ResourceAttributes attributes;
  add_unless_present(attributes, "service.name", service_name_for(settings, facts));
  add_unless_present(attributes, "process.executable.name", executable_name(facts));
  add_unless_present(attributes, "process.executable.path", facts.executable_path);
  add_unless_present(attributes, "container.id", facts.cgroup.container_id);
  add_unless_present(attributes, "container.runtime", facts.cgroup.container_runtime);
  add_unless_present(attributes, "container.name", facts.container.name);
  add_unless_present(attributes, "k8s.pod.uid", facts.cgroup.k8s_pod_uid);
  add_unless_present(attributes, "k8s.pod.name", facts.container.k8s_pod_name);
  add_unless_present(attributes, "k8s.namespace.name", facts.container.k8s_namespace_name);
  add_unless_present(attributes, "k8s.container.name", facts.container.k8s_container_name);
  add_unless_present(attributes, "systemd.unit", facts.cgroup.systemd_unit);
  for (const auto& [key, value] : host) add_unless_present(attributes, key, value);
  for (const auto& [key, value] : settings.attributes) add_unless_present(attributes, key, value);
  return attributes;
}

namespace {

// A container's processes share one read of its runtime's state. Bounded:
// a machine starting containers all day forgets the oldest ones at once.
ContainerMetadata cached_container_metadata(const CgroupFacts& cgroup) {
  static std::mutex mutex;
  static std::map<std::string, ContainerMetadata> cache;
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(cgroup.container_id); it != cache.end()) return it->second;
  }
  ContainerMetadata metadata = read_container_metadata(container_state_root(), cgroup);
  std::lock_guard lock(mutex);
  if (cache.size() >= 4096) cache.clear();
  cache.emplace(cgroup.container_id, metadata);
  return metadata;
}

}  // namespace

ProcessFacts read_process_facts(int32_t pid, std::string comm, std::string exe_target) {
  ProcessFacts facts;
  facts.executable_path = without_deleted_suffix(std::move(exe_target));
  facts.comm = std::move(comm);
  // The initial environment, bounded: only one variable is wanted.
  facts.own_service_name =
      environ_value(read_file_prefix(fmt::format("/proc/{}/environ", pid), 1 << 20), "OTEL_SERVICE_NAME");
  facts.cgroup = cgroup_facts(read_file_prefix(fmt::format("/proc/{}/cgroup", pid), 1 << 16));
  if (!facts.cgroup.container_id.empty()) facts.container = cached_container_metadata(facts.cgroup);
  return facts;
}

EnvironmentResource parse_environment_resource(const char* otel_resource_attributes, const char* otel_service_name,
                                               std::string* error) {
  EnvironmentResource environment;
  std::string_view text = otel_resource_attributes ? otel_resource_attributes : "";
  for (std::string_view field = next_field(text, ","); !field.empty(); field = next_field(text, ",")) {
    std::string entry = trim(std::string(field));
    if (entry.empty()) continue;
    auto eq = entry.find('=');
    std::string key = eq == std::string::npos ? "" : trim(entry.substr(0, eq));
    if (key.empty()) {
      if (error && error->empty()) {
        *error = fmt::format("OTEL_RESOURCE_ATTRIBUTES: '{}' is not KEY=VALUE; the variable is ignored", entry);
      }
      environment = {};
      break;
    }
    std::string value = percent_decoded(trim(entry.substr(eq + 1)));
    if (key == "service.name") {
      environment.service_name = value;
    } else if (!has_key(environment.attributes, key)) {
      environment.attributes.emplace_back(std::move(key), std::move(value));
    }
  }
  if (otel_service_name && *otel_service_name) environment.service_name = otel_service_name;
  return environment;
}

ResourceSettings with_environment(ResourceSettings settings, const EnvironmentResource& environment) {
  if (settings.default_service_name.empty()) settings.default_service_name = environment.service_name;
  for (const auto& [key, value] : environment.attributes) add_unless_present(settings.attributes, key, value);
  return settings;
}

}  // namespace omniprof
