#include "export/destinations.h"

#include <fmt/format.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_set>

#include "common/gzip.h"
#include "export/otlp_profile.h"
#include "google/rpc/status.pb.h"
#include "network/transport.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"

namespace omniprof {
namespace {

namespace pb = perftools::profiles;
using std::chrono::milliseconds;

constexpr std::string_view kOtlpHttpPath = "/v1development/profiles";
constexpr const char* kOtlpGrpcExport = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";
// gRPC's status codes (grpc/status.h) that the OTLP specification names.
enum GrpcCode : int {
  kCancelled = 1,
  kDeadlineExceeded = 4,
  kResourceExhausted = 8,
  kAborted = 10,
  kOutOfRange = 11,
  kUnavailable = 14,
  kDataLoss = 15,
};

Result<std::string> read_pem(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(fmt::format("cannot read the certificate file {}", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The round as one gzip'd OTLP request.
Result<std::vector<ExportPayload>> encode_otlp(const ProfileBuilder& round) {
  if (round.total_samples() == 0) return std::vector<ExportPayload>{};
  auto request = otlp_request(round.build(), round.resource_keys(), OtlpScope{"omniprof", OMNIPROF_VERSION},
                              round.sample_times());
  std::string serialized;
  if (!request.SerializeToString(&serialized)) return make_error("the OTLP request exceeds protobuf's 2 GiB limit");
  auto gzipped = gzip_compress(serialized);
  if (!gzipped) return gzipped.error();
  return std::vector<ExportPayload>{ExportPayload{std::move(*gzipped), ""}};
}

milliseconds retry_after_seconds(const std::string& value) {
  if (value.empty()) return milliseconds(0);
  char* end = nullptr;
  long seconds = std::strtol(value.c_str(), &end, 10);
  // An HTTP date instead of seconds is left to the backoff.
  if (end == value.c_str() || *end != '\0' || seconds < 0) return milliseconds(0);
  return milliseconds(std::min<long>(seconds, 3600) * 1000);
}

// What an HTTP exchange came to, by the OTLP specification's rules.
SendOutcome http_outcome(const network::HttpAnswer& answer, const std::string& what) {
  SendOutcome outcome;
  if (!answer.transport_error.empty()) {
    outcome.status = SendOutcome::Status::kRetryable;
    outcome.error = fmt::format("{}: {}", what, answer.transport_error);
    return outcome;
  }
  const int status = answer.status;
  if (status >= 200 && status < 300) return outcome;
  std::string body = answer.body.substr(0, 200);
  std::replace(body.begin(), body.end(), '\n', ' ');
  outcome.error = fmt::format("{}: HTTP {}{}{}", what, status, body.empty() ? "" : ": ", body);
  if (status == 429 || status == 502 || status == 503 || status == 504) {
    outcome.status = SendOutcome::Status::kRetryable;
    outcome.retry_after = retry_after_seconds(answer.retry_after);
  } else {
    outcome.status = SendOutcome::Status::kRejected;
  }
  return outcome;
}

// A client for scheme://host:port, with the trust the settings give.
std::unique_ptr<network::HttpClient> http_client(const network::NetworkModule& module, const EndpointUrl& url,
                                                 const std::string& certificate, const std::string& user = "",
                                                 const std::string& password = "") {
  network::HttpClientOptions options;
  options.origin = fmt::format("{}://{}", url.scheme, url.host);
  if (url.port != 0) options.origin += fmt::format(":{}", url.port);
  options.ca_certificate_path = certificate;
  options.basic_auth_user = user;
  options.basic_auth_password = password;
  return module.http_client(options);
}

class OtlpHttpDestination : public ExportDestination {
 public:
  OtlpHttpDestination(const network::NetworkModule& module, EndpointUrl url, const OtlpSettings& settings)
      : url_(std::move(url)), client_(http_client(module, url_, settings.certificate)) {
    for (const auto& [key, value] : settings.headers) headers_.emplace_back(key, value);
    headers_.emplace_back("Content-Encoding", "gzip");
    headers_.emplace_back("User-Agent", "omniprof/" OMNIPROF_VERSION);
  }

  std::string name() const override {
    return fmt::format("OTLP http/protobuf {}://{}{}{}", url_.scheme, url_.host,
                       url_.port ? fmt::format(":{}", url_.port) : "", url_.path);
  }

  Result<std::vector<ExportPayload>> encode(const ProfileBuilder& round) override { return encode_otlp(round); }

  SendOutcome send(const ExportPayload& payload, milliseconds timeout) override {
    network::HttpAnswer answer = client_->post(url_.path, headers_, payload.body, "application/x-protobuf", timeout);
    SendOutcome outcome = http_outcome(answer, "POST " + url_.path);
    if (outcome.status == SendOutcome::Status::kSent) {
      otlp_collector::ExportProfilesServiceResponse response;
      std::string body = std::move(answer.body);
      if (has_gzip_magic(body)) {
        if (auto inflated = gzip_decompress(body)) body = std::move(*inflated);
      }
      if (!body.empty() && response.ParseFromString(body) && response.has_partial_success()) {
        outcome.rejected_items = response.partial_success().rejected_profiles();
        outcome.error = response.partial_success().error_message();
      }
    }
    return outcome;
  }

 private:
  EndpointUrl url_;
  std::unique_ptr<network::HttpClient> client_;
  network::Headers headers_;
};

class OtlpGrpcDestination : public ExportDestination {
 public:
  OtlpGrpcDestination(const network::NetworkModule& module, network::GrpcChannelOptions options,
                      const OtlpSettings& settings)
      : target_(options.target), tls_(options.tls), headers_(settings.headers) {
    options.user_agent = "omniprof/" OMNIPROF_VERSION;
    options.max_send_bytes = 64 << 20;
    channel_ = module.grpc_channel(options);
    // gRPC metadata keys are lowercase.
    for (auto& [key, value] : headers_) {
      std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
    }
  }

  std::string name() const override { return fmt::format("OTLP grpc {}{}", target_, tls_ ? " (TLS)" : ""); }

  Result<std::vector<ExportPayload>> encode(const ProfileBuilder& round) override { return encode_otlp(round); }

  SendOutcome send(const ExportPayload& payload, milliseconds timeout) override {
    SendOutcome outcome;
    // Queued gzip'd (a fifth of the memory); gRPC compresses the message
    // again on the wire.
    auto serialized = gzip_decompress(payload.body);
    if (!serialized) {
      outcome.status = SendOutcome::Status::kRejected;
      outcome.error = "a queued request could not be read back";
      return outcome;
    }
    const network::GrpcAnswer answer = channel_->unary_call(kOtlpGrpcExport, *serialized, headers_, timeout);
    if (answer.code == 0) {
      otlp_collector::ExportProfilesServiceResponse response;
      if (response.ParseFromString(answer.response) && response.has_partial_success()) {
        outcome.rejected_items = response.partial_success().rejected_profiles();
        outcome.error = response.partial_success().error_message();
      }
      return outcome;
    }
    outcome.error = fmt::format("Export: {} ({})", answer.message, answer.code);
    // The server's RetryInfo, if its status carries one (grpc-status-details-bin).
    bool has_retry_info = false;
    google::rpc::Status details;
    if (!answer.details.empty() && details.ParseFromString(answer.details)) {
      for (const auto& detail : details.details()) {
        google::rpc::RetryInfo retry;
        if (detail.UnpackTo(&retry)) {
          has_retry_info = true;
          const int64_t ms = retry.retry_delay().seconds() * 1000 + retry.retry_delay().nanos() / 1000000;
          outcome.retry_after = milliseconds(std::clamp<int64_t>(ms, 0, 3600 * 1000));
        }
      }
    }
    switch (answer.code) {
      case kUnavailable:
      case kAborted:
      case kOutOfRange:
      case kDataLoss:
      case kCancelled:
      case kDeadlineExceeded:
        outcome.status = SendOutcome::Status::kRetryable;
        break;
      case kResourceExhausted:
        // Retryable only when the server says when (RetryInfo).
        outcome.status = has_retry_info ? SendOutcome::Status::kRetryable : SendOutcome::Status::kRejected;
        break;
      default:
        outcome.status = SendOutcome::Status::kRejected;
    }
    return outcome;
  }

 private:
  std::string target_;
  bool tls_;
  network::Headers headers_;
  std::unique_ptr<network::GrpcChannel> channel_;
};

// A copy of `profile` holding only the given samples, and only the
// locations, functions, mappings and strings they reach (each service's
// upload carries its own tables, not the whole round's).
pb::Profile sub_profile(const pb::Profile& profile, const std::vector<int>& samples) {
  pb::Profile out;
  std::unordered_set<uint64_t> locations, functions, mappings;
  for (int i : samples) {
    *out.add_sample() = profile.sample(i);
    for (uint64_t id : profile.sample(i).location_id()) locations.insert(id);
  }
  for (const pb::Location& location : profile.location()) {
    if (!locations.count(location.id())) continue;
    *out.add_location() = location;
    if (location.mapping_id()) mappings.insert(location.mapping_id());
    for (const pb::Line& line : location.line()) functions.insert(line.function_id());
  }
  for (const pb::Function& function : profile.function()) {
    if (functions.count(function.id())) *out.add_function() = function;
  }
  for (const pb::Mapping& mapping : profile.mapping()) {
    if (mappings.count(mapping.id())) *out.add_mapping() = mapping;
  }
  *out.mutable_sample_type() = profile.sample_type();
  *out.mutable_period_type() = profile.period_type();
  *out.mutable_comment() = profile.comment();
  out.set_time_nanos(profile.time_nanos());
  out.set_duration_nanos(profile.duration_nanos());
  out.set_period(profile.period());
  out.set_default_sample_type(profile.default_sample_type());
  out.set_drop_frames(profile.drop_frames());
  out.set_keep_frames(profile.keep_frames());
  // Renumber the strings still referred to, "" staying at 0.
  std::unordered_map<int64_t, int64_t> renumbered{{0, 0}};
  out.add_string_table("");
  auto keep = [&](int64_t index) -> int64_t {
    if (index <= 0 || index >= profile.string_table_size()) return 0;
    auto [it, inserted] = renumbered.try_emplace(index, out.string_table_size());
    if (inserted) out.add_string_table(profile.string_table(static_cast<int>(index)));
    return it->second;
  };
  for (auto& type : *out.mutable_sample_type()) {
    type.set_type(keep(type.type()));
    type.set_unit(keep(type.unit()));
  }
  out.mutable_period_type()->set_type(keep(out.period_type().type()));
  out.mutable_period_type()->set_unit(keep(out.period_type().unit()));
  for (auto& comment : *out.mutable_comment()) comment = keep(comment);
  out.set_default_sample_type(keep(out.default_sample_type()));
  out.set_drop_frames(keep(out.drop_frames()));
  out.set_keep_frames(keep(out.keep_frames()));
  for (auto& sample : *out.mutable_sample()) {
    for (auto& label : *sample.mutable_label()) {
      label.set_key(keep(label.key()));
      label.set_str(keep(label.str()));
      label.set_num_unit(keep(label.num_unit()));
    }
  }
  for (auto& mapping : *out.mutable_mapping()) {
    mapping.set_filename(keep(mapping.filename()));
    mapping.set_build_id(keep(mapping.build_id()));
  }
  for (auto& function : *out.mutable_function()) {
    function.set_name(keep(function.name()));
    function.set_system_name(keep(function.system_name()));
    function.set_filename(keep(function.filename()));
  }
  return out;
}

std::string form_escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

class PyroscopeDestination : public ExportDestination {
 public:
  PyroscopeDestination(const network::NetworkModule& module, EndpointUrl url, const PyroscopeSettings& settings,
                       std::vector<std::pair<std::string, std::string>> labels)
      : url_(std::move(url)),
        client_(http_client(module, url_, "", settings.basic_auth_user, settings.basic_auth_password)),
        labels_(std::move(labels)) {
    if (!settings.tenant_id.empty()) headers_.emplace_back("X-Scope-OrgID", settings.tenant_id);
    headers_.emplace_back("User-Agent", "omniprof/" OMNIPROF_VERSION);
    while (!url_.path.empty() && url_.path.back() == '/') url_.path.pop_back();
  }

  std::string name() const override {
    return fmt::format("Pyroscope {}://{}{}{}", url_.scheme, url_.host, url_.port ? fmt::format(":{}", url_.port) : "",
                       url_.path);
  }

  // One upload per service.name: Pyroscope keys profiles by application.
  Result<std::vector<ExportPayload>> encode(const ProfileBuilder& round) override {
    std::vector<ExportPayload> payloads;
    if (round.total_samples() == 0) return payloads;
    const pb::Profile profile = round.build();
    std::map<std::string, std::vector<int>> by_service;
    for (int i = 0; i < profile.sample_size(); ++i) {
      std::string service;
      for (const pb::Label& label : profile.sample(i).label()) {
        if (profile.string_table(static_cast<int>(label.key())) == "service.name") {
          service = profile.string_table(static_cast<int>(label.str()));
        }
      }
      by_service[service.empty() ? "omniprof" : service].push_back(i);
    }
    const int64_t from = profile.time_nanos() / 1000000000;
    const int64_t until = (profile.time_nanos() + profile.duration_nanos()) / 1000000000;
    const int64_t hz = profile.period() > 0 ? 1000000000 / profile.period() : 0;
    for (const auto& [service, samples] : by_service) {
      std::string serialized;
      if (!sub_profile(profile, samples).SerializeToString(&serialized)) {
        return make_error("a profile exceeds protobuf's 2 GiB limit");
      }
      auto gzipped = gzip_compress(serialized);
      if (!gzipped) return gzipped.error();
      std::string query = fmt::format("name={}&format=pprof&from={}&until={}&sampleRate={}&spyName=omniprof",
                                      form_escape(pyroscope_application_name(service, labels_)), from,
                                      std::max(until, from + 1), hz);
      payloads.push_back(ExportPayload{std::move(*gzipped), std::move(query)});
    }
    return payloads;
  }

  SendOutcome send(const ExportPayload& payload, milliseconds timeout) override {
    // As Pyroscope's own clients upload pprof: a multipart form whose
    // `profile` part is the (gzip'd) profile.
    const network::FormFile file{"profile", "profile.pprof", payload.body, "application/octet-stream"};
    const std::string path = url_.path + "/ingest?" + payload.query;
    return http_outcome(client_->post_form(path, headers_, file, timeout), "POST " + url_.path + "/ingest");
  }

 private:
  EndpointUrl url_;
  std::unique_ptr<network::HttpClient> client_;
  std::vector<std::pair<std::string, std::string>> labels_;
  network::Headers headers_;
};

}  // namespace

Result<EndpointUrl> parse_endpoint(const std::string& endpoint) {
  EndpointUrl url;
  std::string rest = endpoint;
  if (auto scheme_end = rest.find("://"); scheme_end != std::string::npos) {
    url.scheme = rest.substr(0, scheme_end);
    std::transform(url.scheme.begin(), url.scheme.end(), url.scheme.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (url.scheme != "http" && url.scheme != "https") {
      return make_error(fmt::format("endpoint {}: the scheme must be http or https, not {}", endpoint, url.scheme));
    }
    rest = rest.substr(scheme_end + 3);
  }
  size_t path_start = rest.find('/');
  std::string authority = rest.substr(0, path_start);
  url.path = path_start == std::string::npos ? "" : rest.substr(path_start);
  size_t port_colon = std::string::npos;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string::npos) return make_error(fmt::format("endpoint {}: an IPv6 address without its ]", endpoint));
    url.host = authority.substr(0, close + 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return make_error(fmt::format("endpoint {}: expected :PORT after ]", endpoint));
      port_colon = close + 1;
    }
  } else {
    port_colon = authority.rfind(':');
    url.host = authority.substr(0, port_colon);
  }
  if (url.host.empty()) return make_error(fmt::format("endpoint {}: no host", endpoint));
  if (port_colon != std::string::npos) {
    const std::string port = authority.substr(port_colon + 1);
    char* end = nullptr;
    long value = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || value < 1 || value > 65535) {
      return make_error(fmt::format("endpoint {}: the port must be 1 to 65535, not \"{}\"", endpoint, port));
    }
    url.port = static_cast<int>(value);
  }
  return url;
}

std::string pyroscope_application_name(const std::string& service,
                                       const std::vector<std::pair<std::string, std::string>>& labels) {
  auto clean_value = [](std::string text) {
    text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return c == ',' || c == '}' || c == '=' || c == '{'; }),
               text.end());
    return text;
  };
  std::string name = clean_value(service);
  std::string inside;
  for (const auto& [key, value] : labels) {
    std::string label = key;
    for (char& c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    }
    if (!inside.empty()) inside += ',';
    inside += label + "=" + clean_value(value);
  }
  return name + "{" + inside + "}";
}

Result<std::unique_ptr<ExportDestination>> make_otlp_destination(const OtlpSettings& settings) {
  auto url = parse_endpoint(settings.endpoint);
  if (!url) return url.error();
  auto module = network::installed_network_module();
  if (!module) return make_error("export.otlp.endpoint " + settings.endpoint + ": " + module.error().message);
  if (settings.protocol == "http/protobuf") {
    if (url->scheme.empty()) {
      return make_error(fmt::format("export.otlp.endpoint {}: http/protobuf needs an http:// or https:// URL",
                                    settings.endpoint));
    }
    if (!settings.endpoint_is_full_url) {
      while (!url->path.empty() && url->path.back() == '/') url->path.pop_back();
      url->path += kOtlpHttpPath;
    } else if (url->path.empty()) {
      url->path = "/";
    }
    if (!settings.certificate.empty()) {
      if (auto pem = read_pem(settings.certificate); !pem) return pem.error();
    }
    return std::unique_ptr<ExportDestination>(
        std::make_unique<OtlpHttpDestination>(**module, std::move(*url), settings));
  }
  if (settings.protocol != "grpc") {
    return make_error(fmt::format("export.otlp.protocol: expected grpc or http/protobuf, got {}", settings.protocol));
  }
  if (!url->path.empty() && url->path != "/") {
    return make_error(fmt::format("export.otlp.endpoint {}: a gRPC endpoint is host:port, without a path",
                                  settings.endpoint));
  }
  network::GrpcChannelOptions channel;
  channel.tls = url->scheme == "https" || (url->scheme.empty() && !settings.insecure);
  if (channel.tls && !settings.certificate.empty()) {
    auto pem = read_pem(settings.certificate);
    if (!pem) return pem.error();
    channel.pem_root_certs = *pem;
  }
  channel.target = url->host + ":" + std::to_string(url->port ? url->port : 4317);
  return std::unique_ptr<ExportDestination>(std::make_unique<OtlpGrpcDestination>(**module, channel, settings));
}

Result<std::vector<ConfiguredExporter>> make_exporters(const Config& config) {
  std::vector<ConfiguredExporter> exporters;
  const ExportConfig& e = config.export_to;
  ExporterSettings settings;
  settings.queue_rounds = e.queue_rounds;
  settings.retry_max = std::chrono::seconds(e.retry_max_seconds);
  settings.timeout = milliseconds(e.otlp.timeout_ms);
  if (!e.otlp.endpoint.empty()) {
    auto destination = make_otlp_destination(e.otlp);
    if (!destination) return destination.error();
    exporters.push_back({"export.otlp", std::make_unique<Exporter>(std::move(*destination), settings)});
  }
  if (!e.pyroscope.url.empty()) {
    // Labels every upload carries: the machine, and the configured resource
    // attributes (per-process ones would split a service into many series).
    std::vector<std::pair<std::string, std::string>> labels;
    utsname names{};
    if (uname(&names) == 0) labels.emplace_back("host_name", names.nodename);
    for (const auto& [key, value] : config.resource.attributes) {
      if (key != "service.name") labels.emplace_back(key, value);
    }
    auto destination = make_pyroscope_destination(e.pyroscope, std::move(labels));
    if (!destination) return destination.error();
    exporters.push_back({"export.pyroscope", std::make_unique<Exporter>(std::move(*destination), settings)});
  }
  return exporters;
}

Result<std::unique_ptr<ExportDestination>> make_pyroscope_destination(
    const PyroscopeSettings& settings, std::vector<std::pair<std::string, std::string>> labels) {
  auto url = parse_endpoint(settings.url);
  if (!url) return url.error();
  if (url->scheme.empty()) {
    return make_error(fmt::format("export.pyroscope.url {}: expected an http:// or https:// URL", settings.url));
  }
  auto module = network::installed_network_module();
  if (!module) return make_error("export.pyroscope.url " + settings.url + ": " + module.error().message);
  return std::unique_ptr<ExportDestination>(
      std::make_unique<PyroscopeDestination>(**module, std::move(*url), settings, std::move(labels)));
}

}  // namespace omniprof
