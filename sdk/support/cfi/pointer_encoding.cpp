#include "omniprof/support/cfi/pointer_encoding.h"

#include <fmt/format.h>

namespace omniprof::unwind {

std::string pointer_encoding_name(uint8_t encoding) {
  if (encoding == pe::kOmit) return "DW_EH_PE_omit (0xff)";
  std::string name;
  auto add = [&name](std::string_view part) {
    if (!name.empty()) name += '|';
    name += part;
  };
  if ((encoding & pe::kIndirect) != 0) add("DW_EH_PE_indirect");
  switch (encoding & 0x70) {
    case 0: break;
    case pe::kPcrel: add("DW_EH_PE_pcrel"); break;
    case pe::kTextrel: add("DW_EH_PE_textrel"); break;
    case pe::kDatarel: add("DW_EH_PE_datarel"); break;
    case pe::kFuncrel: add("DW_EH_PE_funcrel"); break;
    case pe::kAligned: add("DW_EH_PE_aligned"); break;
    default: add(fmt::format("application {:#x}", encoding & 0x70)); break;
  }
  switch (encoding & 0x0f) {
    case pe::kAbsptr: add("DW_EH_PE_absptr"); break;
    case pe::kUleb128: add("DW_EH_PE_uleb128"); break;
    case pe::kUdata2: add("DW_EH_PE_udata2"); break;
    case pe::kUdata4: add("DW_EH_PE_udata4"); break;
    case pe::kUdata8: add("DW_EH_PE_udata8"); break;
    case pe::kSleb128: add("DW_EH_PE_sleb128"); break;
    case pe::kSdata2: add("DW_EH_PE_sdata2"); break;
    case pe::kSdata4: add("DW_EH_PE_sdata4"); break;
    case pe::kSdata8: add("DW_EH_PE_sdata8"); break;
    default: add(fmt::format("format {:#x}", encoding & 0x0f)); break;
  }
  return fmt::format("{} ({:#04x})", name, encoding);
}

namespace {

// Reads the value part of an encoding (its low nibble). False for a format
// that does not exist.
bool read_encoded_format(ByteReader& reader, uint8_t encoding, uint8_t address_size, uint64_t& value) {
  switch (encoding & 0x0f) {
    case pe::kAbsptr: value = reader.fixed(address_size); return true;
    case pe::kUleb128: value = reader.uleb128(); return true;
    case pe::kUdata2: value = reader.u16(); return true;
    case pe::kUdata4: value = reader.u32(); return true;
    case pe::kUdata8: value = reader.u64(); return true;
    case pe::kSleb128: value = static_cast<uint64_t>(reader.sleb128()); return true;
    case pe::kSdata2: value = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(reader.u16()))); return true;
    case pe::kSdata4: value = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(reader.u32()))); return true;
    case pe::kSdata8: value = reader.u64(); return true;
    default: return false;
  }
}

}  // namespace

Result<uint64_t> read_encoded_pointer(ByteReader& reader, uint8_t encoding, uint64_t field_vaddr,
                                      std::optional<uint64_t> data_base, uint8_t address_size) {
  if (encoding == pe::kOmit) return make_error("pointer encoding DW_EH_PE_omit where a pointer is required");
  // An indirect pointer names a memory word holding the address, which only
  // exists at run time: the table is built from the file.
  if ((encoding & pe::kIndirect) != 0) {
    return make_error(fmt::format("pointer encoding {}: DW_EH_PE_indirect is not valid here",
                                  pointer_encoding_name(encoding)));
  }
  uint64_t value = 0;
  if (!read_encoded_format(reader, encoding, address_size, value)) {
    return make_error(fmt::format("pointer encoding {}: unknown value format", pointer_encoding_name(encoding)));
  }
  if (!reader.ok()) {
    return make_error(fmt::format("pointer encoded {} runs past the end of its entry", pointer_encoding_name(encoding)));
  }
  switch (encoding & 0x70) {
    case 0: return value;
    case pe::kPcrel: return field_vaddr + value;  // modulo 2^64, as the hardware computes it
    case pe::kDatarel:
      if (!data_base) {
        return make_error(fmt::format("pointer encoding {}: DW_EH_PE_datarel has no base in this section",
                                      pointer_encoding_name(encoding)));
      }
      return *data_base + value;
    case pe::kTextrel:
    case pe::kFuncrel:
    case pe::kAligned:
    default:
      return make_error(fmt::format("pointer encoding {} is not used by x86-64 CFI and is not supported",
                                    pointer_encoding_name(encoding)));
  }
}

bool skip_encoded_value(ByteReader& reader, uint8_t encoding, uint8_t address_size) {
  if (encoding == pe::kOmit) return true;
  uint64_t ignored = 0;
  return read_encoded_format(reader, encoding, address_size, ignored) && reader.ok();
}

}  // namespace omniprof::unwind
