// End-to-end: who each sample belongs to. Workloads placed by the test in
// cgroups named as systemd names a service's and Docker (systemd driver) a
// container's carry their unit, container id and service.name as labels of
// their samples (the container's name and its compose service's label read
// from a Docker state file the test writes), read back with `go tool pprof -traces` and `-tagfocus`.
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "e2e_support.h"
#include "interpreter_support.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

// A cgroup v2 hierarchy to place processes in: the machine's own mount, or
// one this test mounts (the kernel matrix's guests mount none) and unmounts.
class Cgroup2Root {
 public:
  Cgroup2Root() {
    std::ifstream mounts("/proc/self/mounts");
    for (std::string device, point, type, rest; mounts >> device >> point >> type && std::getline(mounts, rest);) {
      if (type == "cgroup2") {
        root_ = point;
        return;
      }
    }
    std::string dir = temp_dir("cgroup2");
    if (mount("none", dir.c_str(), "cgroup2", 0, nullptr) == 0) {
      root_ = dir;
      mounted_ = true;
    } else {
      error_ = std::string("mount -t cgroup2: ") + std::strerror(errno);
    }
  }
  ~Cgroup2Root() {
    if (mounted_) umount(root_.c_str());
  }
  const std::string& root() const { return root_; }
  const std::string& error() const { return error_; }

 private:
  std::string root_, error_;
  bool mounted_ = false;
};

// A cgroup made under the root for one test and removed after (once the
// processes in it have exited).
class TestCgroup {
 public:
  TestCgroup(const std::string& root, const std::string& relative) : path_(root + "/" + relative) {
    std::error_code ec;
    fs::create_directories(path_, ec);
    ok_ = !ec;
  }
  ~TestCgroup() {
    // Innermost first; a cgroup whose process has not been reaped yet is busy.
    for (int attempt = 0; attempt < 50 && ::rmdir(path_.c_str()) != 0 && errno == EBUSY; ++attempt) {
      usleep(100 * 1000);
    }
    ::rmdir(fs::path(path_).parent_path().c_str());
  }
  bool ok() const { return ok_; }
  // Moves PID in; false with errno's text in `error` if the kernel refuses.
  bool add(pid_t pid, std::string* error) const {
    std::ofstream procs(path_ + "/cgroup.procs");
    procs << pid << std::flush;
    if (!procs) *error = "cannot write " + path_ + "/cgroup.procs: " + std::strerror(errno);
    return static_cast<bool>(procs);
  }

 private:
  std::string path_;
  bool ok_ = false;
};

std::set<std::string> values_of(const std::vector<PprofTrace>& traces, const std::string& key) {
  std::set<std::string> values;
  for (const auto& t : traces) {
    auto it = t.labels.find(key);
    values.insert(it == t.labels.end() ? "" : it->second);
  }
  return values;
}

TEST(ResourceAttributesTest, SamplesCarryTheirSystemdUnitContainerAndServiceName) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  Cgroup2Root cgroups;
  ASSERT_FALSE(cgroups.root().empty()) << cgroups.error();
  const std::string unit = "omniprof-e2e-" + std::to_string(getpid()) + ".service";
  const std::string container = std::string(56, 'e') + "0a1b2c3d";  // 64 hex digits, a Docker id's form
  TestCgroup unit_cgroup(cgroups.root(), "omniprof-e2e.slice/" + unit);
  TestCgroup container_cgroup(cgroups.root(), "omniprof-e2e-docker.slice/docker-" + container + ".scope");
  ASSERT_TRUE(unit_cgroup.ok() && container_cgroup.ok()) << "cannot make cgroups under " << cgroups.root();

  // One workload in the unit (named by a config rule), one in the
  // container with its own OTEL_SERVICE_NAME, as an instrumented service
  // would have.
  BackgroundProcess in_unit({workload("chain"), "120"});
  BackgroundProcess in_container({"/usr/bin/env", "OTEL_SERVICE_NAME=checkout-from-env", workload("chain"), "120"});
  std::string error;
  ASSERT_TRUE(unit_cgroup.add(in_unit.pid(), &error)) << error;
  ASSERT_TRUE(container_cgroup.add(in_container.pid(), &error)) << error;
  // env has exec'd the workload once its /proc/PID/exe is the workload.
  const fs::path chain = fs::canonical(workload("chain"));
  auto exe_of = [](pid_t pid) {
    std::error_code ec;
    return fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  };
  for (int i = 0; i < 250 && exe_of(in_container.pid()) != chain; ++i) usleep(20 * 1000);
  ASSERT_EQ(exe_of(in_container.pid()), chain) << "env did not exec the workload";

  const std::string dir = temp_dir("resource");
  const std::string config = dir + "/omniprof.yaml", profile = dir + "/profile.pb.gz";
  std::ofstream(config) << "resource:\n  service_names:\n    - systemd_unit: \"omniprof-e2e-*.service\"\n"
                        << "      service_name: unit-rule-service\n"
                        << "    - container_label: com.docker.compose.service\n";
  // The container's runtime state, where Docker keeps it, under a root of the
  // test's own (the agent reads OMNIPROF_CONTAINER_STATE_ROOT instead of /).
  const std::string state_root = dir + "/state";
  fs::create_directories(state_root + "/var/lib/docker/containers/" + container);
  std::ofstream(state_root + "/var/lib/docker/containers/" + container + "/config.v2.json")
      << R"({"State":{"Running":true},"ID":")" << container
      << R"(","Config":{"Labels":{"com.docker.compose.project":"shop","com.docker.compose.service":"checkout-compose"}},)"
      << R"("Name":"/shop-checkout-1"})";
  auto recorded = run_command({"/usr/bin/env", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=e2e",
                               "OMNIPROF_CONTAINER_STATE_ROOT=" + state_root, OMNIPROF_BINARY,
                               "record", "-d", "3", "--config", config, "-p", std::to_string(in_unit.pid()), "-p",
                               std::to_string(in_container.pid()), "-o", profile});
  ASSERT_EQ(recorded.exit_code, 0) << recorded.out << recorded.err;

  auto traces = read_traces_as_user(profile, &error);
  ASSERT_FALSE(traces.empty()) << error;
  auto unit_traces = traces_of_pid(traces, in_unit.pid());
  auto container_traces = traces_of_pid(traces, in_container.pid());
  ASSERT_FALSE(unit_traces.empty()) << "no samples of the workload in " << unit;
  ASSERT_FALSE(container_traces.empty()) << "no samples of the workload in the container";

  struct utsname names {};
  ASSERT_EQ(uname(&names), 0);
  using Values = std::set<std::string>;
  // Every sample of each process carries the same attributes.
  EXPECT_EQ(values_of(unit_traces, "service.name"), Values{"unit-rule-service"});
  EXPECT_EQ(values_of(unit_traces, "systemd.unit"), Values{unit});
  EXPECT_EQ(values_of(unit_traces, "container.id"), Values{""});
  EXPECT_EQ(values_of(unit_traces, "process.executable.name"), Values{"chain"});
  EXPECT_EQ(values_of(unit_traces, "process.executable.path"), Values{chain.string()});
  // The label rule wins over the process's own OTEL_SERVICE_NAME.
  EXPECT_EQ(values_of(container_traces, "service.name"), Values{"checkout-compose"});
  EXPECT_EQ(values_of(container_traces, "container.name"), Values{"shop-checkout-1"});
  EXPECT_EQ(values_of(unit_traces, "container.name"), Values{""});
  EXPECT_EQ(values_of(container_traces, "container.id"), Values{container});
  EXPECT_EQ(values_of(container_traces, "container.runtime"), Values{"docker"});
  for (const auto* of : {&unit_traces, &container_traces}) {
    EXPECT_EQ(values_of(*of, "host.name"), Values{names.nodename});
    EXPECT_EQ(values_of(*of, "deployment.environment"), Values{"e2e"});
  }

  // What a user types to see one service: pprof's -tagfocus on the label.
  auto focused = read_traces_as_user(profile, &error, {"-tagfocus=service.name=checkout-compose"});
  ASSERT_FALSE(focused.empty()) << error;
  EXPECT_EQ(values_of(focused, "pid"), Values{std::to_string(in_container.pid())});
}

}  // namespace
}  // namespace omniprof::e2e
