// Compact unwind tables for the native (DWARF) unwinder on x86-64.
//
// A table is one ELF file's CFI reduced to what a BPF stack walker can
// evaluate: per address range, how to compute the CFA (RSP or RBP plus an
// offset, or one of the two PLT expressions) and where the caller's RBP is.
// The return address is always at CFA-8 on x86-64, so it needs no column;
// frames where it is not become kUnsupported. Rows are sorted by pc, a row
// applies from its pc up to the next row's pc, and a kEndOfFunction marker
// ends every function not immediately followed by another.
// docs/unwind-table-format.md describes the text form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/support/cfi/elf_cfi.h"

namespace omniprof::unwind {

enum class CfaRule : uint8_t {
  kRsp,            // CFA = RSP + cfa_offset
  kRbp,            // CFA = RBP + cfa_offset
  kPltExpression,  // the x86-64 PLT expression; cfa_offset holds the variant (10 or 11)
  kEndOfFunction,  // marker at the end of a function with a gap after it: no CFI here
  kOutermost,      // the return address is undefined: bottom of the stack, e.g. _start
  kUnsupported,    // a rule BPF cannot evaluate: stop, or fall back to frame pointers
};

enum class RbpRule : uint8_t {
  kUnchanged,    // the caller's RBP is the current RBP
  kAtCfaOffset,  // the caller's RBP is saved at CFA + rbp_offset
  kUnsupported,  // in another register, an expression, undefined...
};

struct UnwindRow {
  uint64_t pc = 0;  // link-time address (as in the ELF file) where the row starts
  CfaRule cfa = CfaRule::kRsp;
  RbpRule rbp = RbpRule::kUnchanged;
  int32_t cfa_offset = 0;  // 0 unless cfa is kRsp, kRbp or kPltExpression
  int32_t rbp_offset = 0;  // 0 unless rbp is kAtCfaOffset

  bool operator==(const UnwindRow&) const = default;
  // Same rule, whatever the pc: neighbours with the same rule are merged.
  bool same_rule(const UnwindRow& other) const {
    return cfa == other.cfa && rbp == other.rbp && cfa_offset == other.cfa_offset && rbp_offset == other.rbp_offset;
  }
};

// Where the rows of a table came from.
struct TableSource {
  std::string file;     // the ELF file or its separate debug file
  std::string section;  // ".eh_frame", ".debug_frame", ".zdebug_frame"
  bool compressed = false;
  bool from_debug_file = false;
  bool through_eh_frame_hdr = false;  // .eh_frame located through PT_GNU_EH_FRAME
  size_t fdes = 0;       // FDE entries in the section (malformed ones included)
  size_t fdes_used = 0;  // FDEs that contributed rows (others are covered or outside the code)
};

struct UnwindTableStats {
  size_t cies = 0;
  size_t fdes = 0;                 // FDE entries, malformed ones included
  size_t signal_frame_fdes = 0;    // FDEs of 'S' CIEs (signal trampolines)
  size_t fdes_outside_code = 0;    // empty, overflowing or outside every executable segment: skipped
  size_t fdes_covered = 0;         // wholly covered by .eh_frame or an earlier FDE: skipped
  size_t rows_before_merge = 0;    // rows produced, markers included, before identical neighbours merged
  size_t unsupported_cfa = 0;      // rows (before merge) with CfaRule::kUnsupported
  size_t unsupported_rbp = 0;      // rows (before merge) with RbpRule::kUnsupported
  size_t plt_rows = 0;             // rows (before merge) with CfaRule::kPltExpression
  size_t outermost_rows = 0;       // rows (before merge) with CfaRule::kOutermost
  // FDEs skipped because they cannot be trusted: malformed fields, a CIE
  // pointer to no CIE, a malformed CIE, instructions that are unknown,
  // truncated or invalid on x86-64. Every other FDE is kept.
  size_t fdes_malformed = 0;
  // Sections whose walk ended early: an entry length ran past the section
  // end, so the entries after it cannot be found (the FDEs before it are kept).
  size_t sections_cut_short = 0;
};

struct UnwindTable {
  std::string path;
  std::string build_id;
  std::string debug_file;  // separate debug file consulted, "" when none
  // The file has no CFI at all (JIT output, stripped code): the walker uses
  // frame pointers there. Not an error.
  bool no_cfi = false;
  std::vector<UnwindRow> rows;
  std::vector<TableSource> sources;
  UnwindTableStats stats;
  // The first malformed FDE or cut section, "" when there is none:
  // "file: .eh_frame+0x2f (file offset 0x1a8f6f): why".
  std::string first_problem;

  // The row in effect at `pc` (the last row starting at or before it), or
  // nullptr before the first row. A marker row means "no CFI here".
  const UnwindRow* find(uint64_t pc) const;
};

struct BuildOptions {
  std::string debug_root = "/usr/lib/debug";  // for DebugFileFinder
  bool use_debug_file = true;  // read .debug_frame from the separate debug file
};

class UnwindTableBuilder {
 public:
  // Reads the file's .eh_frame and .debug_frame (its own, or its separate
  // debug file's) and builds the table. .eh_frame wins where both describe
  // an address; .debug_frame adds what .eh_frame lacks. A malformed FDE or
  // CIE costs that FDE (stats.fdes_malformed, first_problem), not the table;
  // errors are for files that cannot be read at all.
  //
  // Memory: the FDEs are read twice from the section bytes rather than
  // kept (24 bytes per FDE stay, its range and offset), and the row vector is
  // sized once from a scan of the instructions, so the peak of a build is
  // the rows plus the sections plus 24 bytes per FDE.
  static Result<UnwindTable> build(const std::string& path, const BuildOptions& options = {});

  // The same from sections already in memory, in priority order (the first
  // section wins where several describe an address). `code_ranges` limits
  // FDEs to executable addresses (FDEs of functions discarded at link time
  // keep placeholder addresses in .debug_frame); empty means no limit.
  static Result<UnwindTable> build_from_sections(std::span<const CfiSectionView> sections,
                                                 std::span<const CodeRange> code_ranges = {});
};

// Recognises the two CFA expressions of x86-64 lazy-binding PLT entries:
//   DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
//   DW_OP_lit11 (or DW_OP_lit10); DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
// that is CFA = RSP + 8 + ((RIP & 15) >= 11 ? 8 : 0). Returns 11 or 10.
std::optional<uint8_t> match_plt_cfa_expression(std::span<const uint8_t> expression);

// Text form (docs/unwind-table-format.md): a header line, then one line per row.
void print_unwind_table(const UnwindTable& table, std::ostream& out);
// One row without its trailing newline: "0x000000000001a2b0 cfa=rsp+8 rbp=unchanged".
std::string format_unwind_row(const UnwindRow& row);

}  // namespace omniprof::unwind
