// End-to-end: `omniprof run` sends each round to a backend the test runs on
// 127.0.0.1: OTLP over gRPC (with Pyroscope's ingest beside it) configured
// in YAML, then OTLP over HTTP configured by the standard OTEL_EXPORTER_OTLP_*
// variables. Each OTLP request, decoded, says what the pprof file of the same
// round says (otlp_compare.h: samples, stacks, names, lines, labels), its
// resource is the workload's process, and the Pyroscope upload is a pprof
// `go tool pprof` reads.
#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <signal.h>

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

constexpr int64_t kFrequencyHz = 99;

// Each sample says when it was taken: one timestamp per counted sample (the
// same number of values, each 1), within its profile's time range; nearly
// every sample has them; a busy thread's samples come about one period
// apart, as the sampling clock ticks.
void check_sample_times(const otlp_collector::ExportProfilesServiceRequest& request, int64_t period_ns,
                        const std::string& file) {
  int64_t timed = 0, total = 0;
  std::map<int64_t, std::vector<uint64_t>> by_thread;
  const auto& d = request.dictionary();
  for (const auto& rp : request.resource_profiles()) {
    for (const auto& profile : rp.scope_profiles(0).profiles()) {
      // The range and the times are one monotonic clock put on the wall
      // clock with one offset (Agent::finish_round): they agree however the
      // wall clock is stepped. A millisecond to spare.
      const uint64_t from = profile.time_unix_nano() - 1000000;
      const uint64_t until = profile.time_unix_nano() + profile.duration_nano() + 1000000;
      for (const auto& sample : profile.samples()) {
        int64_t count = 0;
        for (int64_t v : sample.values()) count += v;
        total += count;
        if (sample.timestamps_unix_nano_size() == 0) continue;
        EXPECT_EQ(sample.timestamps_unix_nano_size(), sample.values_size()) << file;
        for (int64_t v : sample.values()) EXPECT_EQ(v, 1) << file;
        timed += count;
        int64_t tid = 0;
        for (int32_t a : sample.attribute_indices()) {
          if (d.string_table(d.attribute_table(a).key_strindex()) == "thread.id") tid = d.attribute_table(a).value().int_value();
        }
        for (uint64_t t : sample.timestamps_unix_nano()) {
          EXPECT_GE(t, from) << file;
          EXPECT_LE(t, until) << file;
          by_thread[tid].push_back(t);
        }
      }
    }
  }
  EXPECT_GT(total, 0) << file;
  EXPECT_GE(timed * 100, total * 95) << file << ": " << timed << " of " << total << " samples timed";
  // The busiest thread's gaps: their median about a period (a thread on CPU
  // the whole time is sampled at every tick; preemption on a loaded machine
  // only stretches gaps).
  std::vector<uint64_t>* busiest = nullptr;
  for (auto& [tid, list] : by_thread) {
    if (!busiest || list.size() > busiest->size()) busiest = &list;
  }
  ASSERT_NE(busiest, nullptr) << file;
  ASSERT_GE(busiest->size(), 20u) << file;
  std::sort(busiest->begin(), busiest->end());
  std::vector<int64_t> gaps;
  for (size_t i = 1; i < busiest->size(); ++i) gaps.push_back(static_cast<int64_t>((*busiest)[i] - (*busiest)[i - 1]));
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
  const int64_t median = gaps[gaps.size() / 2];
  EXPECT_GE(median, period_ns / 2) << file;
  EXPECT_LE(median, period_ns * 4) << file;
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
    check_sample_times(match->request, 1000000000 / kFrequencyHz, file);
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
  std::ofstream(config) << "round_seconds: 2\nsampling:\n  frequency_hz: " << kFrequencyHz << "\n"
                        << "pids: [" << workload_process.pid() << "]\n"
                        << "output:\n  directory: " << grpc_profiles << "\n"
                        << "export:\n  otlp:\n    endpoint: " << receiver.grpc_endpoint() << "\n    protocol: grpc\n"
                        << "  pyroscope:\n    url: " << receiver.http_endpoint() << "\n"
                        << "    basic_auth_user: agent\n    basic_auth_password: s3cret\n    tenant_id: team-a\n";
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
    EXPECT_EQ(upload.authorization, "Basic YWdlbnQ6czNjcmV0");  // agent:s3cret
    EXPECT_EQ(upload.tenant, "team-a");
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
  std::ofstream(env_config) << "round_seconds: 2\nsampling:\n  frequency_hz: " << kFrequencyHz << "\n"
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

// A loopback port nothing listens on now (bound, read, closed).
int free_loopback_port() {
  testing_support::SilentServer probe;
  return probe.port();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A process's resident memory in KiB, from /proc/PID/status: what it
// allocated (RssAnon), and its files' pages (RssFile: the binary's and the
// libraries' code, faulted in as code paths first run). -1 where unreadable.
struct Resident {
  int64_t anon_kib = -1;
  int64_t file_kib = -1;
};

Resident resident_kib(pid_t pid) {
  Resident resident;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("RssAnon:", 0) == 0) resident.anon_kib = std::stoll(line.substr(8));
    if (line.rfind("RssFile:", 0) == 0) resident.file_kib = std::stoll(line.substr(8));
  }
  return resident;
}

// Waits for `needle` in the log at `path` while PID lives.
bool wait_for_log(const std::string& path, const std::string& needle, pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (read_file(path).find(needle) != std::string::npos) return true;
    if (kill(pid, 0) != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The last value of COUNTER=N in the log's round lines (0 if none).
uint64_t last_counter(const std::string& log, const std::string& counter) {
  uint64_t value = 0;
  for (size_t at = log.find(" " + counter + "="); at != std::string::npos; at = log.find(" " + counter + "=", at + 1)) {
    value = std::stoull(log.substr(at + counter.size() + 2));
  }
  return value;
}

// The outage: the backend answers UNAVAILABLE for 20 s from the
// agent's first attempt, then OK. No round is lost (the queue holds them
// all), every round that arrives says what its pprof file says, and the
// failed attempts are spaced as the backoff says (1 s doubling up to 30 s,
// jittered 0.5-1.5x). From the first attempt, not from the receiver's
// start: in an emulated guest the agent's start took longer than 20 s and
// met no outage at all (5.10, 2026-12-06). 14 rounds of 2 s put the stop
// several seconds after the outage, so every failed attempt is one of the
// backoff's (a stop cuts a backoff short: tests/unit/otlp_export_test.cpp);
// with 12, a backoff sleep that ran past the 20 s shutdown wait lost every
// queued round (host, 2026-12-07).
TEST(ExportTest, AnOutageOfTwentySecondsLosesNoRound) {
  OMNIPROF_REQUIRE_BPF();
  testing_support::Receiver receiver;
  auto first_attempt = std::make_shared<std::optional<std::chrono::milliseconds>>();
  auto first_attempt_mutex = std::make_shared<std::mutex>();
  receiver.answer = [first_attempt, first_attempt_mutex](std::chrono::milliseconds at) {
    std::lock_guard lock(*first_attempt_mutex);
    if (!*first_attempt) *first_attempt = at;
    testing_support::Receiver::Answer a;
    if (at - **first_attempt < std::chrono::seconds(20)) a.grpc_code = grpc::StatusCode::UNAVAILABLE;
    return a;
  };
  BackgroundProcess workload_process({workload("chain"), "120"});
  const std::string dir = temp_dir("export-outage");
  const std::string profiles = dir + "/profiles", config = dir + "/omniprof.yaml";
  fs::create_directories(profiles);
  constexpr int kRounds = 14;
  std::ofstream(config) << "round_seconds: 2\nsampling:\n  frequency_hz: " << kFrequencyHz << "\n"
                        << "pids: [" << workload_process.pid() << "]\n"
                        << "output:\n  directory: " << profiles << "\n"
                        << "export:\n  queue_rounds: " << kRounds << "\n  shutdown_wait_seconds: 20\n"
                        << "  otlp:\n    endpoint: " << receiver.grpc_endpoint() << "\n    protocol: grpc\n";
  auto ran = run_command({OMNIPROF_BINARY, "run", "--rounds", std::to_string(kRounds), "--config", config});
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  auto arrivals = receiver.arrivals();
  std::vector<testing_support::Receiver::Arrival> delivered;
  std::vector<std::chrono::milliseconds> failed_at;
  for (const auto& a : arrivals) {
    if (a.answered_ok) {
      delivered.push_back(a);
    } else {
      failed_at.push_back(a.at);
    }
  }
  ASSERT_FALSE(failed_at.empty()) << "the agent sent nothing during the outage: " << ran.err;
  const size_t files = round_files(profiles).size();
  EXPECT_EQ(files, static_cast<size_t>(kRounds));
  EXPECT_EQ(compare_rounds(profiles, delivered, workload_process.pid()), files) << ran.err;
  EXPECT_EQ(delivered.size(), files);
  EXPECT_EQ(last_counter(ran.err, "export.otlp.dropped_queue_full"), 0u) << ran.err;
  for (size_t i = 1; i < failed_at.size(); ++i) {
    const double step = std::min(1000.0 * (1 << std::min<size_t>(i - 1, 10)), 30000.0);
    const double gap = static_cast<double>((failed_at[i] - failed_at[i - 1]).count());
    EXPECT_GE(gap, 0.5 * step - 100) << "attempt " << i;
    EXPECT_LE(gap, 1.5 * step + 2000) << "attempt " << i;
  }
  EXPECT_NE(ran.err.find("retrying in"), std::string::npos) << ran.err;
  EXPECT_NE(ran.err.find("delivered after"), std::string::npos) << ran.err;
}

// A backend that accepts connections and never answers: the rounds keep
// being sampled and written as before, the queue stays at its bound and the
// rounds pushed out are counted, the agent's allocated memory does not grow,
// a stop waits no longer than its shutdown wait. /metrics, scraped
// meanwhile, says so in a page promtool accepts.
TEST(ExportTest, ABackendThatNeverAnswersCostsCountedDropsAndNothingElse) {
  OMNIPROF_REQUIRE_BPF();
  testing_support::SilentServer silent;
  ASSERT_TRUE(silent.ok());
  BackgroundProcess workload_process({workload("chain"), "120"});
  const std::string dir = temp_dir("export-silent");
  const std::string profiles = dir + "/profiles", log = dir + "/run.log", config = dir + "/omniprof.yaml";
  fs::create_directories(profiles);
  const int metrics_port = free_loopback_port();
  constexpr int kRounds = 10;
  std::ofstream(config) << "round_seconds: 1\nsampling:\n  frequency_hz: 99\n"
                        << "pids: [" << workload_process.pid() << "]\n"
                        << "output:\n  directory: " << profiles << "\n"
                        << "metrics:\n  listen: 127.0.0.1:" << metrics_port << "\n"
                        << "export:\n  queue_rounds: 2\n  shutdown_wait_seconds: 1\n"
                        << "  otlp:\n    endpoint: http://127.0.0.1:" << silent.port()
                        << "\n    protocol: http/protobuf\n    timeout_seconds: 1\n";
  BackgroundProcess agent({"/bin/sh", "-c", "exec \"$0\" run --rounds \"$1\" --config \"$2\" >\"$3\" 2>&1", OMNIPROF_BINARY,
                           std::to_string(kRounds), config, log},
                          BackgroundProcess::Role::kJudge);
  ASSERT_TRUE(wait_for_log(log, "round 3:", agent.pid(), std::chrono::seconds(120))) << read_file(log);
  const Resident rss_early = resident_kib(agent.pid());
  const double workload_cpu_early = cpu_seconds(workload_process.pid());

  // /metrics while the backend is down.
  httplib::Client client("127.0.0.1", metrics_port);
  client.set_read_timeout(10, 0);
  auto page = client.Get("/metrics");
  ASSERT_TRUE(page) << "GET /metrics on 127.0.0.1:" << metrics_port << ": " << httplib::to_string(page.error());
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("omniprof_export_otlp_dropped_queue_full_total"), std::string::npos) << page->body;
  EXPECT_NE(page->body.find("omniprof_agent_resident_bytes"), std::string::npos) << page->body;
  EXPECT_NE(page->body.find("omniprof_host_rounds_total"), std::string::npos) << page->body;
  const std::string page_file = dir + "/metrics.txt";
  std::ofstream(page_file) << page->body;
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    auto checked = run_command({"/bin/sh", "-c", "promtool check metrics < \"$0\"", page_file});
    EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err << page->body;
    EXPECT_EQ(checked.out + checked.err, "") << page->body;
  } else if (in_ci()) {
    ADD_FAILURE() << "promtool is missing (Debian package prometheus)";
  }

  ASSERT_TRUE(wait_for_log(log, fmt::format("round {}:", kRounds - 1), agent.pid(), std::chrono::seconds(120)))
      << read_file(log);
  const Resident rss_late = resident_kib(agent.pid());
  const double workload_cpu_late = cpu_seconds(workload_process.pid());
  const auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ(agent.wait(), 0) << read_file(log);
  const double stop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping).count();
  const std::string text = read_file(log);
  std::cerr << "agent RSS (allocated + files') " << rss_early.anon_kib << " + " << rss_early.file_kib
            << " KiB at round 3, " << rss_late.anon_kib << " + " << rss_late.file_kib << " KiB at round " << kRounds - 1
            << "; the last round and the stop took " << stop_seconds << " s\n";

  // Sampling as if nothing were wrong: every round written and sampled,
  // and rounds 4 to 9 hold what the workload's own CPU clock says it ran
  // between the test seeing rounds 3 and 9 end, at 99 Hz. Judged against
  // its CPU clock rather than a second of a CPU per round: on two emulated
  // CPUs, promtool and the agent run beside it (the 6.1-rt guest on
  // 2026-12-06: 37 samples in a round, against a bound of 40 then).
  auto files = round_files(profiles);
  ASSERT_EQ(files.size(), static_cast<size_t>(kRounds)) << text;
  int64_t samples_of_rounds_4_to_9 = 0;
  for (size_t i = 1; i + 1 < files.size(); ++i) {
    auto pprof = read_pprof_file(files[i]);
    ASSERT_TRUE(pprof) << pprof.error().message;
    int64_t samples = 0;
    for (const auto& sample : pprof->sample()) samples += sample.value(0);
    EXPECT_GT(samples, 0) << files[i] << " (round " << i + 1 << ")";
    if (i >= 3) samples_of_rounds_4_to_9 += samples;
  }
  ASSERT_GE(workload_cpu_early, 0) << "no /proc/" << workload_process.pid() << "/stat";
  const double expected = (workload_cpu_late - workload_cpu_early) * 99;
  std::cerr << "rounds 4 to 9: " << samples_of_rounds_4_to_9 << " samples of the workload; its CPU clock at 99 Hz: "
            << expected << "\n";
  EXPECT_GE(samples_of_rounds_4_to_9, 0.75 * expected)
      << samples_of_rounds_4_to_9 << " samples in rounds 4 to 9, against " << expected
      << " by the workload's CPU clock at 99 Hz";
  EXPECT_GE(expected, 99) << "the workload ran " << workload_cpu_late - workload_cpu_early
                          << " s of CPU in six rounds: too little to judge";
  // The queue held two rounds; the others were pushed out and counted, the
  // two left at the stop too.
  EXPECT_GE(last_counter(text, "export.otlp.dropped_queue_full"), static_cast<uint64_t>(kRounds - 2 - 3)) << text;
  EXPECT_EQ(last_counter(text, "export.otlp.rounds_sent"), 0u) << text;
  EXPECT_LE(last_counter(text, "export.otlp.queue_depth"), 2u) << text;
  EXPECT_NE(text.find("because the agent stopped before they were sent"), std::string::npos) << text;
  // Rounds held or leaked would be allocated memory; the files' pages are
  // code first run, bounded by the files. Both are printed: in the 6.1
  // guest on 2026-12-06 the total (VmRSS, judged then) grew 5.4 MB once
  // (its split not known), then 2.3 MB (allocated 1.9 MB), then 0; on the
  // host, 12 KB.
  ASSERT_GE(rss_early.anon_kib, 0) << "no RssAnon in /proc/" << agent.pid() << "/status";
  EXPECT_LT(rss_late.anon_kib - rss_early.anon_kib, 4096)
      << "the agent's allocated memory grew by " << rss_late.anon_kib - rss_early.anon_kib << " KiB";
  // The stop: the last round (1 s), the shutdown wait (1 s), one send's
  // timeout (1 s), and the agent's own teardown.
  EXPECT_LT(stop_seconds, 15.0);
}

}  // namespace
}  // namespace omniprof::e2e
