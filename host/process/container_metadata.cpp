#include "process/container_metadata.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <vector>

#include "common/file_io.h"

namespace omniprof {
namespace {

// A runtime's state file is JSON, which yaml-cpp reads (JSON is YAML's flow
// style); a file it cannot read is no metadata.
YAML::Node parse_json(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception&) {
    return YAML::Node();
  }
}

void read_string_map(const YAML::Node& node, std::map<std::string, std::string>& out) {
  if (!node || !node.IsMap()) return;
  for (const auto& entry : node) {
    if (entry.first.IsScalar() && entry.second.IsScalar()) out[entry.first.Scalar()] = entry.second.Scalar();
  }
}

std::string label(const std::map<std::string, std::string>& labels, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (auto it = labels.find(key); it != labels.end() && !it->second.empty()) return it->second;
  }
  return "";
}

// The Kubernetes names, from whichever runtime's keys are there (containerd's
// CRI annotations, CRI-O's, or the labels kubelet put on a Docker container).
void read_kubernetes_names(ContainerMetadata& metadata) {
  metadata.k8s_container_name = label(metadata.labels, {"io.kubernetes.cri.container-name", "io.kubernetes.container.name"});
  metadata.k8s_pod_name = label(metadata.labels, {"io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"});
  metadata.k8s_namespace_name =
      label(metadata.labels, {"io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"});
}

constexpr size_t kStateFileLimit = 4 << 20;

}  // namespace

ContainerMetadata docker_container_metadata(std::string_view config_v2_json) {
  ContainerMetadata metadata;
  YAML::Node root = parse_json(config_v2_json);
  if (!root.IsMap()) return metadata;
  if (root["Name"] && root["Name"].IsScalar()) {
    metadata.name = root["Name"].Scalar();
    if (!metadata.name.empty() && metadata.name.front() == '/') metadata.name.erase(0, 1);
  }
  if (root["Config"] && root["Config"].IsMap()) read_string_map(root["Config"]["Labels"], metadata.labels);
  read_kubernetes_names(metadata);
  return metadata;
}

ContainerMetadata oci_container_metadata(std::string_view config_json) {
  ContainerMetadata metadata;
  YAML::Node root = parse_json(config_json);
  if (!root.IsMap()) return metadata;
  read_string_map(root["annotations"], metadata.labels);
  // CRI-O keeps the pod's labels (app: checkout) as one JSON string.
  if (auto it = metadata.labels.find("io.kubernetes.cri-o.Labels"); it != metadata.labels.end()) {
    std::map<std::string, std::string> pod_labels;
    read_string_map(parse_json(it->second), pod_labels);
    for (auto& [key, value] : pod_labels) metadata.labels.emplace(key, value);
  }
  read_kubernetes_names(metadata);
  metadata.name = label(metadata.labels, {"io.kubernetes.cri-o.ContainerName", "io.podman.annotations.name"});
  if (metadata.name.empty()) metadata.name = metadata.k8s_container_name;
  return metadata;
}

ContainerMetadata read_container_metadata(const std::string& state_root, const CgroupFacts& cgroup) {
  const std::string& id = cgroup.container_id;
  if (id.empty()) return {};
  std::string root = state_root;
  while (!root.empty() && root.back() == '/') root.pop_back();
  const std::string& runtime = cgroup.container_runtime;
  auto read = [&](const std::string& relative) { return read_file_prefix(root + relative, kStateFileLimit); };
  if (runtime.empty() || runtime == "docker") {
    if (std::string text = read("/var/lib/docker/containers/" + id + "/config.v2.json"); !text.empty()) {
      return docker_container_metadata(text);
    }
  }
  std::vector<std::string> oci_files;
  if (runtime.empty() || runtime == "containerd") {
    for (const char* ns : {"k8s.io", "moby", "default"}) {
      oci_files.push_back(std::string("/run/containerd/io.containerd.runtime.v2.task/") + ns + "/" + id + "/config.json");
    }
  }
  if (runtime.empty() || runtime == "cri-o" || runtime == "podman") {
    oci_files.push_back("/run/containers/storage/overlay-containers/" + id + "/userdata/config.json");
    oci_files.push_back("/var/lib/containers/storage/overlay-containers/" + id + "/userdata/config.json");
  }
  for (const std::string& file : oci_files) {
    if (std::string text = read(file); !text.empty()) return oci_container_metadata(text);
  }
  return {};
}

const std::string& container_state_root() {
  static const std::string root = [] {
    const char* variable = std::getenv("OMNIPROF_CONTAINER_STATE_ROOT");
    return std::string(variable && *variable ? variable : "/");
  }();
  return root;
}

}  // namespace omniprof
