// gzip (not raw deflate or zlib framing): what pprof files are, and what
// OTLP and Pyroscope take on the wire (Content-Encoding: gzip).
#pragma once

#include <string>

#include "omniprof/support/result.h"

namespace omniprof {

// The gzip encoding of `data` (below 2 GiB: protobuf's message limit).
Result<std::string> gzip_compress(const std::string& data);
// Whether `data` starts with the gzip magic bytes.
bool has_gzip_magic(const std::string& data);
// Decompresses gzip data (several members back to back are accepted, as Go's
// reader does); an error says what is wrong with it.
Result<std::string> gzip_decompress(const std::string& compressed);

}  // namespace omniprof
