#include "unwind/unwind_table.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "unwind/cfa_program.h"

namespace omniprof::unwind {
namespace {

bool fits_int32(int64_t value) {
  return value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max();
}

// The return address column must say what the x86-64 call instruction did:
// the return address is at CFA-8. No rule at all means the same.
bool return_address_at_cfa_minus_8(const RegisterRule& rule) {
  return rule.kind == RegisterRule::Kind::kUnspecified ||
         (rule.kind == RegisterRule::Kind::kOffset && rule.value == -8);
}

// The walker sets the caller's RSP to the CFA, which is what the CFA means
// on x86-64 unless a rule moves RSP elsewhere (setcontext-like code).
bool rsp_is_cfa(const RegisterRule& rule) {
  return rule.kind == RegisterRule::Kind::kUnspecified ||
         (rule.kind == RegisterRule::Kind::kValOffset && rule.value == 0);
}

UnwindRow to_unwind_row(uint64_t pc, const FrameState& state) {
  UnwindRow row;
  row.pc = pc;
  if (state.return_address.kind == RegisterRule::Kind::kUndefined) {
    row.cfa = CfaRule::kOutermost;  // nothing above this frame: its other rules do not matter
    return row;
  }
  switch (state.rbp.kind) {
    case RegisterRule::Kind::kUnspecified:
    case RegisterRule::Kind::kSameValue:
      row.rbp = RbpRule::kUnchanged;
      break;
    case RegisterRule::Kind::kOffset:
      if (fits_int32(state.rbp.value)) {
        row.rbp = RbpRule::kAtCfaOffset;
        row.rbp_offset = static_cast<int32_t>(state.rbp.value);
      } else {
        row.rbp = RbpRule::kUnsupported;
      }
      break;
    default:
      row.rbp = RbpRule::kUnsupported;
      break;
  }
  row.cfa = CfaRule::kUnsupported;
  if (!return_address_at_cfa_minus_8(state.return_address) || !rsp_is_cfa(state.rsp)) return row;
  if (state.cfa.kind == CfaDefinition::Kind::kExpression) {
    if (auto variant = match_plt_cfa_expression(state.cfa.expression)) {
      row.cfa = CfaRule::kPltExpression;
      row.cfa_offset = *variant;
    }
    return row;
  }
  if (!fits_int32(state.cfa.offset)) return row;
  if (state.cfa.reg == x86_64_register::kRsp) {
    row.cfa = CfaRule::kRsp;
  } else if (state.cfa.reg == x86_64_register::kRbp) {
    row.cfa = CfaRule::kRbp;
  } else {
    return row;  // CFA in another register (signal frames, context switches)
  }
  row.cfa_offset = static_cast<int32_t>(state.cfa.offset);
  return row;
}

UnwindRow end_of_function_marker(uint64_t pc) {
  UnwindRow row;
  row.pc = pc;
  row.cfa = CfaRule::kEndOfFunction;
  return row;
}

bool in_code(const Fde& fde, std::span<const CodeRange> code_ranges) {
  if (fde.range_overflows || fde.pc_begin >= fde.pc_end) return false;
  if (code_ranges.empty()) return true;
  for (const CodeRange& range : code_ranges) {
    if (fde.pc_begin >= range.begin && fde.pc_end <= range.end) return true;
  }
  return false;
}

// Part of an FDE's range that contributes rows: FDEs are cut where a section
// of higher priority, or an FDE of the same section starting earlier,
// already describes the addresses.
struct Piece {
  uint64_t begin;
  uint64_t end;
  uint32_t section;
  uint32_t fde;
};

struct Range {
  uint64_t begin;
  uint64_t end;
};

// Appends to `pieces` the parts of [begin, end) that `covered` (sorted,
// disjoint) does not hold. Returns how many were appended.
size_t append_uncovered(uint64_t begin, uint64_t end, const std::vector<Range>& covered, uint32_t section,
                        uint32_t fde, std::vector<Piece>& pieces) {
  size_t added = 0;
  auto it = std::upper_bound(covered.begin(), covered.end(), begin,
                             [](uint64_t pc, const Range& range) { return pc < range.end; });
  uint64_t cursor = begin;
  for (; it != covered.end() && it->begin < end; ++it) {
    if (it->begin > cursor) {
      pieces.push_back(Piece{cursor, it->begin, section, fde});
      ++added;
    }
    cursor = std::max(cursor, it->end);
    if (cursor >= end) break;
  }
  if (cursor < end) {
    pieces.push_back(Piece{cursor, end, section, fde});
    ++added;
  }
  return added;
}

// Union of two sorted lists of disjoint ranges.
std::vector<Range> merge_ranges(const std::vector<Range>& a, const std::vector<Range>& b) {
  std::vector<Range> all;
  all.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(all),
             [](const Range& x, const Range& y) { return x.begin < y.begin; });
  std::vector<Range> merged;
  merged.reserve(all.size());
  for (const Range& range : all) {
    if (!merged.empty() && range.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, range.end);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

struct SectionState {
  ParsedCfi cfi;
  std::vector<FrameState> cie_states;
  std::vector<uint8_t> cie_state_ready;
};

// Collects rows, merging a row into its predecessor when the rule is the
// same, and keeps the before-merge statistics.
class RowSink {
 public:
  RowSink(std::vector<UnwindRow>& rows, UnwindTableStats& stats) : rows_(rows), stats_(stats) {}

  void add(const UnwindRow& row) {
    ++stats_.rows_before_merge;
    switch (row.cfa) {
      case CfaRule::kUnsupported: ++stats_.unsupported_cfa; break;
      case CfaRule::kPltExpression: ++stats_.plt_rows; break;
      case CfaRule::kOutermost: ++stats_.outermost_rows; break;
      default: break;
    }
    if (row.rbp == RbpRule::kUnsupported) ++stats_.unsupported_rbp;
    // Compared with a copy of the last row, not with rows_.back(): reading
    // back the row just stored stalls on store forwarding.
    if (have_last_ && last_.same_rule(row)) return;
    rows_.push_back(row);
    last_ = row;
    have_last_ = true;
  }

 private:
  std::vector<UnwindRow>& rows_;
  UnwindTableStats& stats_;
  UnwindRow last_;
  bool have_last_ = false;
};

}  // namespace

std::optional<uint8_t> match_plt_cfa_expression(std::span<const uint8_t> expression) {
  // DW_OP_breg7 8, DW_OP_breg16 0, DW_OP_lit15, DW_OP_and, DW_OP_lit11 or
  // DW_OP_lit10, DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus.
  static constexpr std::array<uint8_t, 11> kPlt11 = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a,
                                                     0x3b, 0x2a, 0x33, 0x24, 0x22};
  constexpr size_t kVariantIndex = 6;
  if (expression.size() != kPlt11.size()) return std::nullopt;
  for (size_t i = 0; i < kPlt11.size(); ++i) {
    if (i == kVariantIndex) continue;
    if (expression[i] != kPlt11[i]) return std::nullopt;
  }
  const uint8_t literal = expression[kVariantIndex];  // DW_OP_lit0 is 0x30
  if (literal == 0x3b) return 11;
  if (literal == 0x3a) return 10;
  return std::nullopt;
}

const UnwindRow* UnwindTable::find(uint64_t pc) const {
  auto it = std::upper_bound(rows.begin(), rows.end(), pc, [](uint64_t value, const UnwindRow& row) {
    return value < row.pc;
  });
  if (it == rows.begin()) return nullptr;
  return &*(it - 1);
}

Result<UnwindTable> UnwindTableBuilder::build_from_sections(std::span<const CfiSectionView> sections,
                                                            std::span<const CodeRange> code_ranges) {
  UnwindTable table;
  std::vector<SectionState> parsed;
  parsed.reserve(sections.size());
  size_t total_fdes = 0;
  for (const CfiSectionView& view : sections) {
    auto cfi = parse_cfi(view);
    if (!cfi) return cfi.error();
    SectionState state;
    state.cfi = std::move(*cfi);
    state.cie_states.resize(state.cfi.cies.size());
    state.cie_state_ready.assign(state.cfi.cies.size(), 0);
    table.stats.cies += state.cfi.cies.size();
    table.stats.fdes += state.cfi.fdes.size();
    total_fdes += state.cfi.fdes.size();
    TableSource source;
    source.file = state.cfi.file;
    source.section = state.cfi.name;
    source.fdes = state.cfi.fdes.size();
    table.sources.push_back(std::move(source));
    parsed.push_back(std::move(state));
  }
  table.no_cfi = total_fdes == 0;

  // Cut every FDE down to the addresses no earlier section and no earlier
  // FDE of its own section describes.
  std::vector<Piece> pieces;
  pieces.reserve(total_fdes);
  std::vector<Range> covered;  // by the sections already processed
  std::vector<uint32_t> order;
  for (uint32_t section_index = 0; section_index < parsed.size(); ++section_index) {
    const ParsedCfi& cfi = parsed[section_index].cfi;
    order.clear();
    for (uint32_t i = 0; i < cfi.fdes.size(); ++i) {
      if (cfi.cies[cfi.fdes[i].cie_index].signal_frame) ++table.stats.signal_frame_fdes;
      if (in_code(cfi.fdes[i], code_ranges)) {
        order.push_back(i);
      } else {
        ++table.stats.fdes_outside_code;
      }
    }
    std::stable_sort(order.begin(), order.end(),
                     [&cfi](uint32_t a, uint32_t b) { return cfi.fdes[a].pc_begin < cfi.fdes[b].pc_begin; });
    std::vector<Range> own;
    own.reserve(order.size());
    uint64_t own_end = 0;  // end of what earlier FDEs of this section cover
    for (const uint32_t fde_index : order) {
      const Fde& fde = cfi.fdes[fde_index];
      const uint64_t begin = std::max(fde.pc_begin, own_end);
      if (begin >= fde.pc_end || append_uncovered(begin, fde.pc_end, covered, section_index, fde_index, pieces) == 0) {
        ++table.stats.fdes_covered;
        own_end = std::max(own_end, fde.pc_end);
        continue;
      }
      ++table.sources[section_index].fdes_used;
      if (!own.empty() && begin <= own.back().end) {
        own.back().end = std::max(own.back().end, fde.pc_end);
      } else {
        own.push_back(Range{begin, fde.pc_end});
      }
      own_end = std::max(own_end, fde.pc_end);
    }
    if (section_index + 1 < parsed.size()) covered = merge_ranges(covered, own);
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });

  // Run each piece's FDE program and append its rows, clipped to the piece.
  // Compilers emit about one row per 5 bytes of CFI (libc, libstdc++,
  // libpython: 4.6 to 5.4); reserving one per 4 bytes avoids regrowth, which
  // would copy the rows and touch twice the fresh pages.
  size_t cfi_bytes = 0;
  for (const SectionState& section : parsed) cfi_bytes += section.cfi.bytes.size();
  table.rows.reserve(std::max(pieces.size() * 2, cfi_bytes / 4));
  RowSink sink(table.rows, table.stats);
  CfaProgramRunner runner;
  std::vector<CfaRow> fde_rows;
  fde_rows.reserve(256);
  uint64_t rows_of = ~uint64_t{0};  // (section << 32 | fde) whose rows fde_rows holds
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    SectionState& section = parsed[piece.section];
    const Fde& fde = section.cfi.fdes[piece.fde];
    const uint64_t key = (uint64_t{piece.section} << 32) | piece.fde;
    if (key != rows_of) {
      if (!section.cie_state_ready[fde.cie_index]) {
        auto state = runner.run_cie(section.cfi, section.cfi.cies[fde.cie_index]);
        if (!state) return state.error();
        section.cie_states[fde.cie_index] = *state;
        section.cie_state_ready[fde.cie_index] = 1;
      }
      if (auto ran = runner.run_fde(section.cfi, fde, section.cie_states[fde.cie_index], fde_rows); !ran) {
        return ran.error();
      }
      rows_of = key;
    }
    // The row in effect at the piece's start, then those inside it.
    auto first_after = std::upper_bound(fde_rows.begin(), fde_rows.end(), piece.begin,
                                        [](uint64_t pc, const CfaRow& row) { return pc < row.pc; });
    if (first_after == fde_rows.begin()) {  // run_fde promises a row at pc_begin; never trust it blindly
      return make_error(fmt::format("{}: FDE at {:#x}: no row at its start {:#x}", section.cfi.where(fde.offset),
                                    fde.offset, fde.pc_begin));
    }
    sink.add(to_unwind_row(piece.begin, (first_after - 1)->state));
    for (auto it = first_after; it != fde_rows.end() && it->pc < piece.end; ++it) {
      sink.add(to_unwind_row(it->pc, it->state));
    }
    if (i + 1 == pieces.size() || pieces[i + 1].begin != piece.end) sink.add(end_of_function_marker(piece.end));
  }
  return table;
}

Result<UnwindTable> UnwindTableBuilder::build(const std::string& path, const BuildOptions& options) {
  CfiReadOptions read_options;
  read_options.debug_root = options.debug_root;
  read_options.use_debug_file = options.use_debug_file;
  auto cfi = read_elf_cfi(path, read_options);
  if (!cfi) return cfi.error();

  std::vector<CfiSectionView> views;
  views.reserve(cfi->sections.size());
  for (const CfiSection& section : cfi->sections) views.push_back(section.view());
  auto table = build_from_sections(views, cfi->code_ranges);
  if (!table) return table.error();
  table->path = path;
  table->build_id = cfi->build_id;
  table->debug_file = cfi->debug_file;
  for (size_t i = 0; i < cfi->sections.size(); ++i) {
    table->sources[i].compressed = cfi->sections[i].compressed;
    table->sources[i].from_debug_file = cfi->sections[i].from_debug_file;
    table->sources[i].through_eh_frame_hdr = cfi->sections[i].through_eh_frame_hdr;
  }
  return table;
}

// ---------------------------------------------------------------------------
// Text form

namespace {

void append_row(fmt::memory_buffer& out, const UnwindRow& row) {
  fmt::format_to(std::back_inserter(out), "{:#018x} ", row.pc);
  switch (row.cfa) {
    case CfaRule::kEndOfFunction:
      fmt::format_to(std::back_inserter(out), "end");
      return;
    case CfaRule::kOutermost:
      fmt::format_to(std::back_inserter(out), "outermost");
      return;
    case CfaRule::kRsp:
      fmt::format_to(std::back_inserter(out), "cfa=rsp{:+d}", row.cfa_offset);
      break;
    case CfaRule::kRbp:
      fmt::format_to(std::back_inserter(out), "cfa=rbp{:+d}", row.cfa_offset);
      break;
    case CfaRule::kPltExpression:
      fmt::format_to(std::back_inserter(out), "cfa=plt{}", row.cfa_offset);
      break;
    case CfaRule::kUnsupported:
      fmt::format_to(std::back_inserter(out), "cfa=unsupported");
      break;
  }
  switch (row.rbp) {
    case RbpRule::kUnchanged:
      fmt::format_to(std::back_inserter(out), " rbp=unchanged");
      break;
    case RbpRule::kAtCfaOffset:
      fmt::format_to(std::back_inserter(out), " rbp=cfa{:+d}", row.rbp_offset);
      break;
    case RbpRule::kUnsupported:
      fmt::format_to(std::back_inserter(out), " rbp=unsupported");
      break;
  }
}

std::string source_label(const TableSource& source) {
  std::string label = source.section;
  std::string flags;
  auto flag = [&flags](std::string_view text) {
    if (!flags.empty()) flags += ',';
    flags += text;
  };
  if (source.through_eh_frame_hdr) flag("hdr");
  if (source.from_debug_file) flag("debug-file");
  if (source.compressed) flag("zlib");
  if (!flags.empty()) label += "(" + flags + ")";
  return label;
}

}  // namespace

std::string format_unwind_row(const UnwindRow& row) {
  fmt::memory_buffer buffer;
  append_row(buffer, row);
  return fmt::to_string(buffer);
}

void print_unwind_table(const UnwindTable& table, std::ostream& out) {
  fmt::memory_buffer buffer;
  std::string sources;
  for (const TableSource& source : table.sources) {
    if (!sources.empty()) sources += ',';
    sources += source_label(source);
  }
  fmt::format_to(std::back_inserter(buffer), "# unwind-table v1 file={} build_id={} rows={} sources={}{}\n",
                 table.path.empty() ? "-" : table.path, table.build_id.empty() ? "-" : table.build_id,
                 table.rows.size(), sources.empty() ? "-" : sources, table.no_cfi ? " no_cfi" : "");
  for (const UnwindRow& row : table.rows) {
    append_row(buffer, row);
    buffer.push_back('\n');
  }
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
}

}  // namespace omniprof::unwind
