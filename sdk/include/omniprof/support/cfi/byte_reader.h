// Bounds-checked little-endian reader over a byte span. A read past the end
// (or a LEB128 number that does not fit in 64 bits) returns 0 and latches a
// failure: callers read a whole field group, then check `ok()` once, which
// keeps the hot path free of per-read branches into error formatting.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace omniprof::unwind {

class ByteReader {
 public:
  ByteReader() = default;
  ByteReader(const uint8_t* begin, const uint8_t* end) : pos_(begin), end_(end) {}
  explicit ByteReader(std::span<const uint8_t> bytes) : pos_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool ok() const { return !failed_; }
  const uint8_t* position() const { return pos_; }
  const uint8_t* end() const { return end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - pos_); }
  bool at_end() const { return pos_ >= end_; }

  // The readers of fixed-size values are inline: parsing a section is mostly
  // these calls.
  uint8_t u8() {
    if (pos_ >= end_) return fail<uint8_t>();
    return *pos_++;
  }
  uint16_t u16() { return little_endian<uint16_t>(); }
  uint32_t u32() { return little_endian<uint32_t>(); }
  uint64_t u64() { return little_endian<uint64_t>(); }
  // Little-endian unsigned value of `size` (1..8) bytes.
  uint64_t fixed(size_t size) {
    switch (size) {
      case 1: return u8();
      case 2: return u16();
      case 4: return u32();
      case 8: return u64();
      default: return odd_sized(size);
    }
  }
  uint64_t uleb128() {
    if (pos_ < end_ && *pos_ < 0x80) return *pos_++;  // most values fit in one byte
    return uleb128_multibyte();
  }
  int64_t sleb128();
  // The next `size` bytes as a span (empty, and failed, when fewer remain).
  std::span<const uint8_t> bytes(uint64_t size);
  void skip(uint64_t size) { (void)bytes(size); }
  // A NUL-terminated string (without the NUL).
  std::string_view c_string();

 private:
  // x86-64 is the only target and ELF files of the other byte order are
  // rejected before any section is parsed, so host order is file order.
  template <typename T>
  T little_endian() {
    if (remaining() < sizeof(T)) return fail<T>();
    T value;
    std::memcpy(&value, pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  uint64_t odd_sized(size_t size);
  uint64_t uleb128_multibyte();

  template <typename T>
  T fail() {
    failed_ = true;
    pos_ = end_;
    return T{};
  }

  const uint8_t* pos_ = nullptr;
  const uint8_t* end_ = nullptr;
  bool failed_ = false;
};

}  // namespace omniprof::unwind
