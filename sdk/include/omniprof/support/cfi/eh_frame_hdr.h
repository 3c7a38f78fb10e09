// .eh_frame_hdr (what PT_GNU_EH_FRAME points at): version 1, then the
// encoded address of .eh_frame and a binary-search table of FDEs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "omniprof/support/result.h"

namespace omniprof::unwind {

struct EhFrameHdr {
  uint64_t eh_frame_vaddr = 0;
  uint64_t fde_count = 0;  // 0 when the table is omitted
  // Address of the FDE with the highest address in the table: the end of
  // .eh_frame is at most that FDE's end. Absent without a table.
  std::optional<uint64_t> last_fde_vaddr;
};
Result<EhFrameHdr> parse_eh_frame_hdr(std::span<const uint8_t> bytes, uint64_t hdr_vaddr,
                                      std::string_view file = "<memory>");

}  // namespace omniprof::unwind
