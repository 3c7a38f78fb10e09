#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/byte_buffer.h>

#include "network/module/transports.h"

namespace omniprof::network {
namespace {

grpc::ByteBuffer byte_buffer_of(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string string_of(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& slice : slices) out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return out;
}

// The call as the generated stubs make it, with the serialized messages as
// they are: the host encodes and decodes them.
class ByteChannel : public GrpcChannel {
 public:
  explicit ByteChannel(const GrpcChannelOptions& options) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxSendMessageSize(options.max_send_bytes);
    arguments.SetString(GRPC_ARG_PRIMARY_USER_AGENT_STRING, options.user_agent);
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (options.tls) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = options.pem_root_certs;
      credentials = grpc::SslCredentials(ssl);
    } else {
      credentials = grpc::InsecureChannelCredentials();
    }
    channel_ = grpc::CreateCustomChannel(options.target, credentials, arguments);
  }

  GrpcAnswer unary_call(const std::string& method, const std::string& request, const Headers& metadata,
                        std::chrono::milliseconds timeout) override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
    for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
    const grpc::internal::RpcMethod rpc(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC);
    grpc::ByteBuffer response;
    const grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel_.get(), rpc, &context, byte_buffer_of(request), &response);
    GrpcAnswer answer;
    answer.code = static_cast<int>(status.error_code());
    answer.message = status.error_message();
    answer.details = status.error_details();
    if (status.ok()) answer.response = string_of(response);
    return answer;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace

std::unique_ptr<GrpcChannel> make_grpc_channel(const GrpcChannelOptions& options) {
  return std::make_unique<ByteChannel>(options);
}

}  // namespace omniprof::network
