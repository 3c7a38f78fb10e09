// The one symbol network.so exports (the rest is hidden: -fvisibility=hidden
// in host/network/module/CMakeLists.txt).
#include "network/module/transports.h"

namespace {

const omniprof::network::NetworkModule kModule{
    OMNIPROF_VERSION,
    omniprof::network::make_http_client,
    omniprof::network::make_grpc_channel,
    omniprof::network::serve_page,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const omniprof::network::NetworkModule* omniprof_network_module() {
  return &kModule;
}
