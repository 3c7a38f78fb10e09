// DW_EH_PE_* pointer encodings of .eh_frame (LSB 5.0, "DWARF Extensions").
// The low nibble is the format, the high nibble how the value applies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "omniprof/support/result.h"
#include "omniprof/support/cfi/byte_reader.h"

namespace omniprof::unwind {

namespace pe {
inline constexpr uint8_t kAbsptr = 0x00;
inline constexpr uint8_t kUleb128 = 0x01;
inline constexpr uint8_t kUdata2 = 0x02;
inline constexpr uint8_t kUdata4 = 0x03;
inline constexpr uint8_t kUdata8 = 0x04;
inline constexpr uint8_t kSleb128 = 0x09;
inline constexpr uint8_t kSdata2 = 0x0a;
inline constexpr uint8_t kSdata4 = 0x0b;
inline constexpr uint8_t kSdata8 = 0x0c;
inline constexpr uint8_t kPcrel = 0x10;
inline constexpr uint8_t kTextrel = 0x20;
inline constexpr uint8_t kDatarel = 0x30;
inline constexpr uint8_t kFuncrel = 0x40;
inline constexpr uint8_t kAligned = 0x50;
inline constexpr uint8_t kIndirect = 0x80;
inline constexpr uint8_t kOmit = 0xff;
}  // namespace pe

// "DW_EH_PE_pcrel|DW_EH_PE_sdata4 (0x1b)": for error messages.
std::string pointer_encoding_name(uint8_t encoding);

// Decodes one DW_EH_PE_* value at the reader's position. `field_vaddr` is the
// run-time address of the field (pcrel base). Rejects what x86-64 CFI cannot
// use, by name: indirect, textrel, funcrel, aligned, omit, datarel without a
// base. Returns the error text (without location) or the value.
Result<uint64_t> read_encoded_pointer(ByteReader& reader, uint8_t encoding, uint64_t field_vaddr,
                                      std::optional<uint64_t> data_base, uint8_t address_size = 8);

// Skips one encoded value (a personality pointer we never dereference).
// False for an unknown format or a value running past the data.
bool skip_encoded_value(ByteReader& reader, uint8_t encoding, uint8_t address_size);

}  // namespace omniprof::unwind
