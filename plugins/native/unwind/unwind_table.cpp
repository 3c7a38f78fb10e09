#include "unwind/unwind_table.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "omniprof/support/cfi/cfa_program.h"

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

// Part of an FDE's range that contributes rows: FDEs are cut where a section
// of higher priority, or an FDE of the same section starting earlier,
// already describes the addresses. The FDE is found again by its offset
// (sections are at most 1 GiB: kMaxInflatedSectionBytes, omniprof/support/elf_file.h), so
// nothing else of it is kept between the passes.
struct Piece {
  uint64_t begin;
  uint64_t end;
  uint32_t section;
  uint32_t fde_offset;
};

struct Range {
  uint64_t begin;
  uint64_t end;
};

// Calls add(begin, end) for each part of [begin, end) that `covered`
// (sorted, disjoint) does not hold. Returns how many there were.
template <typename Add>
size_t for_each_uncovered(uint64_t begin, uint64_t end, const std::vector<Range>& covered, Add&& add) {
  size_t added = 0;
  auto it = std::upper_bound(covered.begin(), covered.end(), begin,
                             [](uint64_t pc, const Range& range) { return pc < range.end; });
  uint64_t cursor = begin;
  for (; it != covered.end() && it->begin < end; ++it) {
    if (it->begin > cursor) {
      add(cursor, it->begin);
      ++added;
    }
    cursor = std::max(cursor, it->end);
    if (cursor >= end) break;
  }
  if (cursor < end) {
    add(cursor, end);
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

// One section: its walker (the CIEs; FDEs are read again when needed) and
// the state each CIE's initial instructions set up.
struct SectionState {
  explicit SectionState(const CfiSectionView& view) : walker(view) {}
  CfiSectionWalker walker;
  std::vector<FrameState> cie_states;
  std::vector<std::string> cie_errors;  // "" where the initial instructions ran
};

// An FDE whose instructions cannot run: left out of the next attempt, so
// the FDEs it overlapped get their addresses back.
struct RejectedFde {
  uint32_t section;
  uint32_t offset;
  std::string message;
  bool operator<(const RejectedFde& other) const {
    return section != other.section ? section < other.section : offset < other.offset;
  }
};

const RejectedFde* find_rejected(const std::vector<RejectedFde>& rejected, uint32_t section, uint32_t offset) {
  const RejectedFde key{section, offset, {}};
  auto it = std::lower_bound(rejected.begin(), rejected.end(), key);
  return it != rejected.end() && it->section == section && it->offset == offset ? &*it : nullptr;
}

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

namespace {

// One build of the rows, leaving out `rejected`. FDEs whose instructions
// fail are appended to `failed` (they get no rows: an end marker where they
// start) and counted.
Result<UnwindTable> build_rows(std::vector<SectionState>& sections, std::span<const CodeRange> code_ranges,
                               const std::vector<RejectedFde>& rejected, std::vector<RejectedFde>& failed) {
  UnwindTable table;
  auto note = [&table](const std::string& message) {
    if (table.first_problem.empty()) table.first_problem = message;
  };
  size_t fde_entries = 0;
  for (SectionState& section : sections) {
    section.walker.rewind();
    const ParsedCfi& cfi = section.walker.cfi();
    table.stats.cies += cfi.cies.size();
    table.stats.fdes += section.walker.fde_entries();
    fde_entries += section.walker.fde_entries();
    TableSource source;
    source.file = cfi.file;
    source.section = cfi.name;
    source.fdes = section.walker.fde_entries();
    table.sources.push_back(std::move(source));
  }
  table.no_cfi = fde_entries == 0;

  // Note every usable FDE's range, then cut each down to the addresses no
  // earlier section and no earlier FDE of its own section describes. One
  // Piece per FDE, in place: the FDEs themselves are not kept.
  std::vector<Piece> pieces;
  pieces.reserve(fde_entries);
  std::vector<Piece> split;    // second and later parts of FDEs cut by an earlier section
  std::vector<Range> covered;  // by the sections already processed
  size_t row_bound = 0;        // rows the pieces can produce at most
  for (uint32_t section_index = 0; section_index < sections.size(); ++section_index) {
    SectionState& section = sections[section_index];
    const ParsedCfi& cfi = section.walker.cfi();
    const size_t first = pieces.size();
    Fde fde;
    while (section.walker.next_fde(fde)) {
      if (cfi.cies[fde.cie_index].signal_frame) ++table.stats.signal_frame_fdes;
      const uint32_t offset = static_cast<uint32_t>(fde.offset);
      if (const std::string& cie_error = section.cie_errors[fde.cie_index]; !cie_error.empty()) {
        ++table.stats.fdes_malformed;
        note(fmt::format("{}: FDE of a CIE whose initial instructions cannot run: {}", cfi.where(fde.offset), cie_error));
      } else if (const RejectedFde* known = find_rejected(rejected, section_index, offset)) {
        ++table.stats.fdes_malformed;
        note(known->message);
      } else if (!fde_in_code(fde, code_ranges)) {
        ++table.stats.fdes_outside_code;
      } else {
        pieces.push_back(Piece{fde.pc_begin, fde.pc_end, section_index, offset});
        row_bound += fde_row_bound(fde.instructions) + 1;
      }
    }
    table.stats.fdes_malformed += cfi.malformed_fdes;
    if (cfi.first_malformed) note(cfi.first_malformed->message);
    if (cfi.cut_short) {
      ++table.stats.sections_cut_short;
      note(cfi.cut_short->message);
    }
    // By start, stable: where two FDEs start together, the first in the
    // section wins. Sections are mostly in address order already (a few
    // hundred sorted runs for libLLVM's 95000 FDEs), which a merge sort
    // handles far faster than introsort; its buffer (12 bytes per FDE) is
    // gone before the rows are allocated.
    std::stable_sort(pieces.begin() + static_cast<std::ptrdiff_t>(first), pieces.end(),
                     [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
    const bool keep_own = section_index + 1 < sections.size();
    std::vector<Range> own;
    uint64_t own_end = 0;  // end of what earlier FDEs of this section cover
    size_t kept = first;
    for (size_t i = first; i < pieces.size(); ++i) {
      const Piece candidate = pieces[i];
      const uint64_t begin = std::max(candidate.begin, own_end);
      size_t parts = 0;
      if (begin < candidate.end) {
        // At most one part goes back into `pieces` per candidate read, so
        // the cut is done in place.
        parts = for_each_uncovered(begin, candidate.end, covered, [&](uint64_t part_begin, uint64_t part_end) {
          const Piece part{part_begin, part_end, section_index, candidate.fde_offset};
          if (kept <= i) {
            pieces[kept++] = part;
          } else {
            split.push_back(part);
          }
        });
      }
      own_end = std::max(own_end, candidate.end);
      if (parts == 0) {
        ++table.stats.fdes_covered;
        continue;
      }
      // Parts after the first of the same candidate were pushed to `split`
      // (kept > i once the first is written at i).
      ++table.sources[section_index].fdes_used;
      if (!keep_own) continue;
      if (!own.empty() && begin <= own.back().end) {
        own.back().end = std::max(own.back().end, candidate.end);
      } else {
        own.push_back(Range{begin, candidate.end});
      }
    }
    pieces.resize(kept);
    if (keep_own) covered = merge_ranges(covered, own);
  }
  pieces.insert(pieces.end(), split.begin(), split.end());
  // Each section's pieces are in order already: with one section (most
  // files) there is nothing left to sort.
  auto by_begin = [](const Piece& a, const Piece& b) { return a.begin < b.begin; };
  if (!std::is_sorted(pieces.begin(), pieces.end(), by_begin)) std::sort(pieces.begin(), pieces.end(), by_begin);

  // Size the rows once (regrowth would copy them and hold twice their
  // memory): each FDE gives at most its rows plus an end marker, and each
  // extra part of a split FDE two more (its first row and its marker).
  row_bound += 2 * split.size();
  std::vector<Piece>().swap(split);
  table.rows.reserve(row_bound);

  // Run each piece's FDE program and append its rows, clipped to the piece.
  RowSink sink(table.rows, table.stats);
  CfaProgramRunner runner;
  std::vector<CfaRow> fde_rows;
  fde_rows.reserve(256);
  const size_t failed_before = failed.size();
  uint64_t rows_of = ~uint64_t{0};  // (section << 32 | fde offset) whose rows fde_rows holds
  Fde fde;                          // that FDE
  bool rows_failed = false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    SectionState& section = sections[piece.section];
    const ParsedCfi& cfi = section.walker.cfi();
    const uint64_t key = (uint64_t{piece.section} << 32) | piece.fde_offset;
    if (key != rows_of) {
      fde = section.walker.fde_at(piece.fde_offset);
      auto ran = runner.run_fde(cfi, fde, section.cie_states[fde.cie_index], fde_rows);
      rows_failed = !ran.ok();
      if (rows_failed) failed.push_back(RejectedFde{piece.section, piece.fde_offset, ran.error().message});
      rows_of = key;
    }
    if (rows_failed) {
      // No rule here: end whatever precedes, so no lookup borrows its rule.
      sink.add(end_of_function_marker(piece.begin));
      continue;
    }
    // The row in effect at the piece's start, then those inside it.
    auto first_after = std::upper_bound(fde_rows.begin(), fde_rows.end(), piece.begin,
                                        [](uint64_t pc, const CfaRow& row) { return pc < row.pc; });
    if (first_after == fde_rows.begin()) {  // run_fde promises a row at pc_begin; never trust it blindly
      return make_error(fmt::format("{}: FDE at {:#x}: no row at its start {:#x}", cfi.where(fde.offset), fde.offset,
                                    fde.pc_begin));
    }
    sink.add(to_unwind_row(piece.begin, (first_after - 1)->state));
    for (auto it = first_after; it != fde_rows.end() && it->pc < piece.end; ++it) {
      sink.add(to_unwind_row(it->pc, it->state));
    }
    if (i + 1 == pieces.size() || pieces[i + 1].begin != piece.end) sink.add(end_of_function_marker(piece.end));
  }
  // A split FDE runs once per part: count it once.
  std::sort(failed.begin() + static_cast<std::ptrdiff_t>(failed_before), failed.end());
  failed.erase(std::unique(failed.begin() + static_cast<std::ptrdiff_t>(failed_before), failed.end(),
                           [](const RejectedFde& a, const RejectedFde& b) {
                             return a.section == b.section && a.offset == b.offset;
                           }),
               failed.end());
  for (size_t i = failed_before; i < failed.size(); ++i) {
    ++table.stats.fdes_malformed;
    note(failed[i].message);
  }
  return table;
}

// Attempts at building without the FDEs whose instructions failed. An FDE
// that fails is found while rows are produced, after the ranges were cut;
// building again without it gives the FDEs it shadowed their addresses
// back. Each attempt can only reveal FDEs hidden under a failed one, so two
// are enough for any real file; a third keeps a crafted nest bounded.
constexpr int kBuildAttempts = 3;

}  // namespace

Result<UnwindTable> UnwindTableBuilder::build_from_sections(std::span<const CfiSectionView> views,
                                                            std::span<const CodeRange> code_ranges) {
  std::vector<SectionState> sections;
  sections.reserve(views.size());
  CfaProgramRunner runner;
  for (const CfiSectionView& view : views) {
    SectionState& section = sections.emplace_back(view);
    section.walker.read_cies();
    const ParsedCfi& cfi = section.walker.cfi();
    section.cie_states.resize(cfi.cies.size());
    section.cie_errors.resize(cfi.cies.size());
    for (size_t i = 0; i < cfi.cies.size(); ++i) {
      auto state = runner.run_cie(cfi, cfi.cies[i]);
      if (state) {
        section.cie_states[i] = *state;
      } else {
        section.cie_errors[i] = state.error().message;
      }
    }
  }
  std::vector<RejectedFde> rejected;
  for (int attempt = 1;; ++attempt) {
    std::vector<RejectedFde> failed;
    auto table = build_rows(sections, code_ranges, rejected, failed);
    if (!table || failed.empty() || attempt == kBuildAttempts) return table;
    rejected.insert(rejected.end(), std::make_move_iterator(failed.begin()), std::make_move_iterator(failed.end()));
    std::sort(rejected.begin(), rejected.end());
  }
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
  // Written out every 64 KiB: the text of a large table (libLLVM's is 39 MB)
  // is never held whole.
  constexpr size_t kFlushBytes = 64 * 1024;
  for (const UnwindRow& row : table.rows) {
    append_row(buffer, row);
    buffer.push_back('\n');
    if (buffer.size() >= kFlushBytes) {
      out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  }
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
}

}  // namespace omniprof::unwind
