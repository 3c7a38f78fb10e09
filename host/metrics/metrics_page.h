// The agent's /metrics page: its counters and gauges in the Prometheus text
// exposition format (version 0.0.4), served over HTTP by MetricsServer on the
// address of metrics.listen.
//
// Threading: prometheus_name, format_prometheus and process_metrics are pure
// (or read only /proc) and may be called from any thread. MetricsServer runs
// one thread of its own, which accepts connections and answers them one at a
// time; it calls the caller's `collect` on that thread, once per scrape, so
// `collect` must be thread-safe with respect to whatever it reads (atomics, or
// a snapshot taken under the owner's lock).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "omniprof/support/result.h"

namespace omniprof::network {
class PageServer;
}  // namespace omniprof::network

namespace omniprof {

struct Metric {
  enum class Kind { kCounter, kGauge };

  std::string name;  // a Prometheus name (see prometheus_name); sanitized again when written
  std::string help;
  Kind kind = Kind::kGauge;
  double value = 0;
  std::vector<std::pair<std::string, std::string>> labels;  // name, value; in this order on the page
};

// An agent counter name (`native.no_mapping`) as a Prometheus metric name
// (`omniprof_native_no_mapping`): prefixed with `omniprof_`, every character
// outside [a-zA-Z0-9_] made `_`, runs of `_` collapsed to one, trailing `_`
// removed. Counters get their `_total` from format_prometheus.
std::string prometheus_name(std::string_view stat_name);

// The page: per metric name (first-seen order), one `# HELP`, one `# TYPE`,
// then every sample of that name. The first metric of a name gives its help
// and kind. Counter names get `_total` appended unless they end with it.
// Names and label names are sanitized to [a-zA-Z0-9_] (never starting with a
// digit or `__`); help and label values are escaped. Integral values (below
// 2^63) are written as integers, without exponent: exact up to 2^53; others in
// their shortest round-trip form; NaN and infinities as Prometheus spells them.
// The caller keeps label sets unique within a name.
std::string format_prometheus(const std::vector<Metric>& metrics);

// The agent's own resource use, read from `proc_dir` (/proc/self):
//   omniprof_agent_resident_bytes     gauge, resident set (statm)
//   omniprof_agent_cpu_seconds_total  counter, user + system CPU time (stat)
// A figure that cannot be read is left out (the page still serves the rest).
std::vector<Metric> process_metrics(const std::string& proc_dir = "/proc/self");

// Serves GET /metrics (and HEAD) with format_prometheus(collect()); any other
// path is a 404. Served by the network module (network/transport.h, loaded
// here the first time), on a thread of its own, one connection at a time
// without keep-alive: a scraper (or a client that stalls, for at most a few
// seconds of timeout) never costs the agent more than one thread and one
// socket. Note: starting it sets SIGPIPE to SIG_IGN for the whole process
// (httplib writes without MSG_NOSIGNAL).
class MetricsServer {
 public:
  // Binds `listen`, "HOST:PORT" ("127.0.0.1:9464", "[::1]:9464", "0.0.0.0:9464";
  // port 0 picks a free one), and starts serving. A host name binds the first
  // of its addresses that can be bound. "[::]" also accepts IPv4 (httplib
  // clears IPV6_V6ONLY). Fails, naming `listen` and the reason, on a malformed
  // string, a host that does not resolve, an address that cannot be bound
  // (in use, not local, privileged port), or a network module that cannot be
  // loaded.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& listen,
                                                      std::function<std::vector<Metric>()> collect);

  // Stops accepting, finishes the request being answered (bounded by the
  // read/write timeouts) and joins the thread.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the one picked, when `listen` asked for port 0).
  int port() const;

 private:
  explicit MetricsServer(std::unique_ptr<network::PageServer> server);

  std::unique_ptr<network::PageServer> server_;
};

}  // namespace omniprof
