#include <httplib.h>

#include "network/module/transports.h"

namespace omniprof::network {
namespace {

// httplib's error, said for a reader of the log.
std::string http_error_text(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection: return "cannot connect (refused, unreachable, or the name does not resolve)";
    case httplib::Error::ConnectionTimeout: return "the connection timed out";
    case httplib::Error::Read: return "no answer within the timeout (or the connection broke while reading)";
    case httplib::Error::Write: return "the connection broke while sending";
    case httplib::Error::SSLConnection: return "the TLS handshake failed";
    case httplib::Error::SSLLoadingCerts: return "cannot load the CA certificates";
    case httplib::Error::SSLServerVerification: return "the server's certificate is not trusted";
    default: return "HTTP client error: " + httplib::to_string(error);
  }
}

HttpAnswer answer_of(const httplib::Result& result) {
  HttpAnswer answer;
  if (!result) {
    answer.transport_error = http_error_text(result.error());
    return answer;
  }
  answer.status = result->status;
  answer.body = result->body;
  if (result->has_header("Retry-After")) answer.retry_after = result->get_header_value("Retry-After");
  return answer;
}

httplib::Headers headers_of(const Headers& headers) {
  httplib::Headers out;
  for (const auto& [key, value] : headers) out.emplace(key, value);
  return out;
}

class HttplibClient : public HttpClient {
 public:
  explicit HttplibClient(const HttpClientOptions& options) : client_(options.origin) {
    if (options.origin.rfind("https://", 0) == 0) {
      if (!options.ca_certificate_path.empty()) client_.set_ca_cert_path(options.ca_certificate_path.c_str());
      client_.enable_server_certificate_verification(true);
    }
    if (!options.basic_auth_user.empty()) {
      client_.set_basic_auth(options.basic_auth_user.c_str(), options.basic_auth_password.c_str());
    }
    client_.set_keep_alive(true);
  }

  HttpAnswer post(const std::string& path, const Headers& headers, const std::string& body,
                  const std::string& content_type, std::chrono::milliseconds timeout) override {
    set_timeouts(timeout);
    return answer_of(client_.Post(path.c_str(), headers_of(headers), body, content_type.c_str()));
  }

  HttpAnswer post_form(const std::string& path, const Headers& headers, const FormFile& file,
                       std::chrono::milliseconds timeout) override {
    set_timeouts(timeout);
    httplib::MultipartFormDataItems form{{file.field, file.content, file.filename, file.content_type}};
    return answer_of(client_.Post(path.c_str(), headers_of(headers), form));
  }

 private:
  void set_timeouts(std::chrono::milliseconds timeout) {
    const time_t seconds = static_cast<time_t>(timeout.count() / 1000);
    const time_t micros = static_cast<time_t>((timeout.count() % 1000) * 1000);
    client_.set_connection_timeout(seconds, micros);
    client_.set_read_timeout(seconds, micros);
    client_.set_write_timeout(seconds, micros);
  }

  httplib::Client client_;
};

}  // namespace

std::unique_ptr<HttpClient> make_http_client(const HttpClientOptions& options) {
  return std::make_unique<HttplibClient>(options);
}

}  // namespace omniprof::network
