#include "omniprof/support/cfi/byte_reader.h"

namespace omniprof::unwind {

uint64_t ByteReader::odd_sized(size_t size) {
  if (size == 0 || size > 8 || remaining() < size) return fail<uint64_t>();
  uint64_t value = 0;
  std::memcpy(&value, pos_, size);
  pos_ += size;
  return value;
}

uint64_t ByteReader::uleb128_multibyte() {
  const uint8_t* start = pos_;
  uint64_t value = 0;
  unsigned shift = 0;
  while (true) {
    if (pos_ >= end_) {
      pos_ = start;
      return fail<uint64_t>();
    }
    const uint8_t byte = *pos_++;
    const uint64_t slice = byte & 0x7f;
    // Redundant zero padding is valid LEB128; bits beyond 64 are not.
    if (shift >= 64 ? slice != 0 : (shift == 63 && slice > 1)) {
      pos_ = start;
      return fail<uint64_t>();
    }
    if (shift < 64) value |= slice << shift;
    shift += 7;
    if ((byte & 0x80) == 0) return value;
  }
}

int64_t ByteReader::sleb128() {
  const uint8_t* start = pos_;
  uint64_t value = 0;
  unsigned shift = 0;
  uint8_t byte = 0;
  do {
    if (pos_ >= end_) {
      pos_ = start;
      return fail<int64_t>();
    }
    byte = *pos_++;
    const uint64_t slice = byte & 0x7f;
    // From bit 63 on only sign bits may follow (all zeros or all ones).
    if (shift >= 63 && slice != 0 && slice != 0x7f) {
      pos_ = start;
      return fail<int64_t>();
    }
    if (shift < 64) value |= slice << shift;
    shift += 7;
  } while ((byte & 0x80) != 0);
  if (shift < 64 && (byte & 0x40) != 0) value |= ~uint64_t{0} << shift;
  return static_cast<int64_t>(value);
}

std::span<const uint8_t> ByteReader::bytes(uint64_t size) {
  if (size > remaining()) {
    fail<int>();
    return {};
  }
  std::span<const uint8_t> result(pos_, static_cast<size_t>(size));
  pos_ += size;
  return result;
}

std::string_view ByteReader::c_string() {
  const void* nul = std::memchr(pos_, 0, remaining());
  if (nul == nullptr) {
    fail<int>();
    return {};
  }
  std::string_view text(reinterpret_cast<const char*>(pos_), static_cast<const uint8_t*>(nul) - pos_);
  pos_ = static_cast<const uint8_t*>(nul) + 1;
  return text;
}

}  // namespace omniprof::unwind
