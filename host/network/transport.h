// The agent's network transports: an HTTP client (OTLP over HTTP,
// Pyroscope's ingest), a gRPC channel (OTLP over gRPC) and a one-page HTTP
// server (/metrics). They live in a module of their own, lib/omniprof/
// network.so (host/network/module/), which the agent loads the first time a
// configured backend or metrics.listen needs it: gRPC, cpp-httplib and the
// OpenSSL they bring, linked into the agent, kept about 10 MB more resident
// in every agent, exporting or not (issue 19's scene, 2026-12-07, same run:
// RSS 38.6 MB linked, 27.8 MB with the module), and the default agent
// exports nothing.
//
// The module moves bytes. Every message (OTLP, pprof, google.rpc.Status, the
// Prometheus page) is made and read by the host, so the module holds no
// protobuf type: protobuf's generated descriptors must be registered once in
// a process.
//
// The host and the module are built together and refused apart: the module
// says which omniprof version it is (kNetworkModuleEntry's `version`), and
// load_network_module refuses any other, since these C++ types cross between
// the two.
//
// Threading: a client or channel is used by one thread at a time (the
// exporter's); a PageServer calls its `page` on a thread of its own, once per
// request.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "omniprof/support/result.h"

namespace omniprof::network {

using Headers = std::vector<std::pair<std::string, std::string>>;

// What an HTTP request came to: an answer (status, body, Retry-After) or,
// when none came, why (transport_error, said for a reader of the log).
struct HttpAnswer {
  std::string transport_error;
  int status = 0;
  std::string body;
  std::string retry_after;  // the Retry-After header as sent, "" when absent
};

struct HttpClientOptions {
  std::string origin;               // scheme://host[:port]
  std::string ca_certificate_path;  // https: trust only these roots; "" = the system's
  std::string basic_auth_user;      // "" = no Authorization header
  std::string basic_auth_password;
};

// One file in a multipart/form-data body.
struct FormFile {
  std::string field;
  std::string filename;
  std::string content;
  std::string content_type;
};

// Keeps its connection alive between requests.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  virtual HttpAnswer post(const std::string& path, const Headers& headers, const std::string& body,
                          const std::string& content_type, std::chrono::milliseconds timeout) = 0;
  virtual HttpAnswer post_form(const std::string& path, const Headers& headers, const FormFile& file,
                               std::chrono::milliseconds timeout) = 0;
};

// What a unary gRPC call came to: `code` is the gRPC status code (0 = OK).
struct GrpcAnswer {
  int code = 0;
  std::string message;
  std::string details;   // grpc-status-details-bin: a serialized google.rpc.Status, or ""
  std::string response;  // the serialized response message, when code is 0
};

struct GrpcChannelOptions {
  std::string target;  // host:port
  bool tls = false;
  std::string pem_root_certs;  // tls: trust only these roots; "" = the system's
  std::string user_agent;
  int max_send_bytes = 64 << 20;
};

class GrpcChannel {
 public:
  virtual ~GrpcChannel() = default;
  // Calls `method` ("/package.Service/Method") with the serialized request,
  // gzip-compressed on the wire; metadata keys must be lowercase.
  virtual GrpcAnswer unary_call(const std::string& method, const std::string& request, const Headers& metadata,
                                std::chrono::milliseconds timeout) = 0;
};

// One page, served over HTTP at one path, until destroyed.
struct Page {
  int status = 200;
  std::string content_type;
  std::string body;
};

class PageServer {
 public:
  // Stops accepting, finishes the request being answered (bounded by the
  // read/write timeouts) and joins the server's thread.
  virtual ~PageServer() = default;
  virtual int port() const = 0;  // the bound port (the one picked, for port 0)
};

struct PageServerOptions {
  std::string listen;       // HOST:PORT ("127.0.0.1:9464", "[::1]:0"); port 0 picks a free one
  std::string setting;      // names `listen` in errors ("metrics.listen")
  std::string path;         // GET and HEAD of this path answer `page`; others 404
  std::string thread_name;  // the server thread's name (15 characters at most)
};

// The module's entry, one table of factories. A PageServer calls `page` on
// its own thread, one request at a time, without keep-alive: a scraper (or a
// client that stalls, for at most a few seconds of timeout) never costs the
// agent more than one thread and one socket. It binds without SO_REUSEPORT
// (a second agent could otherwise share the port). Note: starting one sets
// SIGPIPE to SIG_IGN for the whole process (httplib writes without
// MSG_NOSIGNAL).
struct NetworkModule {
  const char* version;  // OMNIPROF_VERSION the module was built as
  std::unique_ptr<HttpClient> (*http_client)(const HttpClientOptions& options);
  std::unique_ptr<GrpcChannel> (*grpc_channel)(const GrpcChannelOptions& options);
  // Fails, naming options.setting, options.listen and the reason, on a
  // malformed address, a host that does not resolve, or an address that
  // cannot be bound (in use, not local, privileged port).
  Result<std::unique_ptr<PageServer>> (*serve_page)(const PageServerOptions& options, std::function<Page()> page);
};

// The name of the module's entry symbol: a `const NetworkModule*` returned
// by a function taking nothing.
inline constexpr const char* kNetworkModuleEntry = "omniprof_network_module";

// The module at `path`, loaded the first time (later calls return the same
// table; thread-safe). An error names the file and why: missing, not
// loadable (a library it needs), no entry, another version.
Result<const NetworkModule*> load_network_module(const std::string& path);
// The module of this binary's install layout (InstallLayout::network_module).
Result<const NetworkModule*> installed_network_module();

}  // namespace omniprof::network
