// Reader of DWARF call-frame information (CFI): the CIEs and FDEs of
// .eh_frame (the copy the C++ runtime unwinds with, always loaded) and of
// .debug_frame (the DWARF debugging copy, in the file or in its separate
// debug file, possibly compressed).
//
// The parser works on bytes in memory (`parse_eh_frame`, `parse_debug_frame`)
// so tests can feed crafted sections; `read_elf_cfi` (elf_cfi.h) finds and
// loads those sections from an ELF file. Everything is bounds-checked, never a crash and
// never a silent cut: a malformed FDE or CIE costs that FDE (or the FDEs of
// that CIE), counted, with a message naming the file, the section and the
// byte offset; an entry whose length makes the rest of the section
// unreadable ends the walk there, keeping the FDEs before it, also with a
// message. Instructions are not run here: see cfa_program.h.
//
// `CfiSectionWalker` reads a section's FDEs one at a time without keeping
// them (the table builder's path: an FDE costs nothing once its range is
// noted); `parse_cfi` collects them all (tests, small sections).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/support/cfi/pointer_encoding.h"

namespace omniprof::unwind {

enum class CfiFormat : uint8_t {
  kEhFrame,     // .eh_frame: CIE id 0, relative CIE pointers, DW_EH_PE_* encodings
  kDebugFrame,  // .debug_frame: CIE id all ones, CIE pointers are section offsets
};

// One CFI section in memory plus what decoding it needs. The bytes are not
// owned: they must outlive every ParsedCfi made from this view.
struct CfiSectionView {
  CfiFormat format = CfiFormat::kEhFrame;
  std::span<const uint8_t> bytes;
  // Address of bytes[0] when the file is loaded at its link address: the
  // base of DW_EH_PE_pcrel. 0 for .debug_frame, which is not loaded.
  uint64_t vaddr = 0;
  std::string_view file = "<memory>";  // for messages
  std::string_view name;               // section name for messages; default from `format`
  // Where bytes[0] lies in the file, for messages; absent when the bytes were
  // decompressed (then offsets are offsets in the decompressed section).
  std::optional<uint64_t> file_offset;
  // Base of DW_EH_PE_datarel. The x86-64 psABI defines none for .eh_frame, so
  // an FDE using it is an error unless a caller knows better.
  std::optional<uint64_t> data_base;
  // .eh_frame found through PT_GNU_EH_FRAME without section headers: the
  // size is not known, so the first zero terminator ends the section.
  bool ends_at_terminator = false;
};

struct Cie {
  uint64_t offset = 0;  // of the entry's length field in the section
  uint8_t version = 0;
  uint8_t address_size = 8;
  uint8_t fde_pointer_encoding = pe::kAbsptr;  // 'R'
  uint8_t lsda_encoding = pe::kOmit;           // 'L'
  uint8_t personality_encoding = pe::kOmit;    // 'P'
  bool has_augmentation_data = false;          // 'z'
  bool signal_frame = false;                   // 'S': FDEs describe signal trampolines
  bool has_eh_data = false;                    // "eh": old GCC, a pointer after the string
  bool dwarf64 = false;                        // 0xffffffff length escape
  uint64_t code_alignment_factor = 1;
  int64_t data_alignment_factor = 1;
  uint64_t return_address_register = 16;
  std::string_view augmentation;                  // points into the section
  std::span<const uint8_t> initial_instructions;  // points into the section
};

struct Fde {
  uint64_t offset = 0;  // of the entry's length field in the section
  uint32_t cie_index = 0;  // into ParsedCfi::cies
  uint64_t pc_begin = 0;
  uint64_t pc_end = 0;  // exclusive; pc_begin + range, saturated at 2^64-1 (tombstones)
  bool range_overflows = false;  // pc_begin + range does not fit in 64 bits
  std::span<const uint8_t> instructions;  // points into the section
};

// An entry of a section that could not be used, and why.
struct CfiProblem {
  uint64_t offset = 0;  // of the entry's length field in the section
  std::string message;  // "file: .eh_frame+0x1a4 (file offset 0x1a90e4): ...": where and why
};

// The CIEs and FDEs of one section, in section order. Spans point into the
// section bytes of the view it was parsed from, which must outlive this.
// (CfiSectionWalker fills the CIEs only: its FDEs are handed out one by one.)
struct ParsedCfi {
  CfiFormat format = CfiFormat::kEhFrame;
  std::span<const uint8_t> bytes;
  uint64_t vaddr = 0;
  std::optional<uint64_t> file_offset;
  std::optional<uint64_t> data_base;
  std::string file;  // owned copies: the view's strings may be temporaries
  std::string name;
  std::vector<Cie> cies;
  std::vector<Fde> fdes;
  size_t zero_terminators = 0;
  // FDEs skipped because they or their CIE are malformed (bad CIE pointer,
  // encoding, augmentation, length too short for its fields...), and the
  // first of them.
  size_t malformed_fdes = 0;
  std::optional<CfiProblem> first_malformed;
  // The walk ended before the section did: an entry length ran past the end
  // of the section (or was a reserved value), so nothing after it can be
  // found. The FDEs before it are kept.
  std::optional<CfiProblem> cut_short;

  // Offset of `p` (which points into the section) from the section start.
  uint64_t offset_of(const uint8_t* p) const { return static_cast<uint64_t>(p - bytes.data()); }
  // "file: .eh_frame+0x1a4 (file offset 0x1a90e4)": where an error is.
  std::string where(uint64_t section_offset) const;
};

// Reads one section's entries in two passes over its bytes: `read_cies`
// parses every CIE (and counts the FDEs), then `next_fde` decodes the FDEs
// in section order, one at a time, skipping and counting malformed ones.
// Nothing per FDE is kept, so memory does not grow with the section.
class CfiSectionWalker {
 public:
  explicit CfiSectionWalker(const CfiSectionView& section);
  CfiSectionWalker(CfiSectionWalker&&) noexcept;
  CfiSectionWalker& operator=(CfiSectionWalker&&) noexcept;
  ~CfiSectionWalker();

  // First pass. Call once, before next_fde.
  void read_cies();
  // FDE entries found by read_cies (malformed ones included).
  size_t fde_entries() const;
  // The next well-formed FDE, false at the end of the walk.
  bool next_fde(Fde& fde);
  // Starts next_fde over from the first entry (counts of malformed FDEs
  // start over too).
  void rewind();
  // Decodes again the FDE at `offset`, which next_fde returned before.
  Fde fde_at(uint64_t offset) const;

  // The section, its CIEs and its problems; `fdes` stays empty.
  const ParsedCfi& cfi() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Every CIE and FDE of a section. Never fails on malformed entries (see
// ParsedCfi::malformed_fdes and cut_short); the Result is for the API's
// sake.
Result<ParsedCfi> parse_cfi(const CfiSectionView& section);

// Convenience entry points for bytes in memory (tests, fuzzing).
Result<ParsedCfi> parse_eh_frame(std::span<const uint8_t> bytes, uint64_t section_vaddr,
                                 std::string_view file = "<memory>");
Result<ParsedCfi> parse_debug_frame(std::span<const uint8_t> bytes, std::string_view file = "<memory>");

}  // namespace omniprof::unwind
