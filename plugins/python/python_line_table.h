// CPython's code object line tables, decoded: the source line of an
// instruction offset.
//
// The instruction offset (what the BPF walk records per frame, a u32):
//   2.7 to 3.9   PyFrameObject.f_lasti: the byte offset of the last
//                instruction started in co_code (-1 before the first: recorded
//                as 0xffffffff).
//   3.10         PyFrameObject.f_lasti: the same in code units (2 bytes each).
//   3.11, 3.12   _PyInterpreterFrame.prev_instr − (code object address +
//                co_code_adaptive), in bytes (−2 before the first instruction:
//                recorded as 0xfffffffe).
//   3.13+        _PyInterpreterFrame.instr_ptr − (code object address +
//                co_code_adaptive), in bytes.
// An offset outside the table, or on an entry without a line, has no line
// (nullopt); the reader shows co_firstlineno for it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace omniprof::python {

enum class LineTableFormat {
  kLnotab27,      // 2.7: co_lnotab, (byte delta u8, line delta u8) pairs
  kLnotab36,      // 3.6 to 3.9: co_lnotab, line deltas signed (int8)
  kLinetable310,  // 3.10: co_linetable, (byte delta u8, line delta int8, -128: none)
  kLocations311,  // 3.11+: co_linetable location entries, lengths in code units
};

// The format of a version's table.
LineTableFormat line_table_format(int major, int minor);

// The line of `instruction_offset` (as defined above for the version whose
// format this is), or nullopt. Never reads past `table`.
std::optional<int> line_for_instruction(LineTableFormat format, std::span<const uint8_t> table,
                                        int first_line, uint32_t instruction_offset);

}  // namespace omniprof::python
