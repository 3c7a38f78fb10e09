// A backend for the export tests, on 127.0.0.1: OTLP over gRPC (the
// generated ProfilesService) and over HTTP (/v1development/profiles), and
// Pyroscope's /ingest, keeping what arrives and answering as the test says.
#pragma once

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/gzip.h"
#include "google/rpc/status.pb.h"
#include "omniprof/support/unique_fd.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.grpc.pb.h"

namespace testing_support {

namespace otlp_collector = opentelemetry::proto::collector::profiles::v1development;
using omniprof::Result;
using omniprof::gzip_decompress;
using omniprof::has_gzip_magic;

// A receiver speaking both transports on 127.0.0.1, answering as told.
class Receiver {
 public:
  struct Answer {
    int http_status = 200;
    grpc::StatusCode grpc_code = grpc::StatusCode::OK;
    std::string retry_after;  // HTTP Retry-After
    int64_t rejected = 0;     // partial success
    int retry_info_ms = -1;   // gRPC: a RetryInfo of this delay in the failing status's details
  };
  // Decides each answer from how long the receiver has run.
  std::function<Answer(std::chrono::milliseconds)> answer = [](auto) { return Answer{}; };

  // gzip_disabled: the gRPC server refuses gzip'd messages (UNIMPLEMENTED),
  // which shows whether a client compresses: gRPC's server API hides the
  // encoding of what it inflated.
  explicit Receiver(bool gzip_disabled = false) {
    http_.Post("/v1development/profiles", [this](const httplib::Request& request, httplib::Response& response) {
      Answer a = note(request.has_header("Content-Encoding") ? request.get_header_value("Content-Encoding") : "",
                      request.body);
      response.status = a.http_status;
      if (!a.retry_after.empty()) response.set_header("Retry-After", a.retry_after);
      otlp_collector::ExportProfilesServiceResponse reply;
      if (a.rejected) reply.mutable_partial_success()->set_rejected_profiles(a.rejected);
      response.set_content(reply.SerializeAsString(), "application/x-protobuf");
    });
    // Pyroscope's ingest: the query and the multipart form's `profile` part.
    http_.Post("/ingest", [this](const httplib::Request& request, httplib::Response& response) {
      Upload upload;
      for (const auto& [key, value] : request.params) upload.query[key] = value;
      if (request.has_file("profile")) upload.profile = request.get_file_value("profile").content;
      upload.authorization = request.get_header_value("Authorization");
      upload.tenant = request.get_header_value("X-Scope-OrgID");
      std::lock_guard lock(mutex_);
      uploads_.push_back(std::move(upload));
      response.status = 200;
    });
    http_port_ = http_.bind_to_any_port("127.0.0.1");
    http_thread_ = std::thread([this] {
      http_.listen_after_bind();
      http_finished_ = true;
    });
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &grpc_port_);
    builder.RegisterService(&service_);
    if (gzip_disabled) builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
    service_.owner = this;
    grpc_ = builder.BuildAndStart();
  }
  ~Receiver() {
    // httplib's stop() does nothing until the thread is inside
    // listen_after_bind (it checks is_running()): a receiver destroyed at
    // once (one only gRPC talks to) would otherwise leave the thread
    // listening and the join waiting for ever (MetricsServer does the same).
    while (!http_.is_running() && !http_finished_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    http_.stop();
    http_thread_.join();
    grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  std::string http_endpoint() const { return fmt::format("http://127.0.0.1:{}", http_port_); }
  std::string grpc_endpoint() const { return fmt::format("http://127.0.0.1:{}", grpc_port_); }

  struct Arrival {
    std::chrono::milliseconds at;
    std::string encoding;
    otlp_collector::ExportProfilesServiceRequest request;
    bool answered_ok;
  };
  std::vector<Arrival> arrivals() {
    std::lock_guard lock(mutex_);
    return arrivals_;
  }
  struct Upload {
    std::map<std::string, std::string> query;
    std::string profile;
    std::string authorization;  // the Authorization header
    std::string tenant;         // X-Scope-OrgID
  };
  std::vector<Upload> uploads() {
    std::lock_guard lock(mutex_);
    return uploads_;
  }

 private:
  struct Service : otlp_collector::ProfilesService::Service {
    Receiver* owner = nullptr;
    grpc::Status Export(grpc::ServerContext* context, const otlp_collector::ExportProfilesServiceRequest* request,
                        otlp_collector::ExportProfilesServiceResponse* response) override {
      std::string encoding;
      auto it = context->client_metadata().find("grpc-encoding");
      if (it != context->client_metadata().end()) encoding.assign(it->second.data(), it->second.size());
      Answer a = owner->note_request(encoding, *request);
      if (a.grpc_code != grpc::StatusCode::OK) {
        if (a.retry_info_ms < 0) return grpc::Status(a.grpc_code, "told to fail");
        google::rpc::RetryInfo retry;
        retry.mutable_retry_delay()->set_seconds(a.retry_info_ms / 1000);
        retry.mutable_retry_delay()->set_nanos((a.retry_info_ms % 1000) * 1000000);
        google::rpc::Status details;
        details.set_code(static_cast<int>(a.grpc_code));
        details.add_details()->PackFrom(retry);
        return grpc::Status(a.grpc_code, "told to fail, with RetryInfo", details.SerializeAsString());
      }
      if (a.rejected) response->mutable_partial_success()->set_rejected_profiles(a.rejected);
      return grpc::Status::OK;
    }
  };

  Answer note(const std::string& encoding, const std::string& body) {
    otlp_collector::ExportProfilesServiceRequest request;
    // httplib inflates a gzip'd body itself (Debian builds it with zlib)
    // and fails the request if it is not gzip.
    auto inflated = has_gzip_magic(body) ? gzip_decompress(body) : Result<std::string>(body);
    if (inflated) request.ParseFromString(*inflated);
    return note_request(encoding, request);
  }
  Answer note_request(const std::string& encoding, const otlp_collector::ExportProfilesServiceRequest& request) {
    auto at = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
    Answer a = answer(at);
    std::lock_guard lock(mutex_);
    arrivals_.push_back({at, encoding, request, a.http_status == 200 && a.grpc_code == grpc::StatusCode::OK});
    return a;
  }

  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  httplib::Server http_;
  int http_port_ = 0;
  std::thread http_thread_;
  std::atomic<bool> http_finished_{false};  // the thread has left listen_after_bind
  Service service_;
  int grpc_port_ = 0;
  std::unique_ptr<grpc::Server> grpc_;
  std::mutex mutex_;
  std::vector<Arrival> arrivals_;
  std::vector<Upload> uploads_;
};

// A TCP port that accepts and never answers.
class SilentServer {
 public:
  SilentServer() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ok_ = ok_ && ::listen(fd_.get(), 64) == 0;
    socklen_t length = sizeof address;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  int port() const { return port_; }
  bool ok() const { return ok_; }

 private:
  omniprof::UniqueFd fd_;
  int port_ = 0;
  bool ok_ = false;
};

}  // namespace testing_support
