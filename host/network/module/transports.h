// The module's factories (network/transport.h's NetworkModule), one file
// each: http_client.cpp, grpc_channel.cpp, page_server.cpp.
#pragma once

#include "network/transport.h"

namespace omniprof::network {

std::unique_ptr<HttpClient> make_http_client(const HttpClientOptions& options);
std::unique_ptr<GrpcChannel> make_grpc_channel(const GrpcChannelOptions& options);
Result<std::unique_ptr<PageServer>> serve_page(const PageServerOptions& options, std::function<Page()> page);

}  // namespace omniprof::network
