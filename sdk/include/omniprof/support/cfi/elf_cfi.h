// Loading the CFI sections of an ELF file (its .eh_frame, and .debug_frame
// from the file or its separate debug file, possibly compressed) into
// buffers of their own, through the SDK's ElfFile, for the parser of
// dwarf_cfi.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/support/cfi/dwarf_cfi.h"

namespace omniprof::unwind {

// Section bytes owned by the loader.
struct CfiSection {
  CfiFormat format = CfiFormat::kEhFrame;
  std::string file;  // the file the bytes come from (the debug file for its .debug_frame)
  std::string name;  // ".eh_frame", ".debug_frame", ".zdebug_frame"
  std::unique_ptr<uint8_t[]> data;
  size_t size = 0;
  uint64_t vaddr = 0;
  std::optional<uint64_t> file_offset;  // absent when decompressed
  bool compressed = false;
  bool from_debug_file = false;
  bool through_eh_frame_hdr = false;  // found through PT_GNU_EH_FRAME, no section headers
  bool ends_at_terminator = false;

  CfiSectionView view() const;
};

// A [begin, end) range of executable addresses (PF_X PT_LOAD segments).
struct CodeRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Whether an FDE describes real code: a non-empty range that does not
// overflow and, when `code_ranges` is not empty, lies within one of them
// (FDEs of functions discarded at link time keep placeholder addresses in
// .debug_frame). Both the table builder and the function ranges use it.
bool fde_in_code(const Fde& fde, std::span<const CodeRange> code_ranges);

struct ElfCfi {
  std::string path;
  std::string build_id;    // hex, empty when the file has none
  std::string debug_file;  // the separate debug file consulted, "" when none
  std::vector<CodeRange> code_ranges;
  std::vector<CfiSection> sections;  // .eh_frame first when present, then .debug_frame
};

struct CfiReadOptions {
  std::string debug_root = "/usr/lib/debug";
  // Look for .debug_frame in the separate debug file (by build ID, then
  // .gnu_debuglink) when the file itself has none.
  bool use_debug_file = true;
};

// Reads the CFI sections of an x86-64 ELF file. A file without any is not an
// error: `sections` is empty.
Result<ElfCfi> read_elf_cfi(const std::string& path, const CfiReadOptions& options = {});

}  // namespace omniprof::unwind
