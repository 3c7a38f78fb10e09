#include "common/gzip.h"

#include <zlib.h>

#include <climits>
#include <vector>

namespace omniprof {

// protobuf cannot parse a message of 2 GiB or more, and zlib's counters are
// 32-bit: nothing this large is a profile.
constexpr size_t kMaxGzipBytes = INT_MAX;

// gzip (not raw deflate or zlib framing): what `go tool pprof` and every other
// pprof reader expect of a .pb.gz file.
Result<std::string> gzip_compress(const std::string& data, int level) {
  static_assert(kGzipLevel == Z_BEST_SPEED && kGzipLevelDefault == 6);
  z_stream stream{};
  // windowBits 15 + 16 selects the gzip wrapper; memLevel 8 is zlib's default.
  const int init = deflateInit2(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  if (init != Z_OK) return make_error("deflateInit2 failed (" + std::to_string(init) + ")");
  std::string out;
  out.resize(deflateBound(&stream, data.size()));
  // avail_in/avail_out are 32-bit; the callers keep data below 2 GiB (the
  // protobuf limit), and deflateBound of that fits as well.
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  // deflateBound guarantees a single Z_FINISH call completes the stream.
  const int rc = deflate(&stream, Z_FINISH);
  const size_t written = stream.total_out;
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) return make_error("deflate failed (" + std::to_string(rc) + ")");
  out.resize(written);
  return out;
}


bool has_gzip_magic(const std::string& data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

namespace {

// Owns a zlib inflate stream so every return path releases it.
class GzipInflater {
 public:
  // windowBits 15 + 16: accept the gzip wrapper only.
  GzipInflater() { initialized_ = inflateInit2(&stream_, 15 + 16) == Z_OK; }
  ~GzipInflater() {
    if (initialized_) inflateEnd(&stream_);
  }
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  bool initialized() const { return initialized_; }
  z_stream& stream() { return stream_; }

 private:
  z_stream stream_{};
  bool initialized_ = false;
};

}  // namespace

Result<std::string> gzip_decompress(const std::string& compressed) {
  GzipInflater inflater;
  if (!inflater.initialized()) return make_error("inflateInit2 failed");
  z_stream& stream = inflater.stream();
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());  // <= kMaxGzipBytes

  std::string out;
  std::vector<unsigned char> chunk(1 << 18);
  for (;;) {
    stream.next_out = chunk.data();
    stream.avail_out = static_cast<uInt>(chunk.size());
    const int rc = inflate(&stream, Z_NO_FLUSH);
    out.append(reinterpret_cast<const char*>(chunk.data()), chunk.size() - stream.avail_out);
    if (out.size() > kMaxGzipBytes) {
      return make_error("bad gzip data: decompresses to more than 2 GiB");
    }
    switch (rc) {
      case Z_OK:
        continue;
      case Z_STREAM_END:
        if (stream.avail_in == 0) return out;
        // gzip allows several members back to back (`cat a.gz b.gz`); Go's
        // reader accepts them, so this one does too.
        inflateReset(&stream);
        continue;
      case Z_BUF_ERROR:
        // No progress possible: with output space available, only because
        // the input ended before the gzip trailer.
        if (stream.avail_in == 0) {
          return make_error("bad gzip data: truncated (unexpected end of file)");
        }
        break;
      default:
        break;
    }
    return make_error(std::string("bad gzip data: ") +
                      (stream.msg != nullptr ? stream.msg : "inflate error " + std::to_string(rc)));
  }
}


}  // namespace omniprof
