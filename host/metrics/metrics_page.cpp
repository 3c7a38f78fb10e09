#include "metrics/metrics_page.h"

#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <httplib.h>

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

// "HOST:PORT", the host possibly a bracketed IPv6 address.
struct ListenAddress {
  std::string host;
  int port = 0;
};

Result<ListenAddress> parse_listen(const std::string& listen) {
  auto bad = [&](const std::string& why) {
    return make_error("metrics.listen " + listen + ": " + why + " (expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464)");
  };
  std::string host;
  std::string port;
  if (!listen.empty() && listen[0] == '[') {
    size_t close = listen.find(']');
    if (close == std::string::npos) return bad("no ']' after the IPv6 address");
    if (close + 1 >= listen.size() || listen[close + 1] != ':') return bad("no ':PORT' after ']'");
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    size_t colon = listen.rfind(':');
    if (colon == std::string::npos) return bad("no port");
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.find(':') != std::string::npos) return bad("an IPv6 address must be in brackets");
  }
  // An empty host would mean every interface to some tools and loopback to
  // getaddrinfo: exposing the page beyond the machine must be written out.
  if (host.empty()) return bad("no host (0.0.0.0 or [::] for every interface)");
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 0 || value > 65535) {
    return bad("the port '" + port + "' is not a number from 0 to 65535");
  }
  return ListenAddress{host, value};
}

// httplib's default options set SO_REUSEPORT, with which a second agent could
// bind the same port and the kernel would split the scrapes between the two.
// SO_REUSEADDR alone still lets a restarted agent bind while connections of
// the previous one linger in TIME_WAIT.
void socket_options(int sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// Runs each connection on the accepting thread itself: one thread in all, and
// connections wait in the kernel's listen backlog instead of piling up as
// accepted sockets (descriptors the agent needs for perf events) in a queue.
class InlineTaskQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

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

MetricsServer::MetricsServer(std::unique_ptr<httplib::Server> server, int port)
    : server_(std::move(server)), port_(port) {}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& listen,
                                                           std::function<std::vector<Metric>()> collect) {
  auto address = parse_listen(listen);
  if (!address) return address.error();

  // Resolved here too, only for the message: httplib reports a host that does
  // not resolve as it does an address that cannot be bound, by failing.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  int gai = ::getaddrinfo(address->host.c_str(), std::to_string(address->port).c_str(), &hints, &resolved);
  if (gai != 0) {
    std::string why = gai == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(gai);
    return make_error("metrics.listen " + listen + ": cannot resolve " + address->host + ": " + why);
  }
  ::freeaddrinfo(resolved);

  auto server = std::make_unique<httplib::Server>();
  server->new_task_queue = [] { return new InlineTaskQueue(); };
  server->set_socket_options(socket_options);
  // One request per connection: with one thread, a kept-alive connection
  // would hold the server for every other client. The short timeouts bound
  // how long a stalled client holds it, and how long the destructor waits.
  server->set_keep_alive_max_count(1);
  server->set_keep_alive_timeout(2);
  server->set_read_timeout(2);
  server->set_write_timeout(2);
  server->Get("/metrics", [collect = std::move(collect)](const httplib::Request&, httplib::Response& res) {
    // Answered here rather than by httplib's handler, which would put the
    // exception's text in a response header.
    try {
      res.set_content(format_prometheus(collect()), kContentType);
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(std::string("cannot collect metrics: ") + e.what() + "\n", "text/plain; charset=utf-8");
    } catch (...) {
      res.status = 500;
      res.set_content("cannot collect metrics\n", "text/plain; charset=utf-8");
    }
  });

  // httplib returns only false; the reason is bind()'s or listen()'s errno,
  // which the close() and freeaddrinfo() after it leave alone.
  errno = 0;
  int port = address->port;
  bool bound = port == 0 ? (port = server->bind_to_any_port(address->host)) > 0
                         : server->bind_to_port(address->host, port);
  if (!bound) {
    int err = errno;
    return make_error("metrics.listen " + listen + ": cannot listen: " +
                      (err != 0 ? std::string(std::strerror(err)) : std::string("bind failed")));
  }

  std::unique_ptr<MetricsServer> self(new MetricsServer(std::move(server), port));
  MetricsServer* raw = self.get();
  self->thread_ = std::thread([raw] {
    raw->server_->listen_after_bind();
    raw->finished_ = true;
  });
  // Named so that the agent's own thread is recognisable in its profiles and
  // in top -H (15 characters at most).
  ::pthread_setname_np(self->thread_.native_handle(), "omniprof-metric");
  return self;
}

MetricsServer::~MetricsServer() {
  // stop() does nothing until the thread is inside listen_after_bind (it
  // checks is_running()), and must not be called twice while it runs (it
  // asserts the socket is still open): wait for the thread to get there, or
  // to have left on its own, then stop it once.
  while (!server_->is_running() && !finished_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->stop();
  thread_.join();
}

}  // namespace omniprof
