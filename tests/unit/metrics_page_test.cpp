// The /metrics page: names as Prometheus accepts them, escaping, `_total` on
// counters, one HELP/TYPE per family, integers written exactly; the server on
// a loopback port (content type, 404, a port already taken, bad
// metrics.listen strings); the agent's own figures from /proc/self; and a
// realistic page that promtool (Debian package prometheus) accepts without a
// lint problem.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "metrics/metrics_page.h"
#include "temp_tree.h"

namespace omniprof {
namespace {

using Kind = Metric::Kind;
using testing_support::TempTree;

Metric counter(std::string name, double value, std::vector<std::pair<std::string, std::string>> labels = {}) {
  return Metric{std::move(name), "help", Kind::kCounter, value, std::move(labels)};
}

Metric gauge(std::string name, double value, std::vector<std::pair<std::string, std::string>> labels = {}) {
  return Metric{std::move(name), "help", Kind::kGauge, value, std::move(labels)};
}

// The sample line of a one-metric page (its third line).
std::string sample_line(const Metric& m) {
  std::string page = format_prometheus({m});
  size_t start = 0;
  for (int i = 0; i < 2; i++) start = page.find('\n', start) + 1;
  return page.substr(start, page.find('\n', start) - start);
}

TEST(PrometheusName, AgentCounterNames) {
  EXPECT_EQ(prometheus_name("host.samples_of_unknown_processes"), "omniprof_host_samples_of_unknown_processes");
  EXPECT_EQ(prometheus_name("native.no_mapping"), "omniprof_native_no_mapping");
  EXPECT_EQ(prometheus_name("export.dropped_queue_full"), "omniprof_export_dropped_queue_full");
  EXPECT_EQ(prometheus_name("python.frames_read"), "omniprof_python_frames_read");
}

TEST(PrometheusName, OtherCharactersAndRunsBecomeOneUnderscore) {
  EXPECT_EQ(prometheus_name("a..b"), "omniprof_a_b");
  EXPECT_EQ(prometheus_name("a-b c/d"), "omniprof_a_b_c_d");
  EXPECT_EQ(prometheus_name("a__b._c"), "omniprof_a_b_c");
  EXPECT_EQ(prometheus_name(".leading"), "omniprof_leading");
  EXPECT_EQ(prometheus_name("trailing."), "omniprof_trailing");
  EXPECT_EQ(prometheus_name("ruby.gc\xc3\xa9"), "omniprof_ruby_gc");  // UTF-8 bytes are not name characters
  EXPECT_EQ(prometheus_name("Mixed.Case9"), "omniprof_Mixed_Case9");
}

TEST(FormatPrometheus, EmptyIsEmpty) { EXPECT_EQ(format_prometheus({}), ""); }

TEST(FormatPrometheus, WholePage) {
  std::vector<Metric> metrics = {
      Metric{"omniprof_native_no_mapping", "Native frames without a mapping.", Kind::kCounter, 3, {}},
      Metric{"omniprof_processes", "Processes profiled now.", Kind::kGauge, 12, {{"language", "python"}}},
  };
  EXPECT_EQ(format_prometheus(metrics),
            "# HELP omniprof_native_no_mapping_total Native frames without a mapping.\n"
            "# TYPE omniprof_native_no_mapping_total counter\n"
            "omniprof_native_no_mapping_total 3\n"
            "# HELP omniprof_processes Processes profiled now.\n"
            "# TYPE omniprof_processes gauge\n"
            "omniprof_processes{language=\"python\"} 12\n");
}

TEST(FormatPrometheus, CountersEndInTotalOnce) {
  std::string page = format_prometheus({counter("a", 1), counter("b_total", 2), gauge("c", 3), counter("d_", 4),
                                        counter("e_totals", 5)});
  EXPECT_NE(page.find("# TYPE a_total counter\na_total 1\n"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE b_total counter\nb_total 2\n"), std::string::npos) << page;
  EXPECT_EQ(page.find("b_total_total"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE c gauge\nc 3\n"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE d_total counter\nd_total 4\n"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE e_totals_total counter\n"), std::string::npos) << page;
}

TEST(FormatPrometheus, GroupsFamiliesInFirstSeenOrder) {
  std::vector<Metric> metrics = {
      Metric{"b", "B's help", Kind::kCounter, 1, {{"k", "1"}}},
      Metric{"a", "A's help", Kind::kGauge, 2, {}},
      Metric{"b", "ignored help", Kind::kCounter, 3, {{"k", "2"}}},
      Metric{"b_total", "ignored too", Kind::kCounter, 4, {{"k", "3"}}},  // the same family once suffixed
  };
  EXPECT_EQ(format_prometheus(metrics),
            "# HELP b_total B's help\n"
            "# TYPE b_total counter\n"
            "b_total{k=\"1\"} 1\n"
            "b_total{k=\"2\"} 3\n"
            "b_total{k=\"3\"} 4\n"
            "# HELP a A's help\n"
            "# TYPE a gauge\n"
            "a 2\n");
}

TEST(FormatPrometheus, EscapesHelp) {
  Metric m{"m", "back\\slash\nnew line \"quotes\" stay", Kind::kGauge, 1, {}};
  EXPECT_EQ(format_prometheus({m}),
            "# HELP m back\\\\slash\\nnew line \"quotes\" stay\n"
            "# TYPE m gauge\n"
            "m 1\n");
}

TEST(FormatPrometheus, NoHelpTextWritesTheNameAlone) {
  Metric m{"m", "", Kind::kGauge, 1, {}};
  EXPECT_EQ(format_prometheus({m}), "# HELP m\n# TYPE m gauge\nm 1\n");
}

TEST(FormatPrometheus, EscapesLabelValues) {
  EXPECT_EQ(sample_line(gauge("m", 1, {{"path", "C:\\dir\\\"x\"\nnext"}})),
            "m{path=\"C:\\\\dir\\\\\\\"x\\\"\\nnext\"} 1");
  EXPECT_EQ(sample_line(gauge("m", 1, {{"a", ""}, {"b", "{},= "}})), "m{a=\"\",b=\"{},= \"} 1");
}

TEST(FormatPrometheus, SanitizesLabelNamesWithoutPrefix) {
  EXPECT_EQ(sample_line(gauge("m", 1, {{"bad-name", "x"}, {"0lead", "y"}, {"__reserved", "z"}, {"ok_1", "w"}})),
            "m{bad_name=\"x\",_0lead=\"y\",_reserved=\"z\",ok_1=\"w\"} 1");
}

TEST(FormatPrometheus, SanitizesMetricNames) {
  std::string page = format_prometheus({gauge("omniprof_odd.name-here", 1), gauge("9lives", 2)});
  EXPECT_NE(page.find("\nomniprof_odd_name_here 1\n"), std::string::npos) << page;
  EXPECT_NE(page.find("\n_9lives 2\n"), std::string::npos) << page;
}

TEST(FormatPrometheus, IntegralValuesAreIntegers) {
  EXPECT_EQ(sample_line(gauge("m", 0)), "m 0");
  EXPECT_EQ(sample_line(gauge("m", -0.0)), "m 0");
  EXPECT_EQ(sample_line(gauge("m", 42)), "m 42");
  EXPECT_EQ(sample_line(gauge("m", -3)), "m -3");
  EXPECT_EQ(sample_line(gauge("m", 1e15)), "m 1000000000000000");
  EXPECT_EQ(sample_line(gauge("m", 1e16)), "m 10000000000000000");
  EXPECT_EQ(sample_line(gauge("m", 9007199254740992.0)), "m 9007199254740992");     // 2^53
  EXPECT_EQ(sample_line(gauge("m", -9007199254740992.0)), "m -9007199254740992");
  EXPECT_EQ(sample_line(counter("m", 4294967296.0 * 3)), "m_total 12884901888");
  // Beyond 2^53 a double skips integers, but the one it holds is still written whole.
  EXPECT_EQ(sample_line(gauge("m", 9007199254740993.0)), "m 9007199254740992");
  EXPECT_EQ(sample_line(gauge("m", 9223372036854774784.0)), "m 9223372036854774784");  // largest below 2^63
}

TEST(FormatPrometheus, OtherValues) {
  EXPECT_EQ(sample_line(gauge("m", 0.5)), "m 0.5");
  EXPECT_EQ(sample_line(gauge("m", 0.1)), "m 0.1");  // shortest round-trip form
  EXPECT_EQ(sample_line(gauge("m", -2.25)), "m -2.25");
  EXPECT_EQ(std::stod(sample_line(gauge("m", 1e-5)).substr(2)), 1e-5);
  EXPECT_EQ(std::stod(sample_line(gauge("m", 1e20)).substr(2)), 1e20);  // beyond int64: exponent allowed
  EXPECT_EQ(sample_line(gauge("m", std::numeric_limits<double>::quiet_NaN())), "m NaN");
  EXPECT_EQ(sample_line(gauge("m", std::numeric_limits<double>::infinity())), "m +Inf");
  EXPECT_EQ(sample_line(gauge("m", -std::numeric_limits<double>::infinity())), "m -Inf");
}

// --- process_metrics

const Metric* find_metric(const std::vector<Metric>& metrics, const std::string& name) {
  for (const Metric& m : metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

TEST(ProcessMetrics, ReadsThisProcess) {
  std::vector<Metric> metrics = process_metrics();
  const Metric* rss = find_metric(metrics, "omniprof_agent_resident_bytes");
  const Metric* cpu = find_metric(metrics, "omniprof_agent_cpu_seconds_total");
  ASSERT_NE(rss, nullptr);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(rss->kind, Kind::kGauge);
  EXPECT_EQ(cpu->kind, Kind::kCounter);
  EXPECT_GT(rss->value, 1024 * 1024);  // a gtest binary is well over a MiB resident
  EXPECT_EQ(std::fmod(rss->value, static_cast<double>(sysconf(_SC_PAGESIZE))), 0);
  EXPECT_GE(cpu->value, 0);
  EXPECT_FALSE(rss->help.empty());
  EXPECT_FALSE(cpu->help.empty());
}

TEST(ProcessMetrics, CommandNameWithSpacesAndParentheses) {
  TempTree tree("metrics-proc");
  long ticks = sysconf(_SC_CLK_TCK);
  long page = sysconf(_SC_PAGESIZE);
  tree.file("statm", "1000 250 100 10 0 500 0\n");
  // utime = 3 s and stime = 1.5 s of ticks, after a comm of "a) (b c".
  tree.file("stat", "1234 (a) (b c) S 1 1234 1234 0 -1 4194560 100 0 0 0 " + std::to_string(3 * ticks) + " " +
                        std::to_string(ticks + ticks / 2) + " 0 0 20 0 3 0 100 4096000 250\n");
  std::vector<Metric> metrics = process_metrics(tree.root());
  const Metric* rss = find_metric(metrics, "omniprof_agent_resident_bytes");
  const Metric* cpu = find_metric(metrics, "omniprof_agent_cpu_seconds_total");
  ASSERT_NE(rss, nullptr);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(rss->value, 250.0 * static_cast<double>(page));
  EXPECT_DOUBLE_EQ(cpu->value, static_cast<double>(3 * ticks + ticks + ticks / 2) / static_cast<double>(ticks));
}

TEST(ProcessMetrics, UnreadableFiguresAreLeftOut) {
  EXPECT_TRUE(process_metrics("/nonexistent/omniprof-proc").empty());

  TempTree tree("metrics-proc");
  tree.file("statm", "garbage\n");
  tree.file("stat", "1234 (x) S 1 2\n");  // cut short before utime
  EXPECT_TRUE(process_metrics(tree.root()).empty());

  TempTree only_statm("metrics-proc");
  only_statm.file("statm", "10 5 1 1 0 1 0\n");
  std::vector<Metric> metrics = process_metrics(only_statm.root());
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].name, "omniprof_agent_resident_bytes");
}

// --- MetricsServer

std::vector<Metric> sample_metrics() {
  return {counter("omniprof_native_no_mapping", 7), gauge("omniprof_processes", 2, {{"language", "ruby"}})};
}

std::unique_ptr<MetricsServer> start_or_fail(const std::string& listen,
                                             std::function<std::vector<Metric>()> collect = sample_metrics) {
  auto server = MetricsServer::start(listen, std::move(collect));
  if (!server) {
    ADD_FAILURE() << server.error().message;
    return nullptr;
  }
  return std::move(*server);
}

httplib::Client client_for(int port, const std::string& host = "127.0.0.1") {
  httplib::Client client(host, port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  return client;
}

TEST(MetricsServer, ServesThePage) {
  std::atomic<int> calls{0};
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_other_thread{false};
  auto server = start_or_fail("127.0.0.1:0", [&] {
    calls++;
    on_other_thread = std::this_thread::get_id() != caller;
    return sample_metrics();
  });
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->port(), 0);

  auto client = client_for(server->port());
  for (int i = 0; i < 3; i++) {  // one connection per request: each must be answered
    auto res = client.Get("/metrics");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(res->body, format_prometheus(sample_metrics()));
  }
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(on_other_thread);
}

TEST(MetricsServer, OtherPathsAre404) {
  int calls = 0;
  auto server = start_or_fail("127.0.0.1:0", [&] {
    calls++;
    return sample_metrics();
  });
  ASSERT_NE(server, nullptr);
  auto client = client_for(server->port());
  for (const char* path : {"/other", "/", "/metrics/x", "/metricsx"}) {
    auto res = client.Get(path);
    ASSERT_TRUE(res) << path << ": " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 404) << path;
  }
  EXPECT_EQ(calls, 0);
}

TEST(MetricsServer, CollectThatThrowsIs500) {
  auto server = start_or_fail("127.0.0.1:0", []() -> std::vector<Metric> { throw std::runtime_error("boom"); });
  ASSERT_NE(server, nullptr);
  auto res = client_for(server->port()).Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(res->body, "cannot collect metrics: boom\n");
  EXPECT_FALSE(res->has_header("EXCEPTION_WHAT"));
}

TEST(MetricsServer, PortInUseFailsNamingTheAddress) {
  auto first = start_or_fail("127.0.0.1:0");
  ASSERT_NE(first, nullptr);
  std::string listen = "127.0.0.1:" + std::to_string(first->port());
  auto second = MetricsServer::start(listen, sample_metrics);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().message, "metrics.listen " + listen + ": cannot listen: Address already in use");
  // The first one still answers.
  auto res = client_for(first->port()).Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(MetricsServer, PortFreedAfterDestruction) {
  int port = 0;
  {
    auto server = start_or_fail("127.0.0.1:0");
    ASSERT_NE(server, nullptr);
    port = server->port();
    auto res = client_for(port).Get("/metrics");  // leaves a connection in TIME_WAIT
    ASSERT_TRUE(res);
  }
  auto again = start_or_fail("127.0.0.1:" + std::to_string(port));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->port(), port);
}

TEST(MetricsServer, StartAndStopAtOnce) {
  // The destructor must not hang when the thread has not reached
  // listen_after_bind yet.
  for (int i = 0; i < 50; i++) {
    auto server = start_or_fail("127.0.0.1:0");
    ASSERT_NE(server, nullptr);
  }
}

TEST(MetricsServer, BadListenStrings) {
  for (const std::string listen :
       {"", "127.0.0.1", "127.0.0.1:", ":9464", "127.0.0.1:http", "127.0.0.1:70000", "127.0.0.1:-1",
        "127.0.0.1:94 64", "::1:9464", "[::1]9464", "[::1:9464", "[]:9464"}) {
    auto server = MetricsServer::start(listen, sample_metrics);
    ASSERT_FALSE(server) << "'" << listen << "' was accepted";
    const std::string& message = server.error().message;
    EXPECT_EQ(message.rfind("metrics.listen " + listen + ": ", 0), 0u) << message;
    EXPECT_NE(message.find("expected HOST:PORT"), std::string::npos) << message;
  }
}

TEST(MetricsServer, AddressNotOnThisMachine) {
  // 192.0.2.0/24 is TEST-NET-1, never a local address.
  auto server = MetricsServer::start("192.0.2.1:0", sample_metrics);
  ASSERT_FALSE(server);
  EXPECT_EQ(server.error().message, "metrics.listen 192.0.2.1:0: cannot listen: Cannot assign requested address");
}

TEST(MetricsServer, Ipv6Loopback) {
  auto server = MetricsServer::start("[::1]:0", sample_metrics);
  if (!server) GTEST_SKIP() << "no IPv6 loopback here: " << server.error().message;
  auto res = client_for((*server)->port(), "::1").Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, format_prometheus(sample_metrics()));
}

// --- promtool

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult run(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  int status = ::pclose(pipe);
  if (status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

TEST(MetricsPagePromtool, RealisticPagePassesCheckMetrics) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") {
      FAIL() << "promtool is missing (Debian package prometheus): CI must check the /metrics page with it";
    }
    GTEST_SKIP() << "promtool not found (Debian package prometheus)";
  }

  std::vector<Metric> metrics = {
      Metric{prometheus_name("host.samples_of_unknown_processes"),
             "Samples of processes the agent had not seen start.", Kind::kCounter, 12, {}},
      Metric{prometheus_name("native.no_mapping"), "Native frames whose address is in no mapping.", Kind::kCounter,
             3, {}},
      Metric{prometheus_name("export.dropped_queue_full"), "Profiles dropped because the export queue was full.",
             Kind::kCounter, 0, {{"exporter", "otlp"}}},
      Metric{prometheus_name("export.dropped_queue_full"), "Profiles dropped because the export queue was full.",
             Kind::kCounter, 2, {{"exporter", "pyroscope"}}},
      Metric{prometheus_name("python.frames_read"), "Python frames read from process memory.", Kind::kCounter,
             9007199254740992.0, {{"version", "3.11"}}},
      Metric{"omniprof_processes", "Processes profiled now, by language.\nSecond \\ line.", Kind::kGauge, 4,
             {{"language", "python"}}},
      Metric{"omniprof_processes", "Processes profiled now, by language.\nSecond \\ line.", Kind::kGauge, 1,
             {{"language", "odd \"quoted\"\nvalue\\"}}},
      Metric{"omniprof_export_queue_fill_ratio", "How full the export queue is, from 0 to 1.", Kind::kGauge, 0.25,
             {}},
  };
  for (Metric& m : process_metrics()) metrics.push_back(std::move(m));
  ASSERT_GE(metrics.size(), 10u) << "process_metrics() read nothing";

  TempTree tree("metrics-page");
  std::string path = tree.file("metrics.txt", format_prometheus(metrics));
  CommandResult result = run("promtool check metrics < " + path);
  EXPECT_EQ(result.exit_code, 0) << result.output << "\npage:\n" << format_prometheus(metrics);
  EXPECT_EQ(result.output, "") << "page:\n" << format_prometheus(metrics);
}

}  // namespace
}  // namespace omniprof
