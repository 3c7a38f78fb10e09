// Container metadata from each runtime's own state, as the files look on a
// host running it (abridged: the fields around the ones read are kept so the
// parser meets what it meets there), and service.name taken from a label.
#include "process/container_metadata.h"

#include <gtest/gtest.h>

#include "temp_tree.h"

namespace omniprof {
namespace {

using testing_support::TempTree;

const std::string kId = "3f2a9c0d4e5b6a7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7";

// Docker 24's /var/lib/docker/containers/ID/config.v2.json of a compose service.
const std::string kDockerConfig =
    R"({"StreamConfig":{},"State":{"Running":true,"Paused":false,"Pid":4242,"ExitCode":0,)"
    R"("StartedAt":"2026-11-30T08:00:00.123456789Z","Health":null},"ID":")" + kId + R"(",)"
    R"("Created":"2026-11-30T07:59:59.9Z","Path":"python","Args":["-m","checkout"],)"
    R"("Config":{"Hostname":"3f2a9c0d4e5b","Env":["PATH=/usr/local/bin:/usr/bin"],"Cmd":["python","-m","checkout"],)"
    R"("Image":"shop/checkout:1.4","Labels":{"com.docker.compose.project":"shop",)"
    R"("com.docker.compose.service":"checkout","com.docker.compose.version":"2.29.7","maintainer":"Shop \u003cops@shop\u003e"}},)"
    R"("Image":"sha256:0123","Name":"/shop-checkout-1","RestartCount":0,"Driver":"overlay2"})";

// containerd 1.7's OCI bundle config.json of a Kubernetes container.
const std::string kContainerdConfig =
    R"({"ociVersion":"1.1.0","process":{"user":{"uid":0,"gid":0},"args":["/app/checkout"],)"
    R"("env":["PATH=/usr/bin"],"cwd":"/"},"root":{"path":"rootfs"},"hostname":"checkout-7d4b9c-xk2p1",)"
    R"("annotations":{"io.kubernetes.cri.container-name":"checkout","io.kubernetes.cri.container-type":"container",)"
    R"("io.kubernetes.cri.image-name":"registry.shop/checkout:1.4","io.kubernetes.cri.sandbox-id":"9e8d",)"
    R"("io.kubernetes.cri.sandbox-name":"checkout-7d4b9c-xk2p1","io.kubernetes.cri.sandbox-namespace":"shop",)"
    R"("io.kubernetes.cri.sandbox-uid":"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},"linux":{"namespaces":[{"type":"pid"}]}})";

// CRI-O 1.28's userdata/config.json: the pod's labels as one JSON string.
const std::string kCrioConfig =
    R"({"ociVersion":"1.0.2-dev","process":{"args":["/app/checkout"]},"annotations":{)"
    R"("io.kubernetes.container.name":"checkout","io.kubernetes.pod.name":"checkout-7d4b9c-xk2p1",)"
    R"("io.kubernetes.pod.namespace":"shop","io.kubernetes.cri-o.ContainerName":"k8s_checkout_checkout-7d4b9c-xk2p1_shop_0f1e_0",)"
    R"("io.kubernetes.cri-o.Labels":"{\"app\":\"checkout\",\"io.kubernetes.container.name\":\"checkout\",\"tier\":\"web\"}"}})";

TEST(ContainerMetadata, DockerNameAndLabels) {
  ContainerMetadata m = docker_container_metadata(kDockerConfig);
  EXPECT_EQ(m.name, "shop-checkout-1");
  EXPECT_EQ(m.labels.at("com.docker.compose.service"), "checkout");
  EXPECT_EQ(m.labels.at("maintainer"), "Shop <ops@shop>");
  EXPECT_EQ(m.k8s_pod_name, "");
}

TEST(ContainerMetadata, ContainerdKubernetesNames) {
  ContainerMetadata m = oci_container_metadata(kContainerdConfig);
  EXPECT_EQ(m.k8s_container_name, "checkout");
  EXPECT_EQ(m.k8s_pod_name, "checkout-7d4b9c-xk2p1");
  EXPECT_EQ(m.k8s_namespace_name, "shop");
  EXPECT_EQ(m.name, "checkout");
}

TEST(ContainerMetadata, CrioNamesAndThePodsLabels) {
  ContainerMetadata m = oci_container_metadata(kCrioConfig);
  EXPECT_EQ(m.k8s_container_name, "checkout");
  EXPECT_EQ(m.k8s_pod_name, "checkout-7d4b9c-xk2p1");
  EXPECT_EQ(m.k8s_namespace_name, "shop");
  EXPECT_EQ(m.labels.at("app"), "checkout");
  EXPECT_EQ(m.labels.at("tier"), "web");
  EXPECT_EQ(m.name, "k8s_checkout_checkout-7d4b9c-xk2p1_shop_0f1e_0");
}

TEST(ContainerMetadata, BrokenOrMissingStateSaysNothing) {
  EXPECT_EQ(docker_container_metadata("{not json"), ContainerMetadata{});
  EXPECT_EQ(docker_container_metadata(""), ContainerMetadata{});
  EXPECT_EQ(oci_container_metadata("[1,2]"), ContainerMetadata{});
  TempTree tree("containers");
  EXPECT_EQ(read_container_metadata(tree.path(""), CgroupFacts{kId, "docker", "", ""}), ContainerMetadata{});
  EXPECT_EQ(read_container_metadata(tree.path(""), CgroupFacts{"", "", "", ""}), ContainerMetadata{});
}

TEST(ContainerMetadata, ReadFromEachRuntimesStateDirectory) {
  TempTree tree("containers");
  tree.file("var/lib/docker/containers/" + kId + "/config.v2.json", kDockerConfig);
  EXPECT_EQ(read_container_metadata(tree.path(""), CgroupFacts{kId, "docker", "", ""}).name, "shop-checkout-1");
  const std::string other = std::string(63, 'a') + "b";
  tree.file("run/containerd/io.containerd.runtime.v2.task/k8s.io/" + other + "/config.json", kContainerdConfig);
  EXPECT_EQ(read_container_metadata(tree.path(""), CgroupFacts{other, "containerd", "", ""}).k8s_pod_name,
            "checkout-7d4b9c-xk2p1");
  // A bare id under kubepods names no runtime: every runtime's place is tried.
  EXPECT_EQ(read_container_metadata(tree.path(""), CgroupFacts{other, "", "", ""}).k8s_namespace_name, "shop");
  const std::string crio = std::string(63, 'c') + "d";
  tree.file("run/containers/storage/overlay-containers/" + crio + "/userdata/config.json", kCrioConfig);
  EXPECT_EQ(read_container_metadata(tree.path(""), CgroupFacts{crio, "cri-o", "", ""}).labels.at("app"), "checkout");
}

TEST(ContainerMetadata, ServiceNameFromALabel) {
  ResourceSettings settings;
  settings.service_name_rules = {{ServiceNameRule::Match::kContainerLabel, "com.docker.compose.service", ""},
                                 {ServiceNameRule::Match::kContainerLabel, "app", "from-app-label"}};
  ProcessFacts facts;
  facts.executable_path = "/usr/bin/python3.11";
  facts.container = docker_container_metadata(kDockerConfig);
  EXPECT_EQ(service_name_for(settings, facts), "checkout");  // the label's value
  facts.container = oci_container_metadata(kCrioConfig);
  EXPECT_EQ(service_name_for(settings, facts), "from-app-label");  // the rule's own name
  facts.container = {};
  EXPECT_EQ(service_name_for(settings, facts), "python3.11");
  // The runtime's names are resource attributes.
  facts.container = oci_container_metadata(kContainerdConfig);
  ResourceAttributes attributes = process_resource(settings, facts, {});
  auto value = [&](const std::string& key) {
    for (const auto& [k, v] : attributes) {
      if (k == key) return v;
    }
    return std::string("<none>");
  };
  EXPECT_EQ(value("k8s.pod.name"), "checkout-7d4b9c-xk2p1");
  EXPECT_EQ(value("k8s.namespace.name"), "shop");
  EXPECT_EQ(value("k8s.container.name"), "checkout");
  EXPECT_EQ(value("container.name"), "checkout");
}

}  // namespace
}  // namespace omniprof
