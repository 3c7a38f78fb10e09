// The backends a round can go to, each an ExportDestination (export/exporter.h):
//   - OTLP over gRPC: ProfilesService/Export, gzip-compressed messages;
//   - OTLP over HTTP: POST {endpoint}/v1development/profiles, a protobuf body
//     with Content-Encoding: gzip;
//   - Pyroscope's own ingest: POST /ingest?name=SERVICE{labels}&format=pprof
//     &from=&until=, one pprof upload per service.name of the round.
// Which codes are retryable is the OTLP specification's list (gRPC
// UNAVAILABLE, ABORTED, OUT_OF_RANGE, DATA_LOSS, CANCELLED,
// DEADLINE_EXCEEDED, and RESOURCE_EXHAUSTED when the server sent a
// RetryInfo, whose delay is honoured as HTTP's Retry-After is; HTTP 429, 502,
// 503, 504), plus
// a connection that could not be made or broke.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "export/exporter.h"
#include "omniprof/support/result.h"

namespace omniprof {

// The OTLP destination the settings name (protocol grpc or http/protobuf);
// an error says what is wrong with the endpoint or the certificate file.
Result<std::unique_ptr<ExportDestination>> make_otlp_destination(const OtlpSettings& settings);
// Pyroscope's ingest at settings.url.
Result<std::unique_ptr<ExportDestination>> make_pyroscope_destination(const PyroscopeSettings& settings,
                                                                      std::vector<std::pair<std::string, std::string>> labels);

// The exporters the config asks for, each with its stats prefix
// (export.otlp, export.pyroscope); none if no endpoint is set. An error names
// the setting that is wrong.
struct ConfiguredExporter {
  std::string stats_prefix;
  std::unique_ptr<Exporter> exporter;
};
Result<std::vector<ConfiguredExporter>> make_exporters(const Config& config);

// An endpoint URL taken apart: scheme ("http", "https", or "" for a gRPC
// host:port), host (brackets kept for IPv6), port (0 if not given) and path.
struct EndpointUrl {
  std::string scheme;
  std::string host;
  int port = 0;
  std::string path;
};
Result<EndpointUrl> parse_endpoint(const std::string& endpoint);

// Pyroscope's application name of a service and its labels:
// `SERVICE{key=value,...}`, label names made [A-Za-z0-9_] as its labels
// must be, values stripped of what would end the name (`,` `}` `=`).
std::string pyroscope_application_name(const std::string& service,
                                       const std::vector<std::pair<std::string, std::string>>& labels);

}  // namespace omniprof
