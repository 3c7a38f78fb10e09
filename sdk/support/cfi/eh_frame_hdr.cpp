#include "omniprof/support/cfi/eh_frame_hdr.h"

#include <fmt/format.h>

#include "omniprof/support/cfi/pointer_encoding.h"

namespace omniprof::unwind {

Result<EhFrameHdr> parse_eh_frame_hdr(std::span<const uint8_t> bytes, uint64_t hdr_vaddr, std::string_view file) {
  ByteReader reader(bytes);
  const uint8_t version = reader.u8();
  const uint8_t eh_frame_ptr_encoding = reader.u8();
  const uint8_t fde_count_encoding = reader.u8();
  const uint8_t table_encoding = reader.u8();
  if (!reader.ok()) return make_error(fmt::format("{}: .eh_frame_hdr+0x0: truncated header ({} bytes)", file, bytes.size()));
  if (version != 1) return make_error(fmt::format("{}: .eh_frame_hdr+0x0: version {} (expected 1)", file, version));
  auto field_vaddr = [&] { return hdr_vaddr + static_cast<uint64_t>(reader.position() - bytes.data()); };
  auto field_offset = [&] { return static_cast<uint64_t>(reader.position() - bytes.data()); };

  EhFrameHdr hdr;
  // Every datarel value of .eh_frame_hdr is relative to the header's start.
  uint64_t offset = field_offset();
  auto eh_frame = read_encoded_pointer(reader, eh_frame_ptr_encoding, field_vaddr(), hdr_vaddr);
  if (!eh_frame) return make_error(fmt::format("{}: .eh_frame_hdr+{:#x}: eh_frame_ptr: {}", file, offset, eh_frame.error().message));
  hdr.eh_frame_vaddr = *eh_frame;
  if (fde_count_encoding == pe::kOmit || table_encoding == pe::kOmit) return hdr;

  offset = field_offset();
  auto count = read_encoded_pointer(reader, fde_count_encoding, field_vaddr(), hdr_vaddr);
  if (!count) return make_error(fmt::format("{}: .eh_frame_hdr+{:#x}: fde_count: {}", file, offset, count.error().message));
  // Each table entry is two values of at least 2 bytes (LEB128 is not valid
  // in a binary-search table, but a count bound by the bytes is all we need).
  if (*count > reader.remaining() / 2) {
    return make_error(fmt::format("{}: .eh_frame_hdr+{:#x}: fde_count {} does not fit in the {} bytes left", file,
                                  offset, *count, reader.remaining()));
  }
  hdr.fde_count = *count;
  for (uint64_t i = 0; i < hdr.fde_count; ++i) {
    offset = field_offset();
    auto initial_location = read_encoded_pointer(reader, table_encoding, field_vaddr(), hdr_vaddr);
    if (!initial_location) {
      return make_error(fmt::format("{}: .eh_frame_hdr+{:#x}: table entry {}: {}", file, offset, i,
                                    initial_location.error().message));
    }
    auto fde_address = read_encoded_pointer(reader, table_encoding, field_vaddr(), hdr_vaddr);
    if (!fde_address) {
      return make_error(fmt::format("{}: .eh_frame_hdr+{:#x}: table entry {}: {}", file, offset, i,
                                    fde_address.error().message));
    }
    if (!hdr.last_fde_vaddr || *fde_address > *hdr.last_fde_vaddr) hdr.last_fde_vaddr = *fde_address;
  }
  return hdr;
}

}  // namespace omniprof::unwind
