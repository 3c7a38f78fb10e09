#include "python_line_table.h"

namespace omniprof::python {
namespace {

// co_lnotab (Objects/lnotab_notes.txt up to 3.9, PyCode_Addr2Line): the line
// of byte offset q is first_line plus every line delta whose pair's
// cumulative byte offset is <= q.
std::optional<int> lnotab_line(std::span<const uint8_t> table, int first_line, uint32_t offset,
                               bool signed_deltas) {
  int64_t line = first_line;
  uint64_t address = 0;
  for (std::size_t i = 0; i + 1 < table.size(); i += 2) {
    address += table[i];
    if (address > offset) break;
    line += signed_deltas ? static_cast<int8_t>(table[i + 1]) : table[i + 1];
  }
  return static_cast<int>(line);
}

// 3.10 co_linetable (Objects/lnotab_notes.txt of 3.10, codeobject.c
// advance()): each pair covers [start, start + byte delta) and moves the
// line by its delta, -128 marking a range without a line. Offsets are bytes;
// f_lasti counts code units.
std::optional<int> linetable310_line(std::span<const uint8_t> table, int first_line,
                                     uint32_t offset_units) {
  uint64_t target = static_cast<uint64_t>(offset_units) * 2;
  int64_t computed_line = first_line;
  uint64_t end = 0;
  for (std::size_t i = 0; i + 1 < table.size(); i += 2) {
    uint64_t start = end;
    end += table[i];
    auto delta = static_cast<int8_t>(table[i + 1]);
    std::optional<int> line;
    if (delta != -128) {
      computed_line += delta;
      line = static_cast<int>(computed_line);
    }
    if (target >= start && target < end) return line;
  }
  return std::nullopt;
}

// Reads the 3.11 location table's varint (6 bits a byte, 0x40 continues).
bool read_varint(std::span<const uint8_t> table, std::size_t& at, uint64_t& value) {
  value = 0;
  unsigned shift = 0;
  while (at < table.size()) {
    uint8_t byte = table[at++];
    if (shift < 64) value |= static_cast<uint64_t>(byte & 63) << shift;
    shift += 6;
    if (!(byte & 64)) return true;
  }
  return false;
}

bool read_svarint(std::span<const uint8_t> table, std::size_t& at, int64_t& value) {
  uint64_t raw = 0;
  if (!read_varint(table, at, raw)) return false;
  value = (raw & 1) ? -static_cast<int64_t>(raw >> 1) : static_cast<int64_t>(raw >> 1);
  return true;
}

// 3.11+ location table (InternalDocs/locations.md, Objects/codeobject.c
// advance_with_locations): each entry starts with a byte 1CCCCLLL, covering
// LLL+1 code units; code 15: no location, 14: long form (svarint line delta,
// varint end line, column, end column), 13: no columns (svarint line delta),
// 10-12: one line form (line delta code-10, 2 column bytes), 0-9: short form
// (same line, 1 column byte).
std::optional<int> locations311_line(std::span<const uint8_t> table, int first_line,
                                     uint32_t offset_bytes) {
  uint64_t target = offset_bytes / 2;
  int64_t line = first_line;
  uint64_t end = 0;
  std::size_t at = 0;
  while (at < table.size()) {
    uint8_t first = table[at++];
    if (!(first & 0x80)) return std::nullopt;  // not an entry start: corrupt table
    unsigned code = (first >> 3) & 15;
    uint64_t start = end;
    end += (first & 7) + 1;
    bool has_line = true;
    int64_t delta = 0;
    uint64_t skip = 0;
    switch (code) {
      case 15:
        has_line = false;
        break;
      case 14:
        if (!read_svarint(table, at, delta)) return std::nullopt;
        for (int k = 0; k < 3; ++k) {
          if (!read_varint(table, at, skip)) return std::nullopt;
        }
        break;
      case 13:
        if (!read_svarint(table, at, delta)) return std::nullopt;
        break;
      case 10:
      case 11:
      case 12:
        delta = code - 10;
        at += 2;
        break;
      default:
        at += 1;
        break;
    }
    if (at > table.size()) return std::nullopt;
    line += delta;
    if (target >= start && target < end) {
      if (!has_line) return std::nullopt;
      return static_cast<int>(line);
    }
  }
  return std::nullopt;
}

}  // namespace

LineTableFormat line_table_format(int major, int minor) {
  if (major == 2) return LineTableFormat::kLnotab27;
  if (minor <= 9) return LineTableFormat::kLnotab36;
  if (minor == 10) return LineTableFormat::kLinetable310;
  return LineTableFormat::kLocations311;
}

std::optional<int> line_for_instruction(LineTableFormat format, std::span<const uint8_t> table,
                                        int first_line, uint32_t instruction_offset) {
  switch (format) {
    case LineTableFormat::kLnotab27:
    case LineTableFormat::kLnotab36:
      // f_lasti == -1: the frame has not started an instruction yet.
      if (instruction_offset == UINT32_MAX) return std::nullopt;
      return lnotab_line(table, first_line, instruction_offset,
                         format == LineTableFormat::kLnotab36);
    case LineTableFormat::kLinetable310:
      return linetable310_line(table, first_line, instruction_offset);
    case LineTableFormat::kLocations311:
      return locations311_line(table, first_line, instruction_offset);
  }
  return std::nullopt;
}

}  // namespace omniprof::python
