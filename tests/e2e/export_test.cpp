// End-to-end: `omniprof run` sends each round to a backend the test runs on
// 127.0.0.1: OTLP over gRPC (with Pyroscope's ingest beside it) configured
// in YAML, then OTLP over HTTP configured by the standard OTEL_EXPORTER_OTLP_*
// variables. Each OTLP request, decoded, says what the pprof file of the same
// round says (otlp_compare.h: samples, stacks, names, lines, labels), its
// resource is the workload's process, and the Pyroscope upload is a pprof
// `go tool pprof` reads.
#include <sys/utsname.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "../unit/otlp_compare.h"
#include "../unit/otlp_receiver.h"
#include "e2e_support.h"
#include "profile/pprof_reader.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> round_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Every pprof file of `dir` has an OTLP request of the same round (same
// start) that says the same; returns how many rounds were compared.
size_t compare_rounds(const std::string& dir, const std::vector<testing_support::Receiver::Arrival>& arrivals,
                      pid_t workload_pid) {
  size_t compared = 0;
  struct utsname names {};
  uname(&names);
  for (const std::string& file : round_files(dir)) {
    auto pprof = read_pprof_file(file);
    EXPECT_TRUE(pprof) << file << ": " << pprof.error().message;
    if (!pprof || pprof->sample_size() == 0) continue;
    const testing_support::Receiver::Arrival* match = nullptr;
    for (const auto& a : arrivals) {
      if (a.request.resource_profiles_size() > 0 &&
          a.request.resource_profiles(0).scope_profiles(0).profiles(0).time_unix_nano() ==
              static_cast<uint64_t>(pprof->time_nanos())) {
        match = &a;
      }
    }
    EXPECT_NE(match, nullptr) << "no OTLP request for the round of " << file;
    if (!match) continue;
    EXPECT_EQ(otlp_compare::from_otlp(match->request), otlp_compare::from_pprof(*pprof)) << file;
    // The resource is the workload's process.
    std::map<std::string, std::string> resource;
    for (const auto& kv : match->request.resource_profiles(0).resource().attributes()) {
      resource[kv.key()] = kv.value().has_int_value() ? std::to_string(kv.value().int_value()) : kv.value().string_value();
    }
    EXPECT_EQ(resource["process.pid"], std::to_string(workload_pid));
    EXPECT_EQ(resource["service.name"], "chain");
    EXPECT_EQ(resource["process.executable.name"], "chain");
    EXPECT_EQ(resource["host.name"], names.nodename);
    ++compared;
  }
  return compared;
}

TEST(ExportTest, RunSendsEachRoundOverOtlpAndToPyroscope) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  testing_support::Receiver receiver;
  BackgroundProcess workload_process({workload("chain"), "120"});
  const std::string dir = temp_dir("export");

  // gRPC and Pyroscope, from the YAML file.
  const std::string grpc_profiles = dir + "/grpc";
  fs::create_directories(grpc_profiles);
  const std::string config = dir + "/omniprof.yaml";
  std::ofstream(config) << "round_seconds: 2\nsampling:\n  frequency_hz: 99\n"
                        << "pids: [" << workload_process.pid() << "]\n"
                        << "output:\n  directory: " << grpc_profiles << "\n"
                        << "export:\n  otlp:\n    endpoint: " << receiver.grpc_endpoint() << "\n    protocol: grpc\n"
                        << "  pyroscope:\n    url: " << receiver.http_endpoint() << "\n";
  auto ran = run_command({OMNIPROF_BINARY, "run", "--rounds", "2", "--config", config});
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  auto arrivals = receiver.arrivals();
  EXPECT_EQ(compare_rounds(grpc_profiles, arrivals, workload_process.pid()), 2u) << ran.err;
  EXPECT_NE(ran.err.find("export.otlp.rounds_sent="), std::string::npos) << ran.err;

  // Pyroscope: one upload per round for the one service, named as it names
  // applications, its profile one that go tool pprof reads.
  auto uploads = receiver.uploads();
  ASSERT_EQ(uploads.size(), 2u) << ran.err;
  struct utsname names {};
  ASSERT_EQ(uname(&names), 0);
  for (const auto& upload : uploads) {
    EXPECT_EQ(upload.query.at("name"), fmt::format("chain{{host_name={}}}", names.nodename));
    EXPECT_EQ(upload.query.at("format"), "pprof");
    EXPECT_LT(std::stoll(upload.query.at("from")), std::stoll(upload.query.at("until")));
  }
  const std::string uploaded = dir + "/pyroscope.pb.gz";
  std::ofstream(uploaded, std::ios::binary) << uploads[0].profile;
  auto top = run_go_pprof({"-top"}, uploaded);
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("leaf"), std::string::npos) << top.out;

  // HTTP/protobuf, from the environment alone.
  const std::string http_profiles = dir + "/http";
  fs::create_directories(http_profiles);
  const std::string env_config = dir + "/env.yaml";
  std::ofstream(env_config) << "round_seconds: 2\nsampling:\n  frequency_hz: 99\n"
                            << "pids: [" << workload_process.pid() << "]\n"
                            << "output:\n  directory: " << http_profiles << "\n";
  const size_t before = receiver.arrivals().size();
  ran = run_command({"/usr/bin/env", "OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.http_endpoint(),
                     "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
                     OMNIPROF_BINARY, "run", "--rounds", "1", "--config", env_config});
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  arrivals = receiver.arrivals();
  ASSERT_EQ(arrivals.size(), before + 1) << ran.err;
  EXPECT_EQ(arrivals.back().encoding, "gzip");
  EXPECT_EQ(compare_rounds(http_profiles, {arrivals.back()}, workload_process.pid()), 1u) << ran.err;
}

}  // namespace
}  // namespace omniprof::e2e
