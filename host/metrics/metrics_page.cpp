#include "metrics/metrics_page.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "network/transport.h"

namespace omniprof {

namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// [a-zA-Z0-9_] only, one `_` for every run of anything else (or of `_`), no
// trailing `_`. Collapsing also keeps names clear of `__`, which Prometheus
// reserves for its own labels.
std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    char m = name_char(c) ? c : '_';
    if (m == '_' && !out.empty() && out.back() == '_') continue;
    out.push_back(m);
  }
  while (out.size() > 1 && out.back() == '_') out.pop_back();
  return out;
}

// A metric or label name as Prometheus accepts it: not empty, not starting
// with a digit.
std::string valid_name(std::string_view s) {
  std::string out = sanitize(s);
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(out.begin(), '_');
  return out;
}

std::string escape_help(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string escape_label_value(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Counters are uint64 in the agent: written as integers they read as what
// they are (exact up to 2^53, where a double stops holding every integer),
// where fmt's shortest form would turn 1e16 into "1e+16". Any integral double
// below 2^63 is written whole: still that double's exact value.
std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  constexpr double kInt64Bound = 9223372036854775808.0;  // 2^63
  if (v == std::trunc(v) && v > -kInt64Bound && v < kInt64Bound) {
    return fmt::format("{}", static_cast<int64_t>(v));
  }
  return fmt::format("{}", v);
}

std::string family_name(const Metric& m) {
  std::string name = valid_name(m.name);
  constexpr std::string_view kTotal = "_total";
  if (m.kind == Metric::Kind::kCounter &&
      (name.size() < kTotal.size() || name.compare(name.size() - kTotal.size(), kTotal.size(), kTotal) != 0)) {
    name += kTotal;
  }
  return name;
}

std::string read_small_file(const std::string& path, bool& ok) {
  std::ifstream in(path);
  ok = static_cast<bool>(in);
  if (!ok) return {};
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ok = !in.bad();
  return text;
}

}  // namespace

std::string prometheus_name(std::string_view stat_name) { return sanitize("omniprof_" + std::string(stat_name)); }

std::string format_prometheus(const std::vector<Metric>& metrics) {
  // Family names in first-seen order, each with the indexes of its samples.
  std::vector<std::string> order;
  std::unordered_map<std::string, std::vector<size_t>> families;
  for (size_t i = 0; i < metrics.size(); i++) {
    std::string name = family_name(metrics[i]);
    auto [it, inserted] = families.try_emplace(name);
    if (inserted) order.push_back(name);
    it->second.push_back(i);
  }
  std::string out;
  for (const std::string& name : order) {
    const std::vector<size_t>& samples = families[name];
    const Metric& first = metrics[samples.front()];
    out += "# HELP " + name;
    if (!first.help.empty()) out += " " + escape_help(first.help);
    out += "\n# TYPE " + name + (first.kind == Metric::Kind::kCounter ? " counter\n" : " gauge\n");
    for (size_t i : samples) {
      const Metric& m = metrics[i];
      out += name;
      if (!m.labels.empty()) {
        out += '{';
        for (size_t l = 0; l < m.labels.size(); l++) {
          if (l) out += ',';
          out += valid_name(m.labels[l].first) + "=\"" + escape_label_value(m.labels[l].second) + '"';
        }
        out += '}';
      }
      out += ' ' + format_value(m.value) + '\n';
    }
  }
  return out;
}

std::vector<Metric> process_metrics(const std::string& proc_dir) {
  std::vector<Metric> out;
  bool ok = false;
  std::string statm = read_small_file(proc_dir + "/statm", ok);
  uint64_t size_pages = 0;
  uint64_t resident_pages = 0;
  if (ok && (std::istringstream(statm) >> size_pages >> resident_pages)) {
    long page_size = ::sysconf(_SC_PAGESIZE);
    if (page_size > 0) {
      out.push_back(Metric{"omniprof_agent_resident_bytes", "Resident memory of the omniprof agent, in bytes.",
                           Metric::Kind::kGauge, static_cast<double>(resident_pages) * static_cast<double>(page_size),
                           {}});
    }
  }
  std::string stat = read_small_file(proc_dir + "/stat", ok);
  // The command name, in parentheses, may itself hold spaces and ')': the
  // fields that follow start after the last ')'.
  size_t paren = stat.rfind(')');
  if (ok && paren != std::string::npos) {
    std::istringstream fields(stat.substr(paren + 1));
    std::string field;
    uint64_t utime = 0;
    uint64_t stime = 0;
    // Fields 3 (state) to 13 (cmajflt) come before utime (14) and stime (15).
    bool parsed = true;
    for (int i = 3; i <= 13 && parsed; i++) parsed = static_cast<bool>(fields >> field);
    long ticks = ::sysconf(_SC_CLK_TCK);
    if (parsed && (fields >> utime >> stime) && ticks > 0) {
      out.push_back(Metric{"omniprof_agent_cpu_seconds_total",
                           "CPU time (user and system) used by the omniprof agent, in seconds.",
                           Metric::Kind::kCounter, static_cast<double>(utime + stime) / static_cast<double>(ticks),
                           {}});
    }
  }
  return out;
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& listen,
                                                           std::function<std::vector<Metric>()> collect) {
  auto module = network::installed_network_module();
  if (!module) return make_error("metrics.listen " + listen + ": " + module.error().message);
  network::PageServerOptions options;
  options.listen = listen;
  options.setting = "metrics.listen";
  options.path = "/metrics";
  options.thread_name = "omniprof-metric";
  auto server = (*module)->serve_page(options, [collect = std::move(collect)]() {
    // Answered here, on the server's thread: an exception must not cross
    // into the module, and its text belongs in the body, not a header.
    try {
      return network::Page{200, kContentType, format_prometheus(collect())};
    } catch (const std::exception& e) {
      return network::Page{500, "text/plain; charset=utf-8", std::string("cannot collect metrics: ") + e.what() + "\n"};
    } catch (...) {
      return network::Page{500, "text/plain; charset=utf-8", "cannot collect metrics\n"};
    }
  });
  if (!server) return server.error();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(*server)));
}

MetricsServer::MetricsServer(std::unique_ptr<network::PageServer> server) : server_(std::move(server)) {}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const { return server_->port(); }

}  // namespace omniprof
