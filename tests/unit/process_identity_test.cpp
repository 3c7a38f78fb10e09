// Who a process is (host/process/process_identity.h): the cgroup path forms
// of each container runtime, cgroup v1, v2 and hybrid, service.name's
// precedence, the OTEL_* environment, and the config's `resource:` section.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "config/config.h"
#include "config/config_sources.h"
#include "process/process_identity.h"
#include "profile/profile_builder.h"

namespace omniprof {
namespace {

constexpr const char* kId = "6a9d5b37d1e0c0e4d3d7f2f1f1a8c9b3e5d2f8a7c6b5a4e3d2c1b0a9f8e7d6c5";
const std::string kUid = "0f2c1f6e-3b5a-4c1d-9e2f-7a8b9c0d1e2f";
const std::string kSystemdUid = "0f2c1f6e_3b5a_4c1d_9e2f_7a8b9c0d1e2f";

CgroupFacts facts(std::string id, std::string runtime, std::string pod, std::string unit) {
  return CgroupFacts{std::move(id), std::move(runtime), std::move(pod), std::move(unit)};
}

// The paths below are the forms each runtime writes, as /proc/PID/cgroup
// shows them from the host (the IDs replaced by one made-up ID).
TEST(CgroupFactsTest, DockerCgroupfsV1) {
  const std::string text = std::string("12:pids:/docker/") + kId + "\n11:memory:/docker/" + kId +
                           "\n1:name=systemd:/docker/" + kId + "\n";
  EXPECT_EQ(cgroup_facts(text), facts(kId, "docker", "", ""));
}

TEST(CgroupFactsTest, DockerSystemdDriverV2) {
  EXPECT_EQ(cgroup_facts(std::string("0::/system.slice/docker-") + kId + ".scope\n"),
            facts(kId, "docker", "", std::string("docker-") + kId + ".scope"));
}

TEST(CgroupFactsTest, DockerCgroupfsDriverV2) {
  EXPECT_EQ(cgroup_facts(std::string("0::/docker/") + kId + "\n"), facts(kId, "docker", "", ""));
}

TEST(CgroupFactsTest, ContainerdInKubernetesSystemdDriverV1) {
  const std::string path = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kSystemdUid +
                           ".slice/cri-containerd-" + kId + ".scope";
  const std::string text = "11:memory:" + path + "\n4:cpu,cpuacct:" + path + "\n1:name=systemd:" + path + "\n";
  EXPECT_EQ(cgroup_facts(text), facts(kId, "containerd", kUid, std::string("cri-containerd-") + kId + ".scope"));
}

TEST(CgroupFactsTest, KubernetesCgroupfsDriverV2NamesThePodButNotTheRuntime) {
  EXPECT_EQ(cgroup_facts("0::/kubepods/besteffort/pod" + kUid + "/" + kId + "\n"), facts(kId, "", kUid, ""));
}

TEST(CgroupFactsTest, CriOGuaranteedPodV2AndItsMonitorIsNotTheContainer) {
  const std::string pod = "0::/kubepods.slice/kubepods-pod" + kSystemdUid + ".slice/";
  EXPECT_EQ(cgroup_facts(pod + "crio-" + kId + ".scope\n"),
            facts(kId, "cri-o", kUid, std::string("crio-") + kId + ".scope"));
  // conmon, which watches the container, runs beside it in the pod.
  EXPECT_EQ(cgroup_facts(pod + "crio-conmon-" + kId + ".scope\n"),
            facts("", "", kUid, std::string("crio-conmon-") + kId + ".scope"));
}

TEST(CgroupFactsTest, PodmanRootfulRootlessAndCgroupfs) {
  // Rootful, with the container's own init cgroup below its scope.
  EXPECT_EQ(cgroup_facts(std::string("0::/machine.slice/libpod-") + kId + ".scope/container\n"),
            facts(kId, "podman", "", std::string("libpod-") + kId + ".scope"));
  // Rootless, under the user's systemd.
  EXPECT_EQ(cgroup_facts(std::string("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-") + kId +
                         ".scope\n"),
            facts(kId, "podman", "", std::string("libpod-") + kId + ".scope"));
  // cgroupfs manager on v1.
  EXPECT_EQ(cgroup_facts(std::string("5:memory:/libpod_parent/libpod-") + kId + "\n"), facts(kId, "podman", "", ""));
}

TEST(CgroupFactsTest, SystemdUnitsOfServicesSessionsAndUserManagers) {
  EXPECT_EQ(cgroup_facts("0::/system.slice/nginx.service\n"), facts("", "", "", "nginx.service"));
  EXPECT_EQ(cgroup_facts("0::/user.slice/user-1000.slice/session-3.scope\n"), facts("", "", "", "session-3.scope"));
  // A unit of the user's own manager: the innermost unit.
  EXPECT_EQ(cgroup_facts("0::/user.slice/user-1000.slice/user@1000.service/app.slice/backup.service\n"),
            facts("", "", "", "backup.service"));
  // Slices are not units a process runs in; the root says nothing.
  EXPECT_EQ(cgroup_facts("0::/system.slice\n"), CgroupFacts{});
  EXPECT_EQ(cgroup_facts("0::/\n"), CgroupFacts{});
}

TEST(CgroupFactsTest, HybridReadsTheUnitFromTheUnifiedOrSystemdHierarchyNotFromControllers) {
  // The v1 controllers' paths are whatever placed the process there (this
  // machine's sandbox puts a 32-digit id under memory).
  const std::string text =
      "9:name=systemd:/system.slice/cron.service\n4:memory:/process_api/7da4344b19f7405661069d23bef4550d\n"
      "3:cpu:/other.service\n0::/\n";
  EXPECT_EQ(cgroup_facts(text), facts("", "", "", "cron.service"));
  EXPECT_EQ(cgroup_facts("4:memory:/process_api/7da4344b19f7405661069d23bef4550d\n0::/\n"), CgroupFacts{});
}

TEST(CgroupFactsTest, MalformedTextGivesNothing) {
  EXPECT_EQ(cgroup_facts(""), CgroupFacts{});
  EXPECT_EQ(cgroup_facts("garbage\n::\n0:\n"), CgroupFacts{});
  // Almost IDs: 63 digits, a non-hex digit, a uid with a wrong separator.
  EXPECT_EQ(cgroup_facts(std::string("0::/docker/") + std::string(kId).substr(1) + "\n"), CgroupFacts{});
  EXPECT_EQ(cgroup_facts(std::string("0::/docker/") + std::string(63, 'a') + "g\n"), CgroupFacts{});
  EXPECT_EQ(cgroup_facts("0::/kubepods/pod0f2c1f6e.3b5a-4c1d-9e2f-7a8b9c0d1e2f\n"), CgroupFacts{});
}

TEST(EnvironValueTest, FindsTheVariableAmongNulSeparatedEntries) {
  using namespace std::string_literals;
  const std::string environ = "PATH=/bin\0OTEL_SERVICE_NAME_X=no\0OTEL_SERVICE_NAME=checkout\0"s;
  EXPECT_EQ(environ_value(environ, "OTEL_SERVICE_NAME"), "checkout");
  EXPECT_EQ(environ_value(environ, "HOME"), "");
  EXPECT_EQ(environ_value("", "HOME"), "");
}

ProcessFacts process(std::string exe, std::string unit = "", std::string container = "", std::string own = "") {
  ProcessFacts facts;
  facts.executable_path = std::move(exe);
  facts.comm = "comm";
  facts.own_service_name = std::move(own);
  facts.cgroup.systemd_unit = std::move(unit);
  facts.cgroup.container_id = std::move(container);
  return facts;
}

TEST(ServiceNameTest, RulesThenOwnEnvironmentThenDefaultThenExecutable) {
  ResourceSettings settings;
  settings.service_name_rules = {
      {ServiceNameRule::Match::kExecutable, "/usr/sbin/nginx", "web"},
      {ServiceNameRule::Match::kSystemdUnit, "postgresql@*.service", "db"},
      {ServiceNameRule::Match::kContainerId, "6a9d*", "in-container"},
      {ServiceNameRule::Match::kExecutable, "python3*", "py"},
  };
  EXPECT_EQ(service_name_for(settings, process("/usr/sbin/nginx")), "web");
  EXPECT_EQ(service_name_for(settings, process("/usr/lib/postgresql/15/bin/postgres", "postgresql@15-main.service")),
            "db");
  EXPECT_EQ(service_name_for(settings, process("/app/server", "", kId)), "in-container");
  // A pattern without '/' matches the executable's file name.
  EXPECT_EQ(service_name_for(settings, process("/usr/bin/python3.11")), "py");
  // No rule: the process's own OTEL_SERVICE_NAME, then the default, then its executable.
  EXPECT_EQ(service_name_for(settings, process("/srv/api", "", "", "api-from-env")), "api-from-env");
  settings.default_service_name = "fleet-default";
  EXPECT_EQ(service_name_for(settings, process("/srv/api")), "fleet-default");
  settings.default_service_name.clear();
  EXPECT_EQ(service_name_for(settings, process("/srv/api")), "api");
  // A kernel thread has no executable: its comm.
  EXPECT_EQ(service_name_for(settings, process("")), "comm");
}

TEST(ProcessResourceTest, AttributesInOrderWithoutEmptyOnesAndSettingsNeverReplaceFacts) {
  ResourceSettings settings;
  settings.attributes = {{"deployment.environment", "prod"}, {"host.name", "not-this"}};
  // A deleted executable's /proc/PID/exe target ends in " (deleted)".
  ProcessFacts facts = read_process_facts(getpid(), "comm", "/usr/sbin/nginx (deleted)");
  facts.own_service_name.clear();
  facts.cgroup = CgroupFacts{kId, "docker", kUid, "nginx.service"};
  ResourceAttributes host = {{"host.name", "box"}, {"host.id", "abc"}};
  ResourceAttributes expected = {{"service.name", "nginx"},
                                 {"process.executable.name", "nginx"},
                                 {"process.executable.path", "/usr/sbin/nginx"},
                                 {"container.id", kId},
                                 {"container.runtime", "docker"},
                                 {"k8s.pod.uid", kUid},
                                 {"systemd.unit", "nginx.service"},
                                 {"host.name", "box"},
                                 {"host.id", "abc"},
                                 {"deployment.environment", "prod"}};
  EXPECT_EQ(process_resource(settings, facts, host), expected);
}

TEST(ProcessResourceTest, ThisProcessIsReadFromProc) {
  ProcessFacts facts = read_process_facts(getpid(), "tests", "/bin/tests");
  EXPECT_EQ(facts.executable_path, "/bin/tests");
  // /proc/self/environ is the initial environment: OTEL_SERVICE_NAME as the test runner gave it.
  const char* own = std::getenv("OTEL_SERVICE_NAME");
  EXPECT_EQ(facts.own_service_name, own ? own : "");
  ResourceAttributes host = host_attributes();
  ASSERT_FALSE(host.empty());
  EXPECT_EQ(host[0].first, "host.name");
}

TEST(EnvironmentResourceTest, OtelVariablesAsOpenTelemetrySdksReadThem) {
  std::string error;
  auto env = parse_environment_resource("deployment.environment=prod, k8s.cluster.name=eu%2C1 ,service.name=a",
                                        nullptr, &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(env.service_name, "a");
  EXPECT_EQ(env.attributes,
            (ResourceAttributes{{"deployment.environment", "prod"}, {"k8s.cluster.name", "eu,1"}}));
  // OTEL_SERVICE_NAME wins over service.name among the attributes.
  EXPECT_EQ(parse_environment_resource("service.name=a", "b", &error).service_name, "b");
  // A malformed entry: the variable is ignored, with a message naming it.
  auto bad = parse_environment_resource("ok=1,broken", "svc", &error);
  EXPECT_TRUE(bad.attributes.empty());
  EXPECT_EQ(bad.service_name, "svc");
  EXPECT_NE(error.find("OTEL_RESOURCE_ATTRIBUTES: 'broken' is not KEY=VALUE"), std::string::npos) << error;

  ResourceSettings settings;
  settings.default_service_name = "from-config";
  settings.attributes = {{"deployment.environment", "staging"}};
  ResourceSettings merged = with_environment(settings, env);
  EXPECT_EQ(merged.default_service_name, "from-config");  // the config wins
  EXPECT_EQ(merged.attributes,
            (ResourceAttributes{{"deployment.environment", "staging"}, {"k8s.cluster.name", "eu,1"}}));
}

TEST(ResourceConfigTest, ParsesServiceNameAttributesAndRules) {
  const char* yaml = R"(
resource:
  service_name: checkout
  attributes:
    deployment.environment: prod
  service_names:
    - executable: /usr/sbin/nginx
      service_name: web
    - systemd_unit: "postgresql@*.service"
      service_name: db
    - container_id: "6a9d*"
      service_name: c
)";
  auto config = parse_config(yaml, "omniprof.yaml", 19);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->resource.default_service_name, "checkout");
  EXPECT_EQ(config->resource.attributes, (ResourceAttributes{{"deployment.environment", "prod"}}));
  std::vector<ServiceNameRule> rules = {{ServiceNameRule::Match::kExecutable, "/usr/sbin/nginx", "web"},
                                        {ServiceNameRule::Match::kSystemdUnit, "postgresql@*.service", "db"},
                                        {ServiceNameRule::Match::kContainerId, "6a9d*", "c"}};
  EXPECT_EQ(config->resource.service_name_rules, rules);
}

TEST(ResourceConfigTest, BadRulesAreErrorsNamingFileLineAndKey) {
  auto two_matchers = parse_config("resource:\n  service_names:\n    - executable: a\n      systemd_unit: b\n"
                                   "      service_name: c\n",
                                   "omniprof.yaml", 19);
  ASSERT_FALSE(two_matchers);
  EXPECT_NE(two_matchers.error().message.find("omniprof.yaml:3: resource.service_names[0]"), std::string::npos)
      << two_matchers.error().message;
  auto no_name = parse_config("resource:\n  service_names:\n    - executable: a\n", "omniprof.yaml", 19);
  ASSERT_FALSE(no_name);
  EXPECT_NE(no_name.error().message.find("service_name"), std::string::npos) << no_name.error().message;
  auto unknown = parse_config("resource:\n  service_names:\n    - image: a\n      service_name: b\n", "f.yaml", 19);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("f.yaml:3: resource.service_names[0].image: unknown key"), std::string::npos)
      << unknown.error().message;
  auto not_text = parse_config("resource:\n  attributes:\n    team: [a]\n", "f.yaml", 19);
  ASSERT_FALSE(not_text);
  EXPECT_NE(not_text.error().message.find("f.yaml:3: resource.attributes.team"), std::string::npos)
      << not_text.error().message;
}

TEST(ResourceConfigTest, TheEnvironmentFillsWhatTheFilesLeaveAndConfigSaysWhere) {
  ::setenv("OTEL_SERVICE_NAME", "env-service", 1);
  ::setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=dev,team=core", 1);
  LoadedConfig loaded;
  loaded.config = default_config(19);
  ASSERT_TRUE(apply_config_document("resource:\n  attributes:\n    deployment.environment: prod\n", "a.yaml",
                                    loaded.config, &loaded.origins));
  apply_resource_environment(loaded);
  ::unsetenv("OTEL_SERVICE_NAME");
  ::unsetenv("OTEL_RESOURCE_ATTRIBUTES");
  EXPECT_EQ(loaded.config.resource.default_service_name, "env-service");
  EXPECT_EQ(loaded.config.resource.attributes,
            (ResourceAttributes{{"deployment.environment", "prod"}, {"team", "core"}}));
  const std::string text = describe_config(loaded);
  EXPECT_NE(text.find("resource.service_name: \"env-service\""), std::string::npos) << text;
  EXPECT_NE(text.find("# environment OTEL_SERVICE_NAME"), std::string::npos) << text;
  EXPECT_NE(text.find("resource.attributes.deployment.environment: \"prod\""), std::string::npos) << text;
  EXPECT_NE(text.find("# a.yaml:3"), std::string::npos) << text;
  EXPECT_NE(text.find("resource.attributes.team: \"core\""), std::string::npos) << text;
  EXPECT_NE(text.find("# environment OTEL_RESOURCE_ATTRIBUTES"), std::string::npos) << text;
}

TEST(ResourceLabelsTest, EveryAttributeIsAStringLabelOfEachSampleOfTheProcess) {
  ProfileBuilder builder(10'000'000, 0);
  uint64_t location = builder.add_location(0, 0x1000, {});
  auto resource = std::make_shared<const ResourceAttributes>(
      ResourceAttributes{{"service.name", "web"}, {"container.id", kId}, {"empty", ""}});
  SampleLabels labels;
  labels.pid = 7;
  labels.resource = resource;
  builder.add_sample({location}, 2, labels);
  // Another snapshot of the same process (a refresh) with the same attributes: one sample.
  labels.resource = std::make_shared<const ResourceAttributes>(*resource);
  builder.add_sample({location}, 3, labels);
  auto profile = builder.build();
  ASSERT_EQ(profile.sample_size(), 1);
  EXPECT_EQ(profile.sample(0).value(0), 5);
  std::map<std::string, std::string> strings;
  for (const auto& label : profile.sample(0).label()) {
    if (label.str() != 0) strings[profile.string_table(label.key())] = profile.string_table(label.str());
  }
  EXPECT_EQ(strings, (std::map<std::string, std::string>{{"service.name", "web"}, {"container.id", kId}}));
}

}  // namespace
}  // namespace omniprof
