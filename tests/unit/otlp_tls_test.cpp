// OTLP over TLS: an HTTPS and a gRPC-over-TLS receiver on 127.0.0.1 with a
// certificate the test makes (openssl), trusted through the certificate
// setting (OTEL_EXPORTER_OTLP_CERTIFICATE); without it the server is not
// trusted and nothing is delivered.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <atomic>
#include <thread>

#include "export/destinations.h"
#include "export/exporter.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.grpc.pb.h"
#include "temp_tree.h"

namespace omniprof {
namespace {

using namespace std::chrono_literals;
namespace otlp = opentelemetry::proto::collector::profiles::v1development;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class OtlpTls : public ::testing::Test {
 protected:
  void SetUp() override {
    cert_ = tree_.path("cert.pem");
    key_ = tree_.path("key.pem");
    const std::string command = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                                "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
                                key_ + " -out " + cert_ + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << "openssl (Debian package openssl) could not make a certificate";
  }

  ProfileBuilder round() {
    ProfileBuilder builder(10000000, 1700000000000000000);
    uint64_t m = builder.add_mapping({0x400000, 0x500000, 0, "/usr/bin/app", "", true});
    builder.add_sample({builder.add_location(m, 0x401000, {{"work", "", "app.c", 1}})}, 3,
                       SampleLabels{1, 1, "app", "app", "", "", nullptr});
    return builder;
  }

  ExporterStats deliver(OtlpSettings settings) {
    auto destination = make_otlp_destination(settings);
    EXPECT_TRUE(destination) << destination.error().message;
    if (!destination) return {};
    ExporterSettings exporter_settings;
    exporter_settings.timeout = 3000ms;
    Exporter exporter(std::move(*destination), exporter_settings);
    exporter.submit(round());
    const auto began = std::chrono::steady_clock::now();
    while (exporter.stats().rounds_sent == 0 && exporter.stats().send_failures == 0 &&
           std::chrono::steady_clock::now() - began < 15s) {
      std::this_thread::sleep_for(20ms);
    }
    exporter.shutdown(0ms);
    return exporter.stats();
  }

  testing_support::TempTree tree_{"otlp-tls"};
  std::string cert_, key_;
};

TEST_F(OtlpTls, HttpsWithTheServersCertificateTrusted) {
  httplib::SSLServer server(cert_.c_str(), key_.c_str());
  ASSERT_TRUE(server.is_valid());
  int requests = 0;
  server.Post("/v1development/profiles", [&](const httplib::Request&, httplib::Response& response) {
    ++requests;
    response.set_content(otlp::ExportProfilesServiceResponse().SerializeAsString(), "application/x-protobuf");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::atomic<bool> finished{false};
  std::thread thread([&] {
    server.listen_after_bind();
    finished = true;
  });
  OtlpSettings settings;
  settings.endpoint = "https://127.0.0.1:" + std::to_string(port);
  settings.protocol = "http/protobuf";
  ExporterStats untrusted = deliver(settings);
  EXPECT_EQ(untrusted.rounds_sent, 0u);
  EXPECT_GE(untrusted.send_failures, 1u);
  EXPECT_EQ(requests, 0);
  settings.certificate = cert_;
  EXPECT_EQ(deliver(settings).rounds_sent, 1u);
  EXPECT_EQ(requests, 1);
  // stop() does nothing until the thread is inside listen_after_bind.
  while (!server.is_running() && !finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server.stop();
  thread.join();
}

TEST_F(OtlpTls, GrpcWithTheServersCertificateTrusted) {
  struct Service : otlp::ProfilesService::Service {
    std::atomic<int> requests{0};
    grpc::Status Export(grpc::ServerContext*, const otlp::ExportProfilesServiceRequest*,
                        otlp::ExportProfilesServiceResponse*) override {
      ++requests;
      return grpc::Status::OK;
    }
  } service;
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({read_text(key_), read_text(cert_)});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(options), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  OtlpSettings settings;
  settings.endpoint = "127.0.0.1:" + std::to_string(port);  // no scheme: TLS unless insecure
  settings.protocol = "grpc";
  ExporterStats untrusted = deliver(settings);
  EXPECT_EQ(untrusted.rounds_sent, 0u);
  EXPECT_EQ(service.requests.load(), 0);
  settings.certificate = cert_;
  EXPECT_EQ(deliver(settings).rounds_sent, 1u);
  EXPECT_EQ(service.requests.load(), 1);
  server->Shutdown(std::chrono::system_clock::now() + 1s);
}

}  // namespace
}  // namespace omniprof
