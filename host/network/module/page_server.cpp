#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include <httplib.h>

#include "network/module/transports.h"

namespace omniprof::network {
namespace {

// "HOST:PORT", the host possibly a bracketed IPv6 address.
struct ListenAddress {
  std::string host;
  int port = 0;
};

Result<ListenAddress> parse_listen(const std::string& listen, const std::string& setting) {
  auto bad = [&](const std::string& why) {
    return make_error(setting + " " + listen + ": " + why +
                      " (expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464)");
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

class HttplibPageServer : public PageServer {
 public:
  HttplibPageServer(std::unique_ptr<httplib::Server> server, int port, const std::string& thread_name)
      : server_(std::move(server)), port_(port) {
    thread_ = std::thread([this] {
      server_->listen_after_bind();
      finished_ = true;
    });
    // Named so that the agent's own thread is recognisable in its profiles
    // and in top -H.
    ::pthread_setname_np(thread_.native_handle(), thread_name.substr(0, 15).c_str());
  }

  ~HttplibPageServer() override {
    // stop() does nothing until the thread is inside listen_after_bind (it
    // checks is_running()), and must not be called twice while it runs (it
    // asserts the socket is still open): wait for the thread to get there,
    // or to have left on its own, then stop it once.
    while (!server_->is_running() && !finished_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server_->stop();
    thread_.join();
  }

  int port() const override { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_;
  std::atomic<bool> finished_{false};  // the thread has left listen_after_bind
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<PageServer>> serve_page(const PageServerOptions& options, std::function<Page()> page) {
  auto address = parse_listen(options.listen, options.setting);
  if (!address) return address.error();
  const std::string where = options.setting + " " + options.listen;

  // Resolved here too, only for the message: httplib reports a host that does
  // not resolve as it does an address that cannot be bound, by failing.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  int gai = ::getaddrinfo(address->host.c_str(), std::to_string(address->port).c_str(), &hints, &resolved);
  if (gai != 0) {
    std::string why = gai == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(gai);
    return make_error(where + ": cannot resolve " + address->host + ": " + why);
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
  server->Get(options.path, [page = std::move(page)](const httplib::Request&, httplib::Response& res) {
    Page answer = page();
    res.status = answer.status;
    res.set_content(answer.body, answer.content_type.c_str());
  });

  // httplib returns only false; the reason is bind()'s or listen()'s errno,
  // which the close() and freeaddrinfo() after it leave alone.
  errno = 0;
  int port = address->port;
  bool bound = port == 0 ? (port = server->bind_to_any_port(address->host)) > 0
                         : server->bind_to_port(address->host, port);
  if (!bound) {
    int err = errno;
    return make_error(where + ": cannot listen: " +
                      (err != 0 ? std::string(std::strerror(err)) : std::string("bind failed")));
  }
  return std::unique_ptr<PageServer>(std::make_unique<HttplibPageServer>(std::move(server), port, options.thread_name));
}

}  // namespace omniprof::network
