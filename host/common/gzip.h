// gzip (not raw deflate or zlib framing): what pprof files are, and what
// OTLP and Pyroscope take on the wire (Content-Encoding: gzip).
#pragma once

#include <string>

#include "omniprof/support/result.h"

namespace omniprof {

// zlib's fastest level, the one Go's runtime/pprof writes profiles with.
// `run` compresses each round on the thread that drains and names them: at
// zlib's default (6) that was ~10% of its CPU in issue 19's interpreter
// scene (perf); level 1 takes about a third of the time for ~7% more bytes
// (bench/export_cost prints both).
constexpr int kGzipLevel = 1;
constexpr int kGzipLevelDefault = 6;  // zlib's Z_DEFAULT_COMPRESSION, for comparison

// The gzip encoding of `data` (below 2 GiB: protobuf's message limit) at
// zlib level `level` (0-9).
Result<std::string> gzip_compress(const std::string& data, int level = kGzipLevel);
// Whether `data` starts with the gzip magic bytes.
bool has_gzip_magic(const std::string& data);
// Decompresses gzip data (several members back to back are accepted, as Go's
// reader does); an error says what is wrong with it.
Result<std::string> gzip_decompress(const std::string& compressed);

}  // namespace omniprof
