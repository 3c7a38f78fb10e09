// Who a process is, for the people reading its samples in a fleet: the
// OpenTelemetry resource attributes of each sampled process (service.name,
// container.id, k8s.pod.uid, the systemd unit, the executable) and of the
// host, read once when the process is described (process_tracker.h) from
// /proc/PID/cgroup, /proc/PID/exe and the OTEL_SERVICE_NAME of the
// process's own environment. The profile writers put them on every sample
// of the process (pprof labels today).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace omniprof {

// key -> value, in the order they are written. Keys are OpenTelemetry's
// semantic-convention names where one exists (docs/fleet.md lists them).
using ResourceAttributes = std::vector<std::pair<std::string, std::string>>;

// What a process's cgroup path says of it.
struct CgroupFacts {
  std::string container_id;       // 64 hex digits, or empty
  std::string container_runtime;  // docker, containerd, cri-o, podman; empty if the path does not say
  std::string k8s_pod_uid;        // 8-4-4-4-12, dashes (the systemd driver's underscores turned back)
  std::string systemd_unit;       // the innermost .service or .scope unit, e.g. nginx.service

  friend bool operator==(const CgroupFacts&, const CgroupFacts&) = default;
};

// What the container's runtime says of it (process/container_metadata.h).
struct ContainerMetadata {
  std::string name;                          // container.name
  std::map<std::string, std::string> labels;  // its labels, or its OCI annotations (and a CRI-O pod's labels)
  std::string k8s_container_name;
  std::string k8s_pod_name;
  std::string k8s_namespace_name;

  friend bool operator==(const ContainerMetadata&, const ContainerMetadata&) = default;
};

// Reads one cgroup path (the part after the second ':' of a
// /proc/PID/cgroup line): docker (cgroupfs `/docker/ID`, systemd
// `docker-ID.scope`), containerd (`cri-containerd-ID.scope`, or a bare ID
// under a kubepods pod), CRI-O (`crio-ID.scope`; its `crio-conmon-` monitor
// is not the container), podman (`libpod-ID.scope`, `libpod_parent/libpod-ID`),
// Kubernetes pods (`podUID`, `kubepods-QOS-podUID.slice`). The innermost
// component that names a container wins.
CgroupFacts cgroup_facts_of_path(std::string_view path);

// Reads the text of /proc/PID/cgroup, cgroup v2 ("0::/path"), v1 ("N:ctrl:/path"
// lines) or both (hybrid): the unified path first, then the name=systemd
// hierarchy (which holds the unit on v1), then the controllers' paths.
CgroupFacts cgroup_facts(std::string_view proc_cgroup_text);

// The value of NAME in the text of /proc/PID/environ (NUL-separated
// NAME=VALUE entries), or empty.
std::string environ_value(std::string_view proc_environ_text, std::string_view name);

// How service.name is chosen for a process (config `resource:`, and the
// agent's OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES).
struct ServiceNameRule {
  enum class Match { kExecutable, kSystemdUnit, kContainerId, kContainerLabel };
  Match match = Match::kExecutable;
  // A glob (fnmatch): for kExecutable against the executable's path when the
  // pattern has a '/', else against its file name. For kContainerLabel the
  // label's key (com.docker.compose.service): the rule matches a container
  // that has it.
  std::string pattern;
  // For kContainerLabel, empty: the label's value is the service name.
  std::string service_name;

  friend bool operator==(const ServiceNameRule&, const ServiceNameRule&) = default;
};

// The config key of a rule's matcher: executable, systemd_unit, container_id.
std::string_view service_name_rule_key(ServiceNameRule::Match match);

struct ResourceSettings {
  std::vector<ServiceNameRule> service_name_rules;  // first match wins
  // The default service.name of a process no rule names and whose own
  // environment has no OTEL_SERVICE_NAME; empty: the executable's name.
  std::string default_service_name;
  // Attributes put on every process's samples (deployment.environment=prod).
  ResourceAttributes attributes;

  friend bool operator==(const ResourceSettings&, const ResourceSettings&) = default;
};

// What a process shows of itself, as read from /proc.
struct ProcessFacts {
  std::string executable_path;     // /proc/PID/exe's target ("" if unreadable: a kernel thread)
  std::string comm;                // used as the executable's name when there is no path
  std::string own_service_name;    // OTEL_SERVICE_NAME of its environment
  CgroupFacts cgroup;
  ContainerMetadata container;     // what the runtime says, when the cgroup names a container
};

// service.name of a process: the first rule that matches, else its own
// OTEL_SERVICE_NAME, else the default, else its executable's name (never
// unknown_service).
std::string service_name_for(const ResourceSettings& settings, const ProcessFacts& facts);

// The host's attributes: host.name (uname's nodename) and host.id
// (/etc/machine-id, as OpenTelemetry's semantic conventions say for Linux).
ResourceAttributes host_attributes();

// Every attribute of a process: service.name, process.executable.name and
// .path, container.id, container.runtime, container.name, k8s.pod.uid,
// k8s.pod.name, k8s.namespace.name, k8s.container.name, systemd.unit (those
// its facts have), then `host`, then the settings' own attributes (none of
// which replaces one named before).
ResourceAttributes process_resource(const ResourceSettings& settings, const ProcessFacts& facts,
                                    const ResourceAttributes& host);

// A live process's facts: its comm and /proc/PID/exe target as the caller
// read them, its environment's OTEL_SERVICE_NAME and its cgroup from /proc,
// its container's metadata from the runtime's state (cached by container id);
// a file it cannot read leaves its fields empty (the process may be gone).
ProcessFacts read_process_facts(int32_t pid, std::string comm, std::string exe_target);

// The agent's environment as OpenTelemetry SDKs read it:
// OTEL_RESOURCE_ATTRIBUTES ("k=v,k2=v2", values percent-decoded) and
// OTEL_SERVICE_NAME, which wins over a service.name among them. The config
// wins over both (docs/fleet.md: explicit configuration over environment).
// An entry that is not k=v is an error naming it.
struct EnvironmentResource {
  std::string service_name;
  ResourceAttributes attributes;
};
EnvironmentResource parse_environment_resource(const char* otel_resource_attributes,
                                               const char* otel_service_name, std::string* error);

// `settings` with what the environment adds where the config is silent.
ResourceSettings with_environment(ResourceSettings settings, const EnvironmentResource& environment);

}  // namespace omniprof
