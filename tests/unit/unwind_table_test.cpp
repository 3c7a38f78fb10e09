// Tests of the unwind table builder (plugins/native/unwind).
//
// The main check is an independent oracle: binutils' readelf decodes the same
// CFI at test time (`readelf -wF`, the "frames-interp" dump) and prints, per
// FDE, the CFA and register rules at every location change. For each of
// readelf's rows, the row of our table in effect at that address must give
// the same CFA rule and the same RBP rule; where an FDE ends and no other
// starts, our table must hold an end-of-function marker. Our rows are merged
// across FDEs, readelf's are not, so the comparison is by address, never row
// by row.
//
// The rest feeds crafted bytes (every instruction, every pointer encoding,
// malformed sections), mutated copies of a real .eh_frame, and ELF files
// built at test time with gcc/objcopy: .debug_frame only, compressed, in a
// separate debug file, without section headers.
//
// Inputs missing on this machine (a pyenv Python, Ruby, gcc) skip with one
// line, except under CI=true, where they fail.
#include "unwind/unwind_table.h"

#include <elf.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "omniprof/support/elf_file.h"
#include "omniprof/support/cfi/cfa_program.h"
#include "omniprof/support/cfi/dwarf_cfi.h"
#include "omniprof/support/cfi/eh_frame_hdr.h"
#include "omniprof/support/cfi/elf_cfi.h"
#include "omniprof/support/cfi/function_ranges.h"
#include "omniprof/support/cfi/pointer_encoding.h"

namespace omniprof::unwind {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using ::testing::HasSubstr;
using ::testing::AnyOf;

// ---------------------------------------------------------------------------
// Environment

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// Skips (one line) outside CI, fails in CI, where every input must be there.
#define SKIP_UNLESS_CI(message)                                  \
  do {                                                           \
    if (in_ci()) FAIL() << (message) << " (required when CI=true)"; \
    GTEST_SKIP() << (message);                                   \
  } while (0)

struct CommandResult {
  int status = -1;
  std::string output;
};

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  result.status = ::pclose(pipe);
  return result;
}

std::string fmt_hex(uint64_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

bool have_tool(const std::string& name) { return run_command("command -v " + name + " >/dev/null 2>&1").status == 0; }

std::string quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "unwind_table_test.XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string self_exe() {
  std::error_code error;
  return fs::read_symlink("/proc/self/exe", error).string();
}

// ---------------------------------------------------------------------------
// The readelf oracle

struct OracleRow {
  uint64_t loc = 0;
  std::string cfa;
  std::string rbp;  // "" when readelf shows no rbp column (never mentioned)
  std::string rsp;
  std::string ra;
};

struct OracleFde {
  uint64_t offset = 0;
  uint64_t cie_offset = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  std::vector<OracleRow> rows;
};

struct OracleSection {
  std::string name;
  std::map<uint64_t, OracleRow> cie_rows;  // the state a CIE's initial instructions set up
  std::vector<OracleFde> fdes;
};

// Splits a row of `readelf -wF`: values are separated by spaces, except a
// register rule, printed "r9 (r9)".
std::vector<std::string> split_row(const std::string& line) {
  std::vector<std::string> fields;
  std::istringstream stream(line);
  std::string token;
  while (stream >> token) {
    if (!token.empty() && token.front() == '(' && !fields.empty()) {
      fields.back() += " " + token;
    } else {
      fields.push_back(token);
    }
  }
  return fields;
}

bool is_hex(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::vector<OracleSection> parse_readelf_frames(const std::string& text) {
  std::vector<OracleSection> sections;
  std::istringstream lines(text);
  std::string line;
  std::vector<std::string> columns;  // names after LOC, CFA
  OracleFde* fde = nullptr;
  std::optional<uint64_t> cie_offset;
  while (std::getline(lines, line)) {
    if (line.starts_with("Contents of the ")) {
      const size_t begin = std::strlen("Contents of the ");
      const size_t end = line.find(" section", begin);
      sections.push_back(OracleSection{line.substr(begin, end - begin), {}, {}});
      fde = nullptr;
      cie_offset.reset();
      continue;
    }
    if (sections.empty()) continue;
    OracleSection& section = sections.back();
    const std::vector<std::string> fields = split_row(line);
    if (fields.size() >= 4 && is_hex(fields[0]) && fields[0].size() == 8 && fields[3] == "CIE") {
      cie_offset = std::stoull(fields[0], nullptr, 16);
      fde = nullptr;
      continue;
    }
    if (fields.size() >= 6 && is_hex(fields[0]) && fields[0].size() == 8 && fields[3] == "FDE") {
      OracleFde entry;
      entry.offset = std::stoull(fields[0], nullptr, 16);
      entry.cie_offset = std::stoull(fields[4].substr(4), nullptr, 16);  // "cie=0000002c"
      const std::string range = fields[5].substr(3);                     // "pc=begin..end"
      const size_t dots = range.find("..");
      entry.begin = std::stoull(range.substr(0, dots), nullptr, 16);
      entry.end = std::stoull(range.substr(dots + 2), nullptr, 16);
      section.fdes.push_back(entry);
      fde = &section.fdes.back();
      cie_offset.reset();
      continue;
    }
    if (fields.size() >= 2 && fields[0] == "LOC" && fields[1] == "CFA") {
      columns.assign(fields.begin() + 2, fields.end());
      continue;
    }
    if (fields.size() >= 2 && fields[0].size() == 16 && is_hex(fields[0])) {
      OracleRow row;
      row.loc = std::stoull(fields[0], nullptr, 16);
      row.cfa = fields[1];
      for (size_t i = 0; i < columns.size() && i + 2 < fields.size(); ++i) {
        if (columns[i] == "rbp") row.rbp = fields[i + 2];
        if (columns[i] == "rsp") row.rsp = fields[i + 2];
        if (columns[i] == "ra") row.ra = fields[i + 2];
      }
      if (fde != nullptr) {
        fde->rows.push_back(row);
      } else if (cie_offset) {
        section.cie_rows[*cie_offset] = row;  // the last one is the initial state
      }
    }
  }
  return sections;
}

// What our row must say, from readelf's.
struct ExpectedRule {
  CfaRule cfa = CfaRule::kUnsupported;
  int64_t cfa_offset = 0;
  bool cfa_is_expression = false;  // readelf "exp": ours is a PLT expression or unsupported
  RbpRule rbp = RbpRule::kUnchanged;
  int64_t rbp_offset = 0;
};

// "rsp+8" -> {"rsp", 8}
std::optional<std::pair<std::string, int64_t>> register_plus_offset(const std::string& text) {
  const size_t sign = text.find_first_of("+-");
  if (sign == std::string::npos || sign == 0) return std::nullopt;
  return std::make_pair(text.substr(0, sign), std::stoll(text.substr(sign)));
}

ExpectedRule expected_rule(const OracleRow& row) {
  ExpectedRule rule;
  // readelf: "u" is undefined (or never mentioned, which for a callee-saved
  // register means unchanged), "s" same value, "c+N" saved at CFA+N.
  if (row.rbp.empty() || row.rbp == "u" || row.rbp == "s") {
    rule.rbp = RbpRule::kUnchanged;
  } else if (row.rbp.starts_with("c+") || row.rbp.starts_with("c-")) {
    const int64_t offset = std::stoll(row.rbp.substr(1));
    rule.rbp = offset >= INT32_MIN && offset <= INT32_MAX ? RbpRule::kAtCfaOffset : RbpRule::kUnsupported;
    rule.rbp_offset = rule.rbp == RbpRule::kAtCfaOffset ? offset : 0;
  } else {
    rule.rbp = RbpRule::kUnsupported;
  }
  if (row.ra == "u") {
    rule.cfa = CfaRule::kOutermost;
    return rule;
  }
  const bool ra_ok = row.ra.empty() || row.ra == "c-8";
  const bool rsp_ok = row.rsp.empty() || row.rsp == "u" || row.rsp == "v+0";
  if (!ra_ok || !rsp_ok) return rule;  // kUnsupported
  if (row.cfa == "exp") {
    rule.cfa_is_expression = true;
    return rule;
  }
  if (auto parsed = register_plus_offset(row.cfa)) {
    const bool fits = parsed->second >= INT32_MIN && parsed->second <= INT32_MAX;
    if (fits && parsed->first == "rsp") rule.cfa = CfaRule::kRsp;
    if (fits && parsed->first == "rbp") rule.cfa = CfaRule::kRbp;
    if (rule.cfa != CfaRule::kUnsupported) rule.cfa_offset = parsed->second;
  }
  return rule;
}

struct OracleReport {
  size_t rows_compared = 0;
  size_t fde_ends_checked = 0;
  size_t fdes = 0;
  size_t fdes_skipped = 0;  // outside the code or empty
  size_t rows_skipped_overlap = 0;
  size_t expression_rows = 0;
  size_t mismatches = 0;
};

bool in_code(uint64_t begin, uint64_t end, const std::vector<CodeRange>& code) {
  if (begin >= end) return false;
  for (const CodeRange& range : code) {
    if (begin >= range.begin && end <= range.end) return true;
  }
  return false;
}

std::vector<CodeRange> code_ranges_of(const std::string& path) {
  std::vector<CodeRange> ranges;
  auto elf = ElfFile::open(path);
  if (!elf) return ranges;
  for (const LoadSegment& segment : elf->load_segments()) {
    if ((segment.flags & PF_X) != 0) ranges.push_back(CodeRange{segment.vaddr, segment.vaddr + segment.memsz});
  }
  return ranges;
}

// Compares `table` with readelf's decoding of `sections` (in priority order,
// as the builder takes them). Records failures with context; returns counts.
OracleReport compare_with_readelf(const UnwindTable& table, const std::vector<OracleSection>& sections,
                                  const std::vector<CodeRange>& code, const std::string& label) {
  OracleReport report;
  struct Range {
    uint64_t begin, end;
  };
  std::vector<Range> ranges;
  for (const OracleSection& section : sections) {
    for (const OracleFde& fde : section.fdes) {
      ++report.fdes;
      if (in_code(fde.begin, fde.end, code)) ranges.push_back(Range{fde.begin, fde.end});
    }
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  // Addresses described by more than one FDE: the builder picks one by
  // priority, readelf shows both, so they are left out of the comparison.
  std::vector<Range> overlaps;
  uint64_t max_end = 0;
  for (const Range& range : ranges) {
    if (range.begin < max_end) overlaps.push_back(Range{range.begin, std::min(range.end, max_end)});
    max_end = std::max(max_end, range.end);
  }
  auto overlapped = [&](uint64_t pc) {
    return std::any_of(overlaps.begin(), overlaps.end(), [pc](const Range& r) { return pc >= r.begin && pc < r.end; });
  };
  auto starts_or_inside_other = [&](uint64_t pc) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), pc, [](uint64_t v, const Range& r) { return v < r.begin; });
    // A range starting at pc, or any range before containing pc.
    for (auto scan = ranges.begin(); scan != it; ++scan) {
      if (scan->begin == pc || (scan->begin <= pc && pc < scan->end)) return true;
    }
    return false;
  };

  auto report_mismatch = [&](const std::string& what) {
    if (++report.mismatches <= 20) ADD_FAILURE() << label << ": " << what;
  };

  for (const OracleSection& section : sections) {
    for (const OracleFde& fde : section.fdes) {
      if (!in_code(fde.begin, fde.end, code)) {
        ++report.fdes_skipped;
        continue;
      }
      // readelf prints a row at each location change (the last one at an
      // address wins) and nothing for an FDE without instructions, whose
      // rules are its CIE's.
      std::map<uint64_t, OracleRow> rows;
      for (const OracleRow& row : fde.rows) {
        if (row.loc >= fde.begin && row.loc < fde.end) rows[row.loc] = row;
      }
      if (rows.empty()) {
        auto cie = section.cie_rows.find(fde.cie_offset);
        if (cie == section.cie_rows.end()) {
          report_mismatch("FDE at " + std::to_string(fde.offset) + " has neither rows nor a CIE row in readelf's output");
          continue;
        }
        OracleRow row = cie->second;
        row.loc = fde.begin;
        rows[fde.begin] = row;
      }
      for (const auto& [loc, row] : rows) {
        if (overlapped(loc)) {
          ++report.rows_skipped_overlap;
          continue;
        }
        ++report.rows_compared;
        const ExpectedRule expected = expected_rule(row);
        const UnwindRow* ours = table.find(loc);
        std::ostringstream context;
        context << section.name << " FDE at 0x" << std::hex << fde.offset << " pc 0x" << fde.begin << "..0x" << fde.end
                << ", readelf row 0x" << loc << " cfa=" << row.cfa << " rbp=" << (row.rbp.empty() ? "-" : row.rbp)
                << " rsp=" << (row.rsp.empty() ? "-" : row.rsp) << " ra=" << (row.ra.empty() ? "-" : row.ra)
                << "; ours: " << (ours != nullptr ? format_unwind_row(*ours) : std::string("none"));
        if (ours == nullptr) {
          report_mismatch(context.str());
          continue;
        }
        bool cfa_ok = false;
        if (expected.cfa_is_expression) {
          ++report.expression_rows;
          cfa_ok = ours->cfa == CfaRule::kPltExpression || ours->cfa == CfaRule::kUnsupported;
        } else if (expected.cfa == CfaRule::kRsp || expected.cfa == CfaRule::kRbp) {
          cfa_ok = ours->cfa == expected.cfa && ours->cfa_offset == expected.cfa_offset;
        } else {
          cfa_ok = ours->cfa == expected.cfa;
        }
        // The outermost frame has no caller, so its RBP rule is moot.
        const bool rbp_ok = expected.cfa == CfaRule::kOutermost ||
                            (ours->rbp == expected.rbp && ours->rbp_offset == expected.rbp_offset);
        if (!cfa_ok || !rbp_ok) report_mismatch(context.str());
      }
      // Where this function ends and nothing else starts, a marker.
      if (!starts_or_inside_other(fde.end)) {
        ++report.fde_ends_checked;
        const UnwindRow* ours = table.find(fde.end);
        if (ours == nullptr || ours->cfa != CfaRule::kEndOfFunction) {
          std::ostringstream context;
          context << section.name << " FDE at 0x" << std::hex << fde.offset << " pc 0x" << fde.begin << "..0x"
                  << fde.end << ": no end marker at its end; ours: "
                  << (ours != nullptr ? format_unwind_row(*ours) : std::string("none"));
          report_mismatch(context.str());
        }
      }
    }
  }
  // Every row of ours starts inside an FDE or is a marker at an FDE's end.
  size_t stray = 0;
  for (const UnwindRow& row : table.rows) {
    const bool inside = std::any_of(ranges.begin(), ranges.end(), [&](const Range& r) {
      return row.cfa == CfaRule::kEndOfFunction ? row.pc == r.end : (row.pc >= r.begin && row.pc < r.end);
    });
    if (!inside && ++stray <= 5) ADD_FAILURE() << label << ": row outside every FDE: " << format_unwind_row(row);
  }
  return report;
}

// Rows strictly increasing, no two neighbours with the same rule.
void expect_well_formed(const UnwindTable& table, const std::string& label) {
  for (size_t i = 1; i < table.rows.size(); ++i) {
    ASSERT_LT(table.rows[i - 1].pc, table.rows[i].pc) << label << ": rows out of order at " << i;
    ASSERT_FALSE(table.rows[i - 1].same_rule(table.rows[i]))
        << label << ": unmerged neighbours " << format_unwind_row(table.rows[i - 1]) << " / "
        << format_unwind_row(table.rows[i]);
  }
  if (!table.rows.empty()) {
    EXPECT_EQ(table.rows.back().cfa, CfaRule::kEndOfFunction) << label << ": the last row must end a function";
  }
}

// readelf's decoding of the sections the builder read for `table`:
// .eh_frame of the file (and its .debug_frame), or the debug file's
// .debug_frame. -wN: readelf must not follow debug links by itself.
std::optional<std::vector<OracleSection>> readelf_sections(const UnwindTable& table) {
  std::vector<OracleSection> sections;
  auto decode = [&](const std::string& file, bool from_debug_file) -> bool {
    CommandResult result = run_command("readelf -wN --debug-dump=frames-interp " + quote(file) + " 2>/dev/null");
    // readelf exits with 1 on a separate debug file ("Unable to find program
    // interpreter name": its PT_INTERP contents were left out) after
    // printing the frames; only a missing dump is a failure there.
    const bool dumped = result.output.find("Contents of the .debug_frame section") != std::string::npos;
    if (result.status != 0 && !(from_debug_file && dumped)) return false;
    for (OracleSection& section : parse_readelf_frames(result.output)) {
      // A debug file's .eh_frame is NOBITS: only its .debug_frame counts.
      if (from_debug_file && section.name != ".debug_frame") continue;
      sections.push_back(std::move(section));
    }
    return true;
  };
  if (!decode(table.path, false)) return std::nullopt;
  for (const TableSource& source : table.sources) {
    if (source.from_debug_file && !decode(source.file, true)) return std::nullopt;
  }
  // The builder's priority: .eh_frame before .debug_frame.
  std::stable_sort(sections.begin(), sections.end(), [](const OracleSection& a, const OracleSection& b) {
    return a.name == ".eh_frame" && b.name != ".eh_frame";
  });
  return sections;
}

void check_against_readelf(const std::string& path, const BuildOptions& options = {}, size_t min_rows = 1) {
  auto table = UnwindTableBuilder::build(path, options);
  ASSERT_TRUE(table.ok()) << table.error().message;
  ASSERT_FALSE(table->no_cfi) << path;
  expect_well_formed(*table, path);
  auto sections = readelf_sections(*table);
  ASSERT_TRUE(sections.has_value()) << "readelf failed on " << path;
  const OracleReport report = compare_with_readelf(*table, *sections, code_ranges_of(path), path);
  std::cout << "[ oracle   ] " << path << ": " << report.rows_compared << " readelf rows compared, "
            << report.fde_ends_checked << " FDE ends checked, " << report.fdes << " FDEs (" << report.fdes_skipped
            << " outside the code), " << report.rows_skipped_overlap << " rows in overlapping FDEs skipped, "
            << report.expression_rows << " expression rows; our table: " << table->rows.size() << " rows ("
            << table->stats.rows_before_merge << " before merging), " << table->stats.unsupported_cfa
            << " unsupported CFA, " << table->stats.unsupported_rbp << " unsupported RBP, " << table->stats.plt_rows
            << " PLT\n";
  EXPECT_EQ(report.mismatches, 0u);
  EXPECT_GE(report.rows_compared, min_rows);
}

#define REQUIRE_READELF()                                          \
  do {                                                             \
    if (!have_tool("readelf")) SKIP_UNLESS_CI("readelf (binutils) not installed"); \
  } while (0)

TEST(UnwindTableOracle, Libc) {
  REQUIRE_READELF();
  check_against_readelf("/lib/x86_64-linux-gnu/libc.so.6", {}, 10000);
}

TEST(UnwindTableOracle, Libstdcxx) {
  REQUIRE_READELF();
  check_against_readelf("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", {}, 10000);
}

TEST(UnwindTableOracle, Libpython) {
  REQUIRE_READELF();
  const std::string path = "/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0";
  if (!fs::exists(path)) SKIP_UNLESS_CI(path + " absent (pyenv 3.12.1 not installed)");
  check_against_readelf(path, {}, 10000);
}

TEST(UnwindTableOracle, Libruby) {
  REQUIRE_READELF();
  const std::string path = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1";
  if (!fs::exists(path)) SKIP_UNLESS_CI(path + " absent (installed by scripts/install-deps)");
  check_against_readelf(path, {}, 1000);
}

TEST(UnwindTableOracle, ThisTestBinary) {
  REQUIRE_READELF();
  const std::string path = self_exe();
  ASSERT_FALSE(path.empty());
  check_against_readelf(path, {}, 100);
}

TEST(UnwindTableOracle, LibcFindsItsFunctions) {
  // A few functions of libc by symbol: each start has a real CFA rule.
  auto table = UnwindTableBuilder::build("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(table.ok()) << table.error().message;
  auto elf = ElfFile::open("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(elf.ok());
  auto symbols = elf->symbols();
  ASSERT_TRUE(symbols.ok());
  size_t checked = 0;
  for (const ElfSymbol& symbol : *symbols) {
    if (symbol.name != "malloc" && symbol.name != "memcpy" && symbol.name != "printf" && symbol.name != "qsort") continue;
    const UnwindRow* row = table->find(symbol.value);
    ASSERT_NE(row, nullptr) << symbol.name;
    EXPECT_NE(row->cfa, CfaRule::kEndOfFunction) << symbol.name;
    EXPECT_NE(row->cfa, CfaRule::kUnsupported) << symbol.name;
    ++checked;
  }
  EXPECT_GE(checked, 3u);
  EXPECT_EQ(table->build_id.size(), 40u);
  ASSERT_FALSE(table->sources.empty());
  EXPECT_EQ(table->sources[0].section, ".eh_frame");
  EXPECT_GE(table->stats.plt_rows, 1u);  // libc's .plt has the standard expression
}

// ---------------------------------------------------------------------------
// Crafted CFI

Bytes uleb(uint64_t value) {
  Bytes out;
  do {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    if (value != 0) byte |= 0x80;
    out.push_back(byte);
  } while (value != 0);
  return out;
}

Bytes sleb(int64_t value) {
  Bytes out;
  bool more = true;
  while (more) {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    more = !((value == 0 && (byte & 0x40) == 0) || (value == -1 && (byte & 0x40) != 0));
    if (more) byte |= 0x80;
    out.push_back(byte);
  }
  return out;
}

Bytes le(uint64_t value, size_t size) {
  Bytes out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
  return out;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// DW_CFA_* and DW_OP_* bytes used below.
namespace op {
constexpr uint8_t kNop = 0x00, kSetLoc = 0x01, kAdvanceLoc1 = 0x02, kAdvanceLoc2 = 0x03, kAdvanceLoc4 = 0x04,
                  kOffsetExtended = 0x05, kRestoreExtended = 0x06, kUndefined = 0x07, kSameValue = 0x08,
                  kRegister = 0x09, kRememberState = 0x0a, kRestoreState = 0x0b, kDefCfa = 0x0c,
                  kDefCfaRegister = 0x0d, kDefCfaOffset = 0x0e, kDefCfaExpression = 0x0f, kExpression = 0x10,
                  kOffsetExtendedSf = 0x11, kDefCfaSf = 0x12, kDefCfaOffsetSf = 0x13, kValOffset = 0x14,
                  kValOffsetSf = 0x15, kValExpression = 0x16, kGnuWindowSave = 0x2d, kGnuArgsSize = 0x2e,
                  kGnuNegativeOffsetExtended = 0x2f;
constexpr uint8_t advance_loc(uint8_t delta) { return 0x40 | delta; }
constexpr uint8_t offset(uint8_t reg) { return 0x80 | reg; }
constexpr uint8_t restore(uint8_t reg) { return 0xc0 | reg; }
}  // namespace op

const Bytes kPlt11Expression = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
const Bytes kPlt10Expression = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22};
// The standard x86-64 CIE program: CFA = rsp+8, return address at CFA-8.
const Bytes kStandardCieProgram = {op::kDefCfa, 7, 8, op::offset(16), 1};

struct CieSpec {
  std::string augmentation = "zR";
  Bytes augmentation_data = {0x1b};  // DW_EH_PE_pcrel|DW_EH_PE_sdata4
  Bytes instructions = kStandardCieProgram;
  uint8_t version = 1;
  uint64_t code_alignment = 1;
  int64_t data_alignment = -8;
  uint64_t return_address_register = 16;
  bool dwarf64 = false;
  Bytes eh_data;  // for "eh"
};

// Assembles a .eh_frame or .debug_frame section at a given address.
class CfiBuilder {
 public:
  CfiBuilder(CfiFormat format, uint64_t vaddr) : format_(format), vaddr_(vaddr) {}

  size_t cie(const CieSpec& spec) {
    const bool eh = format_ == CfiFormat::kEhFrame;
    Bytes body = spec.dwarf64 ? (eh ? le(0, 8) : le(~uint64_t{0}, 8)) : (eh ? le(0, 4) : le(0xffffffff, 4));
    body.push_back(spec.version);
    body.insert(body.end(), spec.augmentation.begin(), spec.augmentation.end());
    body.push_back(0);
    body.insert(body.end(), spec.eh_data.begin(), spec.eh_data.end());
    if (spec.version >= 4) {
      body.push_back(8);  // address size
      body.push_back(0);  // segment selector size
    }
    append(body, uleb(spec.code_alignment));
    append(body, sleb(spec.data_alignment));
    if (spec.version == 1) {
      body.push_back(static_cast<uint8_t>(spec.return_address_register));
    } else {
      append(body, uleb(spec.return_address_register));
    }
    if (!spec.augmentation.empty() && spec.augmentation[0] == 'z') {
      append(body, uleb(spec.augmentation_data.size()));
      append(body, spec.augmentation_data);
    }
    append(body, spec.instructions);
    return entry(body, spec.dwarf64);
  }

  // `addresses` writes pc_begin and the range given the address of the
  // pc_begin field (for pcrel encodings).
  size_t fde(size_t cie_offset, const std::function<Bytes(uint64_t field_vaddr)>& addresses, const Bytes& instructions,
             std::optional<Bytes> augmentation_data = Bytes{}, bool dwarf64 = false) {
    const size_t offset = bytes_.size();
    const size_t header = dwarf64 ? 12 : 4;
    const size_t id_size = dwarf64 ? 8 : 4;
    const uint64_t id = format_ == CfiFormat::kEhFrame ? (offset + header) - cie_offset : cie_offset;
    Bytes body = le(id, id_size);
    append(body, addresses(vaddr_ + offset + header + id_size));
    if (augmentation_data) {
      append(body, uleb(augmentation_data->size()));
      append(body, *augmentation_data);
    }
    append(body, instructions);
    return entry(body, dwarf64);
  }

  // The usual .eh_frame FDE: pcrel sdata4 begin, sdata4 range.
  size_t pcrel_fde(size_t cie_offset, uint64_t begin, uint64_t range, const Bytes& instructions) {
    return fde(cie_offset, [&](uint64_t field) { return cat({le(begin - field, 4), le(range, 4)}); }, instructions);
  }
  // The .debug_frame FDE: absolute 8-byte begin and range.
  size_t absolute_fde(size_t cie_offset, uint64_t begin, uint64_t range, const Bytes& instructions,
                      bool dwarf64 = false) {
    return fde(cie_offset, [&](uint64_t) { return cat({le(begin, 8), le(range, 8)}); }, instructions, std::nullopt,
               dwarf64);
  }

  void zero_terminator() { append(bytes_, le(0, 4)); }
  void raw(const Bytes& bytes) { append(bytes_, bytes); }
  Bytes& bytes() { return bytes_; }
  uint64_t vaddr() const { return vaddr_; }

  CfiSectionView view() const {
    CfiSectionView view;
    view.format = format_;
    view.bytes = bytes_;
    view.vaddr = format_ == CfiFormat::kEhFrame ? vaddr_ : 0;
    view.file = "crafted";
    return view;
  }

 private:
  static void append(Bytes& to, const Bytes& from) { to.insert(to.end(), from.begin(), from.end()); }

  size_t entry(const Bytes& body, bool dwarf64) {
    const size_t offset = bytes_.size();
    if (dwarf64) {
      append(bytes_, le(0xffffffff, 4));
      append(bytes_, le(body.size(), 8));
    } else {
      append(bytes_, le(body.size(), 4));
    }
    append(bytes_, body);
    return offset;
  }

  CfiFormat format_;
  uint64_t vaddr_;
  Bytes bytes_;
};

constexpr uint64_t kEhFrameVaddr = 0x2000;

Result<UnwindTable> build_crafted(const CfiBuilder& builder) {
  const CfiSectionView view = builder.view();
  return UnwindTableBuilder::build_from_sections(std::span<const CfiSectionView>(&view, 1));
}

UnwindRow rsp(uint64_t pc, int32_t offset, RbpRule rbp = RbpRule::kUnchanged, int32_t rbp_offset = 0) {
  return UnwindRow{pc, CfaRule::kRsp, rbp, offset, rbp_offset};
}
UnwindRow rbp_based(uint64_t pc, int32_t offset, int32_t rbp_offset) {
  return UnwindRow{pc, CfaRule::kRbp, RbpRule::kAtCfaOffset, offset, rbp_offset};
}
UnwindRow end_marker(uint64_t pc) { return UnwindRow{pc, CfaRule::kEndOfFunction, RbpRule::kUnchanged, 0, 0}; }

std::string dump(const std::vector<UnwindRow>& rows) {
  std::string text;
  for (const UnwindRow& row : rows) text += format_unwind_row(row) + "\n";
  return text;
}

TEST(UnwindTableCrafted, TypicalFunctionWithFramePointer) {
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  const size_t cie = cfi.cie({});
  // push rbp; mov rbp,rsp; ...; leave (remembered state); ret
  cfi.pcrel_fde(cie, 0x1000, 0x40,
                {op::advance_loc(1), op::kDefCfaOffset, 16, op::offset(6), 2, op::advance_loc(3), op::kDefCfaRegister,
                 6, op::advance_loc(0x20), op::kRememberState, op::kDefCfa, 7, 8, op::advance_loc(1),
                 op::kRestoreState, op::kNop, op::kNop});
  // A second function right after the first (no gap), and a third after a gap.
  cfi.pcrel_fde(cie, 0x1040, 0x10, {op::advance_loc(4), op::kDefCfaOffset, 32});
  cfi.pcrel_fde(cie, 0x1100, 0x8, {});
  cfi.zero_terminator();
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const std::vector<UnwindRow> expected = {
      rsp(0x1000, 8),
      rsp(0x1001, 16, RbpRule::kAtCfaOffset, -16),
      rbp_based(0x1004, 16, -16),
      rsp(0x1024, 8, RbpRule::kAtCfaOffset, -16),
      rbp_based(0x1025, 16, -16),
      rsp(0x1040, 8),
      rsp(0x1044, 32),
      end_marker(0x1050),
      rsp(0x1100, 8),
      end_marker(0x1108),
  };
  EXPECT_EQ(table->rows, expected) << dump(table->rows);
  EXPECT_EQ(table->stats.fdes, 3u);
  EXPECT_EQ(table->stats.cies, 1u);
  EXPECT_EQ(table->stats.rows_before_merge, 10u);
  EXPECT_FALSE(table->no_cfi);
  EXPECT_EQ(table->find(0x0fff), nullptr);
  EXPECT_EQ(table->find(0x1002)->pc, 0x1001u);
  EXPECT_EQ(table->find(0x1060)->cfa, CfaRule::kEndOfFunction);
  EXPECT_EQ(table->find(0x2000)->cfa, CfaRule::kEndOfFunction);
}

TEST(UnwindTableCrafted, IdenticalNeighboursAreMerged) {
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  const size_t cie = cfi.cie({});
  // Two adjacent leaf functions (rsp+8 throughout) and a row that repeats.
  cfi.pcrel_fde(cie, 0x1000, 0x10, {op::advance_loc(4), op::kDefCfaOffset, 8});
  cfi.pcrel_fde(cie, 0x1010, 0x10, {});
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const std::vector<UnwindRow> expected = {rsp(0x1000, 8), end_marker(0x1020)};
  EXPECT_EQ(table->rows, expected) << dump(table->rows);
  EXPECT_EQ(table->stats.rows_before_merge, 4u);
}

TEST(UnwindTableCrafted, PltExpressionsOtherExpressionsAndReturnAddressRules) {
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  const size_t cie = cfi.cie({});
  Bytes plt11 = {op::kDefCfaOffset, 16, op::advance_loc(6), op::kDefCfaOffset, 24, op::advance_loc(10), op::kDefCfaExpression,
                 static_cast<uint8_t>(kPlt11Expression.size())};
  plt11.insert(plt11.end(), kPlt11Expression.begin(), kPlt11Expression.end());
  cfi.pcrel_fde(cie, 0x1000, 0x40, plt11);
  Bytes plt10 = {op::kDefCfaExpression, static_cast<uint8_t>(kPlt10Expression.size())};
  plt10.insert(plt10.end(), kPlt10Expression.begin(), kPlt10Expression.end());
  cfi.pcrel_fde(cie, 0x1040, 0x10, plt10);
  // DW_OP_breg7 16: an expression we do not evaluate.
  cfi.pcrel_fde(cie, 0x1050, 0x10, {op::kDefCfaExpression, 2, 0x77, 0x10});
  // Return address undefined: the outermost frame (like _start).
  cfi.pcrel_fde(cie, 0x1060, 0x10, {op::kUndefined, 16});
  // Return address kept in a register (like __restore_rt's neighbours).
  cfi.pcrel_fde(cie, 0x1070, 0x10, {op::kRegister, 16, 5});
  // Return address at CFA-16: not what a call instruction does.
  cfi.pcrel_fde(cie, 0x1080, 0x10, {op::offset(16), 2});
  // CFA in rdi (context switches), rbp in r9.
  cfi.pcrel_fde(cie, 0x1090, 0x10, {op::kDefCfa, 5, 0, op::kRegister, 6, 9});
  // rsp saved somewhere else: the caller's rsp is not the CFA.
  cfi.pcrel_fde(cie, 0x10a0, 0x10, {op::offset(7), 4});
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const std::vector<UnwindRow> expected = {
      rsp(0x1000, 16),
      rsp(0x1006, 24),
      UnwindRow{0x1010, CfaRule::kPltExpression, RbpRule::kUnchanged, 11, 0},
      UnwindRow{0x1040, CfaRule::kPltExpression, RbpRule::kUnchanged, 10, 0},
      UnwindRow{0x1050, CfaRule::kUnsupported, RbpRule::kUnchanged, 0, 0},
      UnwindRow{0x1060, CfaRule::kOutermost, RbpRule::kUnchanged, 0, 0},
      UnwindRow{0x1070, CfaRule::kUnsupported, RbpRule::kUnchanged, 0, 0},
      UnwindRow{0x1090, CfaRule::kUnsupported, RbpRule::kUnsupported, 0, 0},
      UnwindRow{0x10a0, CfaRule::kUnsupported, RbpRule::kUnchanged, 0, 0},
      end_marker(0x10b0),
  };
  EXPECT_EQ(table->rows, expected) << dump(table->rows);
  EXPECT_EQ(table->stats.plt_rows, 2u);
  EXPECT_EQ(table->stats.outermost_rows, 1u);
  EXPECT_EQ(table->stats.unsupported_cfa, 5u);
  EXPECT_EQ(table->stats.unsupported_rbp, 1u);
}

TEST(UnwindTableCrafted, PltMatcher) {
  EXPECT_EQ(match_plt_cfa_expression(kPlt11Expression), 11);
  EXPECT_EQ(match_plt_cfa_expression(kPlt10Expression), 10);
  Bytes lit12 = kPlt11Expression;
  lit12[6] = 0x3c;
  EXPECT_EQ(match_plt_cfa_expression(lit12), std::nullopt);
  Bytes longer = kPlt11Expression;
  longer.push_back(0x96);  // DW_OP_nop
  EXPECT_EQ(match_plt_cfa_expression(longer), std::nullopt);
  EXPECT_EQ(match_plt_cfa_expression({}), std::nullopt);
}

// Every instruction of DWARF 5 6.4.2 that x86-64 can use, in one FDE, with
// the rows they must produce.
TEST(UnwindTableCrafted, EveryCallFrameInstruction) {
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  CieSpec spec;
  spec.version = 3;  // uleb128 return address column
  const size_t cie = cfi.cie(spec);
  const uint64_t begin = 0x4000;
  Bytes program = {
      op::kNop,
      op::advance_loc(1), op::kDefCfaOffset, 16, op::offset(6), 2,            // 0x4001 rsp+16 rbp=c-16
      op::kAdvanceLoc1, 2, op::kDefCfaRegister, 6,                            // 0x4003 rbp+16
      op::kAdvanceLoc2, 0x10, 0x00, op::kDefCfaSf, 7, static_cast<uint8_t>(sleb(-4)[0]),  // 0x4013 rsp+32 (-4 x -8)
      op::kAdvanceLoc4, 1, 0, 0, 0, op::kDefCfaOffsetSf, static_cast<uint8_t>(sleb(-3)[0]),  // 0x4014 rsp+24
      op::advance_loc(1), op::kOffsetExtended, 6, 4,                          // 0x4015 rbp=c-32
      op::advance_loc(1), op::kOffsetExtendedSf, 6, static_cast<uint8_t>(sleb(3)[0]),  // 0x4016 rbp=c-24
      op::advance_loc(1), op::kGnuNegativeOffsetExtended, 6, 5,               // 0x4017 rbp=c+40
      op::advance_loc(1), op::kValOffset, 6, 1,                               // 0x4018 rbp unsupported (val_offset)
      op::advance_loc(1), op::kValOffsetSf, 6, 1,                             // 0x4019 still unsupported
      op::advance_loc(1), op::kRestoreExtended, 6,                            // 0x401a rbp unchanged (CIE)
      op::advance_loc(1), op::kSameValue, 6, op::kGnuArgsSize, 16,            // 0x401b same
      op::advance_loc(1), op::kExpression, 6, 2, 0x76, 0x00,                  // 0x401c rbp unsupported (expression)
      op::advance_loc(1), op::kValExpression, 6, 1, 0x30,                     // 0x401d unsupported
      op::advance_loc(1), op::restore(6),                                     // 0x401e unchanged
      op::advance_loc(1), op::kUndefined, 6,                                  // 0x401f rbp unsupported (undefined)
      op::advance_loc(1), op::restore(6), op::kRegister, 3, 4, op::kUndefined, 17,  // untracked registers: no change
      op::advance_loc(1), op::kDefCfa, 6, 32,                                 // 0x4021 rbp+32
  };
  // DW_CFA_set_loc uses the FDE pointer encoding (pcrel sdata4): its operand
  // is patched below, once the address of the field is known.
  const size_t set_loc = program.size();
  const Bytes tail = {
      op::kSetLoc, 0, 0, 0, 0,                                                // to 0x4030
      op::kDefCfa, 7, 8,                                                      // 0x4030 rsp+8
      op::kAdvanceLoc1, 0x40,                                                 // past the end: no row
      op::kDefCfaOffset, 99,
  };
  program.insert(program.end(), tail.begin(), tail.end());
  const size_t fde = cfi.pcrel_fde(cie, begin, 0x40, program);
  // length 4, CIE pointer 4, begin 4, range 4, augmentation length 1.
  const uint64_t field_vaddr = kEhFrameVaddr + fde + 4 + 4 + 4 + 4 + 1 + set_loc + 1;
  const Bytes target = le(0x4030 - field_vaddr, 4);
  std::copy(target.begin(), target.end(), cfi.bytes().begin() + static_cast<long>(fde + 17 + set_loc + 1));
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const std::vector<UnwindRow> expected = {
      rsp(0x4000, 8),
      rsp(0x4001, 16, RbpRule::kAtCfaOffset, -16),
      rbp_based(0x4003, 16, -16),
      rsp(0x4013, 32, RbpRule::kAtCfaOffset, -16),
      rsp(0x4014, 24, RbpRule::kAtCfaOffset, -16),
      rsp(0x4015, 24, RbpRule::kAtCfaOffset, -32),
      rsp(0x4016, 24, RbpRule::kAtCfaOffset, -24),
      rsp(0x4017, 24, RbpRule::kAtCfaOffset, 40),
      rsp(0x4018, 24, RbpRule::kUnsupported),
      rsp(0x401a, 24),
      rsp(0x401c, 24, RbpRule::kUnsupported),
      rsp(0x401e, 24),
      rsp(0x401f, 24, RbpRule::kUnsupported),
      rsp(0x4020, 24),
      UnwindRow{0x4021, CfaRule::kRbp, RbpRule::kUnchanged, 32, 0},
      rsp(0x4030, 8),
      end_marker(0x4040),
  };
  EXPECT_EQ(table->rows, expected) << dump(table->rows);
}

TEST(UnwindTableCrafted, RememberAndRestoreStateNest) {
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  const size_t cie = cfi.cie({});
  cfi.pcrel_fde(cie, 0x1000, 0x10,
                {op::kDefCfaOffset, 16, op::kRememberState, op::advance_loc(1), op::kDefCfaOffset, 24,
                 op::kRememberState, op::advance_loc(1), op::kDefCfaOffset, 32, op::advance_loc(1), op::kRestoreState,
                 op::advance_loc(1), op::kRestoreState});
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const std::vector<UnwindRow> expected = {rsp(0x1000, 16), rsp(0x1001, 24), rsp(0x1002, 32),
                                           rsp(0x1003, 24), rsp(0x1004, 16), end_marker(0x1010)};
  EXPECT_EQ(table->rows, expected) << dump(table->rows);
}

TEST(UnwindTableCrafted, PointerEncodings) {
  struct Case {
    uint8_t encoding;
    std::function<Bytes(uint64_t begin, uint64_t field)> begin_bytes;
    size_t range_size;  // 0: LEB128
    bool signed_range;
  };
  const uint64_t begin = 0x1234;
  const std::vector<Case> cases = {
      {0x00, [](uint64_t b, uint64_t) { return le(b, 8); }, 8, false},                   // absptr
      {0x02, [](uint64_t b, uint64_t) { return le(b, 2); }, 2, false},                   // udata2
      {0x03, [](uint64_t b, uint64_t) { return le(b, 4); }, 4, false},                   // udata4
      {0x04, [](uint64_t b, uint64_t) { return le(b, 8); }, 8, false},                   // udata8
      {0x01, [](uint64_t b, uint64_t) { return uleb(b); }, 0, false},                    // uleb128
      {0x09, [](uint64_t b, uint64_t) { return sleb(static_cast<int64_t>(b)); }, 0, true},  // sleb128
      {0x0a, [](uint64_t b, uint64_t) { return le(b, 2); }, 2, true},                    // sdata2
      {0x0b, [](uint64_t b, uint64_t) { return le(b, 4); }, 4, true},                    // sdata4
      {0x0c, [](uint64_t b, uint64_t) { return le(b, 8); }, 8, true},                    // sdata8
      {0x10, [](uint64_t b, uint64_t f) { return le(b - f, 8); }, 8, false},             // pcrel|absptr
      {0x12, [](uint64_t b, uint64_t f) { return le(b - f, 2); }, 2, false},             // pcrel|udata2 (forward)
      {0x1a, [](uint64_t b, uint64_t f) { return le(b - f, 2); }, 2, true},              // pcrel|sdata2 (backward)
      {0x1b, [](uint64_t b, uint64_t f) { return le(b - f, 4); }, 4, true},              // pcrel|sdata4
      {0x1c, [](uint64_t b, uint64_t f) { return le(b - f, 8); }, 8, true},              // pcrel|sdata8
      {0x11, [](uint64_t b, uint64_t f) { return uleb(b - f); }, 0, false},              // pcrel|uleb128
      {0x19, [](uint64_t b, uint64_t f) { return sleb(static_cast<int64_t>(b - f)); }, 0, true},  // pcrel|sleb128
  };
  for (const Case& c : cases) {
    // udata2 pcrel needs the field below the target: place the section low.
    const uint64_t vaddr = c.encoding == 0x12 ? 0x100 : kEhFrameVaddr;
    CfiBuilder cfi(CfiFormat::kEhFrame, vaddr);
    CieSpec spec;
    spec.augmentation_data = {c.encoding};
    const size_t cie = cfi.cie(spec);
    cfi.fde(
        cie,
        [&](uint64_t field) {
          Bytes out = c.begin_bytes(begin, field);
          Bytes range = c.range_size == 0 ? uleb(0x20) : le(0x20, c.range_size);
          out.insert(out.end(), range.begin(), range.end());
          return out;
        },
        {});
    auto parsed = parse_cfi(cfi.view());
    ASSERT_TRUE(parsed.ok()) << pointer_encoding_name(c.encoding) << ": " << parsed.error().message;
    ASSERT_EQ(parsed->fdes.size(), 1u);
    EXPECT_EQ(parsed->fdes[0].pc_begin, begin) << pointer_encoding_name(c.encoding);
    EXPECT_EQ(parsed->fdes[0].pc_end, begin + 0x20) << pointer_encoding_name(c.encoding);
  }
}

TEST(UnwindTableCrafted, InvalidPointerEncodingsAreRejectedByName) {
  const std::vector<std::pair<uint8_t, std::string>> cases = {
      {0x9b, "DW_EH_PE_indirect"}, {0x23, "DW_EH_PE_textrel"}, {0x43, "DW_EH_PE_funcrel"},
      {0x53, "DW_EH_PE_aligned"},  {0x33, "DW_EH_PE_datarel"}, {0x07, "format 0x7"},
  };
  for (const auto& [encoding, name] : cases) {
    CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
    CieSpec spec;
    spec.augmentation_data = {encoding};
    const size_t cie = cfi.cie(spec);
    cfi.fde(cie, [](uint64_t) { return le(0, 8); }, {});
    auto parsed = parse_cfi(cfi.view());
    ASSERT_TRUE(parsed.ok()) << name;
    // The FDE is lost, not the section.
    EXPECT_EQ(parsed->fdes.size(), 0u) << name;
    EXPECT_EQ(parsed->malformed_fdes, 1u) << name;
    ASSERT_TRUE(parsed->first_malformed.has_value()) << name;
    EXPECT_THAT(parsed->first_malformed->message, HasSubstr(name));
    EXPECT_THAT(parsed->first_malformed->message, HasSubstr("crafted: .eh_frame+0x"));
  }
  // datarel works where the caller supplies the base.
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  CieSpec spec;
  spec.augmentation_data = {0x3b};
  const size_t cie = cfi.cie(spec);
  cfi.fde(cie, [](uint64_t) { return cat({le(0x100, 4), le(0x10, 4)}); }, {});
  CfiSectionView view = cfi.view();
  view.data_base = 0x5000;
  auto parsed = parse_cfi(view);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->fdes[0].pc_begin, 0x5100u);
}

TEST(UnwindTableCrafted, Augmentations) {
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  // zPLR: personality (indirect|pcrel|sdata4, skipped, never followed), LSDA
  // encoding, FDE encoding; FDEs carry a 4-byte LSDA pointer.
  CieSpec zplr;
  zplr.augmentation = "zPLR";
  zplr.augmentation_data = {0x9b, 0x10, 0x20, 0x30, 0x40, 0x1b, 0x1b};
  const size_t cie_zplr = cfi.cie(zplr);
  cfi.fde(cie_zplr, [&](uint64_t field) { return cat({le(0x1000 - field, 4), le(0x10, 4)}); },
          {op::advance_loc(1), op::kDefCfaOffset, 16}, Bytes{1, 2, 3, 4});
  // zRS: a signal frame.
  CieSpec zrs;
  zrs.augmentation = "zRS";
  const size_t cie_zrs = cfi.cie(zrs);
  cfi.pcrel_fde(cie_zrs, 0x1010, 0x10, {});
  // "eh": old GCC, a pointer after the string, no augmentation data; the
  // FDE addresses are absolute.
  CieSpec eh;
  eh.augmentation = "eh";
  eh.augmentation_data = {};
  eh.eh_data = le(0xdeadbeef, 8);
  const size_t cie_eh = cfi.cie(eh);
  cfi.fde(cie_eh, [](uint64_t) { return cat({le(0x1020, 8), le(0x10, 8)}); }, {}, std::nullopt);
  // "S" alone: signal frame, absolute addresses.
  CieSpec s;
  s.augmentation = "S";
  s.augmentation_data = {};
  const size_t cie_s = cfi.cie(s);
  cfi.fde(cie_s, [](uint64_t) { return cat({le(0x1030, 8), le(0x10, 8)}); }, {}, std::nullopt);
  cfi.zero_terminator();

  auto parsed = parse_cfi(cfi.view());
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ASSERT_EQ(parsed->cies.size(), 4u);
  EXPECT_EQ(parsed->cies[0].personality_encoding, 0x9b);
  EXPECT_EQ(parsed->cies[0].lsda_encoding, 0x1b);
  EXPECT_EQ(parsed->cies[0].fde_pointer_encoding, 0x1b);
  EXPECT_TRUE(parsed->cies[1].signal_frame);
  EXPECT_TRUE(parsed->cies[2].has_eh_data);
  EXPECT_TRUE(parsed->cies[3].signal_frame);
  EXPECT_EQ(parsed->zero_terminators, 1u);
  ASSERT_EQ(parsed->fdes.size(), 4u);
  EXPECT_EQ(parsed->fdes[2].pc_begin, 0x1020u);
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_EQ(table->stats.signal_frame_fdes, 2u);
  const std::vector<UnwindRow> expected = {rsp(0x1000, 8), rsp(0x1001, 16), rsp(0x1010, 8), end_marker(0x1040)};
  EXPECT_EQ(table->rows, expected) << dump(table->rows);

  // An augmentation character nobody defined cannot be skipped safely.
  // Its FDEs are skipped and counted; those of the other CIE are kept.
  CfiBuilder unknown(CfiFormat::kEhFrame, kEhFrameVaddr);
  CieSpec bad;
  bad.augmentation = "zRX";
  const size_t bad_cie = unknown.cie(bad);
  const size_t good_cie = unknown.cie({});
  const size_t orphan = unknown.pcrel_fde(bad_cie, 0x1000, 0x10, {});
  unknown.pcrel_fde(good_cie, 0x1010, 0x10, {});
  auto skipped = parse_cfi(unknown.view());
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(skipped->cies.size(), 1u);
  ASSERT_EQ(skipped->fdes.size(), 1u);
  EXPECT_EQ(skipped->fdes[0].pc_begin, 0x1010u);
  EXPECT_EQ(skipped->malformed_fdes, 1u);
  ASSERT_TRUE(skipped->first_malformed.has_value());
  EXPECT_EQ(skipped->first_malformed->offset, orphan);
  EXPECT_THAT(skipped->first_malformed->message, HasSubstr("crafted: .eh_frame+" + fmt_hex(orphan)));
  EXPECT_THAT(skipped->first_malformed->message, HasSubstr("unknown character 'X'"));
}

TEST(UnwindTableCrafted, Dwarf64LengthsAndForwardCiePointers) {
  CfiBuilder cfi(CfiFormat::kDebugFrame, 0);
  // .debug_frame allows an FDE before its CIE: CIE pointers are offsets.
  // Build the CIE first at a known offset, then an FDE of each size.
  CieSpec spec;
  spec.augmentation = "";
  spec.augmentation_data = {};
  spec.version = 4;
  spec.dwarf64 = true;
  const size_t cie64 = cfi.cie(spec);
  cfi.absolute_fde(cie64, 0x3000, 0x10, {op::advance_loc(2), op::kDefCfaOffset, 16}, true);
  spec.dwarf64 = false;
  spec.version = 1;
  const size_t cie32 = cfi.cie(spec);
  cfi.absolute_fde(cie32, 0x3010, 0x10, {});
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const std::vector<UnwindRow> expected = {rsp(0x3000, 8), rsp(0x3002, 16), rsp(0x3010, 8), end_marker(0x3020)};
  EXPECT_EQ(table->rows, expected) << dump(table->rows);
  EXPECT_EQ(table->sources.at(0).section, ".debug_frame");

  // A forward reference: FDE first, CIE after it.
  CfiBuilder forward(CfiFormat::kDebugFrame, 0);
  const Bytes fde_body = cat({le(0x18, 4), le(0x5000, 8), le(0x8, 8)});  // CIE pointer: offset 0x18
  forward.raw(cat({le(fde_body.size(), 4), fde_body}));
  ASSERT_EQ(forward.bytes().size(), 0x18u);
  spec.version = 3;
  forward.cie(spec);
  auto forward_table = build_crafted(forward);
  ASSERT_TRUE(forward_table.ok()) << forward_table.error().message;
  EXPECT_EQ(forward_table->rows, (std::vector<UnwindRow>{rsp(0x5000, 8), end_marker(0x5008)}));
}

TEST(UnwindTableCrafted, EhFrameHdr) {
  // version 1, eh_frame_ptr pcrel|sdata4, fde_count udata4, table datarel|sdata4.
  const uint64_t hdr_vaddr = 0x1000;
  Bytes hdr = {1, 0x1b, 0x03, 0x3b};
  const Bytes eh_frame_ptr = le(0x2000 - (hdr_vaddr + 4), 4);
  hdr.insert(hdr.end(), eh_frame_ptr.begin(), eh_frame_ptr.end());
  const Bytes count = le(2, 4);
  hdr.insert(hdr.end(), count.begin(), count.end());
  for (const uint64_t fde : {0x2018u, 0x2040u}) {
    const Bytes entry = cat({le(0x500, 4), le(fde - hdr_vaddr, 4)});
    hdr.insert(hdr.end(), entry.begin(), entry.end());
  }
  auto parsed = parse_eh_frame_hdr(hdr, hdr_vaddr);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->eh_frame_vaddr, 0x2000u);
  EXPECT_EQ(parsed->fde_count, 2u);
  EXPECT_EQ(parsed->last_fde_vaddr, 0x2040u);

  Bytes lying = hdr;
  lying[8] = 0xff;  // fde_count far beyond the bytes present
  auto rejected = parse_eh_frame_hdr(lying, hdr_vaddr, "hdr-file");
  ASSERT_FALSE(rejected.ok());
  EXPECT_THAT(rejected.error().message, HasSubstr("hdr-file: .eh_frame_hdr+0x8: fde_count"));
  Bytes version2 = hdr;
  version2[0] = 2;
  EXPECT_FALSE(parse_eh_frame_hdr(version2, hdr_vaddr).ok());
}

// ---------------------------------------------------------------------------
// Malformed input: errors name the place, nothing crashes.

struct SmallEhFrame {
  CfiBuilder cfi{CfiFormat::kEhFrame, kEhFrameVaddr};
  size_t first_fde = 0;
  size_t second_fde = 0;
  size_t terminator = 0;
};

SmallEhFrame small_valid_eh_frame() {
  SmallEhFrame frame;
  const size_t cie = frame.cfi.cie({});
  frame.first_fde = frame.cfi.pcrel_fde(cie, 0x1000, 0x20, {op::advance_loc(1), op::kDefCfaOffset, 16, op::offset(6), 2});
  frame.second_fde = frame.cfi.pcrel_fde(cie, 0x1020, 0x20, {op::advance_loc(4), op::kDefCfaOffset, 32});
  frame.terminator = frame.cfi.bytes().size();
  frame.cfi.zero_terminator();
  return frame;
}

TEST(UnwindTableMalformed, TruncatedSection) {
  SmallEhFrame frame = small_valid_eh_frame();
  ASSERT_TRUE(build_crafted(frame.cfi).ok());
  const Bytes whole = frame.cfi.bytes();
  const size_t second_fde = frame.second_fde;
  for (size_t cut = 1; cut < whole.size(); ++cut) {
    const std::span<const uint8_t> prefix(whole.data(), cut);
    auto parsed = parse_eh_frame(prefix, kEhFrameVaddr, "cut");
    ASSERT_TRUE(parsed.ok()) << cut;
    // The entries before the cut are all kept.
    const size_t whole_fdes = cut >= frame.terminator ? 2 : cut >= frame.second_fde ? 1 : 0;
    EXPECT_EQ(parsed->fdes.size(), whole_fdes) << "cut at " << cut;
    EXPECT_EQ(parsed->malformed_fdes, 0u) << "cut at " << cut;
    if (cut == frame.first_fde || cut == frame.second_fde || cut == frame.terminator) {
      EXPECT_FALSE(parsed->cut_short.has_value()) << cut;  // at an entry boundary the section is merely shorter
      continue;
    }
    ASSERT_TRUE(parsed->cut_short.has_value()) << "cut at " << cut;
    EXPECT_THAT(parsed->cut_short->message, HasSubstr("cut: .eh_frame+0x"));
  }
  // Cut inside the second FDE: the message names that FDE's offset, and the
  // first FDE still gives its rows.
  const std::span<const uint8_t> inside_second(whole.data(), second_fde + 10);
  auto parsed = parse_eh_frame(inside_second, kEhFrameVaddr, "cut");
  ASSERT_TRUE(parsed.ok());
  ASSERT_TRUE(parsed->cut_short.has_value());
  EXPECT_EQ(parsed->cut_short->offset, second_fde);
  EXPECT_THAT(parsed->cut_short->message, HasSubstr(fmt_hex(second_fde)));
  EXPECT_THAT(parsed->cut_short->message, HasSubstr("runs past the end of the section"));
  CfiSectionView view = frame.cfi.view();
  view.bytes = inside_second;
  auto table = UnwindTableBuilder::build_from_sections(std::span<const CfiSectionView>(&view, 1));
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_EQ(table->stats.sections_cut_short, 1u);
  EXPECT_EQ(table->stats.fdes_malformed, 0u);
  EXPECT_THAT(table->first_problem, HasSubstr("runs past the end of the section"));
  const std::vector<UnwindRow> expected = {rsp(0x1000, 8), rsp(0x1001, 16, RbpRule::kAtCfaOffset, -16),
                                           end_marker(0x1020)};
  EXPECT_EQ(table->rows, expected) << dump(table->rows);
}

TEST(UnwindTableMalformed, LengthRunningPastTheSection) {
  SmallEhFrame frame = small_valid_eh_frame();
  Bytes& bytes = frame.cfi.bytes();
  bytes[frame.first_fde] = 0xf0;  // the first FDE's length
  bytes[frame.first_fde + 1] = 0x10;
  // Nothing after it can be found: the walk stops there.
  auto parsed = parse_cfi(frame.cfi.view());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->fdes.size(), 0u);
  ASSERT_TRUE(parsed->cut_short.has_value());
  EXPECT_THAT(parsed->cut_short->message,
              HasSubstr("crafted: .eh_frame+" + fmt_hex(frame.first_fde) + ": entry length 0x10f0 runs past the end"));
  // A 64-bit length escape with an absurd length after both FDEs: they stay.
  SmallEhFrame big = small_valid_eh_frame();
  Bytes& raw = big.cfi.bytes();
  const Bytes escape = cat({le(0xffffffff, 4), le(uint64_t{1} << 62, 8)});
  raw.insert(raw.end() - 4, escape.begin(), escape.end());
  auto parsed_big = parse_cfi(big.cfi.view());
  ASSERT_TRUE(parsed_big.ok());
  EXPECT_EQ(parsed_big->fdes.size(), 2u);
  ASSERT_TRUE(parsed_big->cut_short.has_value());
  EXPECT_THAT(parsed_big->cut_short->message, HasSubstr("runs past the end of the section"));
}

TEST(UnwindTableMalformed, BadCiePointer) {
  SmallEhFrame frame = small_valid_eh_frame();
  Bytes& bytes = frame.cfi.bytes();
  // The first FDE's CIE pointer is the distance back from the pointer field
  // to the CIE at 0; make it point 8 bytes into the CIE instead.
  const size_t pointer_field = frame.first_fde + 4;
  const Bytes into_cie = le(pointer_field - 8, 4);
  std::copy(into_cie.begin(), into_cie.end(), bytes.begin() + static_cast<long>(pointer_field));
  // That FDE is skipped; the second one is kept.
  auto parsed = parse_cfi(frame.cfi.view());
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->fdes.size(), 1u);
  EXPECT_EQ(parsed->fdes[0].offset, frame.second_fde);
  EXPECT_EQ(parsed->malformed_fdes, 1u);
  ASSERT_TRUE(parsed->first_malformed.has_value());
  const std::string& message = parsed->first_malformed->message;
  EXPECT_THAT(message, HasSubstr("crafted: .eh_frame+" + fmt_hex(frame.first_fde) + ": bad CIE pointer"));
  EXPECT_THAT(message, HasSubstr("0x8 is not the start of a CIE"));
  // Pointing before the section start.
  const Bytes far_back = le(0x7fff0000, 4);
  std::copy(far_back.begin(), far_back.end(), bytes.begin() + static_cast<long>(pointer_field));
  auto before = parse_cfi(frame.cfi.view());
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->fdes.size(), 1u);
  ASSERT_TRUE(before->first_malformed.has_value());
  EXPECT_THAT(before->first_malformed->message, HasSubstr("before the section start"));
  // .debug_frame: an offset past the end.
  CfiBuilder debug(CfiFormat::kDebugFrame, 0);
  CieSpec spec;
  spec.augmentation = "";
  spec.augmentation_data = {};
  debug.cie(spec);
  debug.absolute_fde(0x1000, 0x10, 0x10, {});
  auto past = parse_cfi(debug.view());
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->fdes.size(), 0u);
  EXPECT_EQ(past->malformed_fdes, 1u);
  ASSERT_TRUE(past->first_malformed.has_value());
  EXPECT_THAT(past->first_malformed->message, HasSubstr("crafted: .debug_frame+0x"));
  EXPECT_THAT(past->first_malformed->message, HasSubstr("bad CIE pointer 0x1000"));
}

TEST(UnwindTableMalformed, UnknownOpcodeNamesInstructionAndFde) {
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  const size_t cie = cfi.cie({});
  const size_t fde = cfi.pcrel_fde(cie, 0x1000, 0x20, {op::advance_loc(1), 0x1e, op::kNop});
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_EQ(table->stats.fdes_malformed, 1u);
  EXPECT_TRUE(table->rows.empty()) << dump(table->rows);
  const std::string& message = table->first_problem;
  EXPECT_THAT(message, HasSubstr("unknown call-frame instruction 0x1e"));
  EXPECT_THAT(message, HasSubstr("FDE at " + fmt_hex(fde) + " (pc 0x1000..0x1020)"));
  // length, CIE pointer, begin, range, augmentation length, advance_loc.
  EXPECT_THAT(message, HasSubstr("crafted: .eh_frame+" + fmt_hex(fde + 4 + 4 + 4 + 4 + 1 + 1)));
}

TEST(UnwindTableMalformed, RejectedInstructions) {
  struct Case {
    Bytes program;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{op::kGnuWindowSave}, "DW_CFA_GNU_window_save"},
      {{0x1d, 1, 0, 0, 0, 0, 0, 0, 0}, "DW_CFA_MIPS_advance_loc8"},
      {{op::kRestoreState}, "DW_CFA_restore_state"},
      {{op::kDefCfaExpression, 1, 0x30, op::kDefCfaOffset, 8}, "DW_CFA_def_cfa_offset"},
      {{op::kDefCfaExpression, 1, 0x30, op::kDefCfaRegister, 6}, "DW_CFA_def_cfa_register"},
      {{op::kDefCfaExpression, 20, 0x30}, "DW_CFA_def_cfa_expression"},
      {{op::kExpression, 6, 9, 0x30}, "DW_CFA_expression"},
      {{op::kOffsetExtended, 6}, "DW_CFA_offset_extended"},
      {{op::kDefCfa, 7, 0x80, 0x80}, "DW_CFA_def_cfa"},
      {{op::kAdvanceLoc4, 1, 0}, "DW_CFA_advance_loc4"},
      {{op::kSetLoc, 0, 0}, "DW_CFA_set_loc"},
  };
  for (const Case& c : cases) {
    CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
    const size_t cie = cfi.cie({});
    const size_t fde = cfi.pcrel_fde(cie, 0x1000, 0x20, c.program);
    auto table = build_crafted(cfi);
    ASSERT_TRUE(table.ok()) << c.expected << ": " << table.error().message;
    EXPECT_EQ(table->stats.fdes_malformed, 1u) << c.expected;
    EXPECT_THAT(table->first_problem, HasSubstr(c.expected));
    EXPECT_THAT(table->first_problem, HasSubstr("FDE at " + fmt_hex(fde) + " (pc 0x1000..0x1020)"));
    EXPECT_THAT(table->first_problem, HasSubstr("crafted: .eh_frame+0x"));
  }
  // DW_CFA_set_loc back to 0x500, before the FDE's own start.
  {
    CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
    const size_t cie = cfi.cie({});
    const size_t fde = cfi.pcrel_fde(cie, 0x1000, 0x20, {op::kSetLoc, 0, 0, 0, 0});
    const uint64_t field_vaddr = kEhFrameVaddr + fde + 17 + 1;  // after length, pointer, addresses, aug length, opcode
    const Bytes back = le(0x500 - field_vaddr, 4);
    std::copy(back.begin(), back.end(), cfi.bytes().begin() + static_cast<long>(fde + 17 + 1));
    auto table = build_crafted(cfi);
    ASSERT_TRUE(table.ok()) << table.error().message;
    EXPECT_EQ(table->stats.fdes_malformed, 1u);
    EXPECT_THAT(table->first_problem, HasSubstr("DW_CFA_set_loc"));
    EXPECT_THAT(table->first_problem, HasSubstr("moves the location back from 0x1000 to 0x500"));
  }
  // In a CIE: location instructions are meaningless there.
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  CieSpec spec;
  spec.instructions = {op::kDefCfa, 7, 8, op::advance_loc(1)};
  const size_t cie = cfi.cie(spec);
  cfi.pcrel_fde(cie, 0x1000, 0x20, {});
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_EQ(table->stats.fdes_malformed, 1u);  // the FDE of that CIE
  EXPECT_TRUE(table->rows.empty()) << dump(table->rows);
  EXPECT_THAT(table->first_problem, HasSubstr("DW_CFA_advance_loc in CIE at 0x0"));
}

// Three good functions around broken FDEs: the good ones give exactly the
// rows they give without the broken ones, and each broken FDE counts once.
TEST(UnwindTableMalformed, ACorruptedFdeCostsOnlyThatFde) {
  const Bytes first = {op::advance_loc(1), op::kDefCfaOffset, 16, op::offset(6), 2};
  const Bytes second = {op::advance_loc(4), op::kDefCfaOffset, 32};
  const Bytes third = {op::advance_loc(2), op::kDefCfaOffset, 24};
  CfiBuilder reference(CfiFormat::kEhFrame, kEhFrameVaddr);
  {
    const size_t cie = reference.cie({});
    reference.pcrel_fde(cie, 0x1000, 0x20, first);
    reference.pcrel_fde(cie, 0x1100, 0x20, second);
    reference.pcrel_fde(cie, 0x1200, 0x20, third);
    reference.zero_terminator();
  }
  auto good = build_crafted(reference);
  ASSERT_TRUE(good.ok()) << good.error().message;
  ASSERT_EQ(good->rows.size(), 9u) << dump(good->rows);

  struct Case {
    std::string name;
    std::function<size_t(CfiBuilder&, size_t cie)> broken;  // appends the broken FDE, returns its offset
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"unknown opcode",
       [](CfiBuilder& cfi, size_t cie) {
         return cfi.pcrel_fde(cie, 0x1080, 0x20, {op::advance_loc(1), 0x1e});
       },
       "unknown call-frame instruction 0x1e"},
      {"truncated program",
       [](CfiBuilder& cfi, size_t cie) { return cfi.pcrel_fde(cie, 0x1080, 0x20, {op::kDefCfa, 7}); },
       "operands run past the end"},
      {"bad CIE pointer",
       [](CfiBuilder& cfi, size_t) {
         // Points 4 bytes into the CIE.
         return cfi.fde(4, [](uint64_t) { return cat({le(0, 4), le(0x20, 4)}); }, {});
       },
       "is not the start of a CIE"},
      {"augmentation data longer than the FDE",
       [](CfiBuilder& cfi, size_t cie) {
         // No augmentation data written: the first instruction byte is
         // read as its length, 0x7f bytes, far more than the FDE holds.
         return cfi.fde(cie, [](uint64_t field) { return cat({le(0x1080 - field, 4), le(0x20, 4)}); }, Bytes{0x7f},
                        std::nullopt);
       },
       "augmentation data"},
      {"over-long length swallowing the next entry",
       [](CfiBuilder& cfi, size_t cie) {
         // Its length also covers a dummy entry after it (0x1c, a length
         // that decodes as DW_CFA_lo_user: not an x86-64 instruction).
         const size_t at = cfi.pcrel_fde(cie, 0x1080, 0x20, {op::kNop});
         cfi.raw(cat({le(0x1c, 4), Bytes(0x1c, op::kNop)}));
         Bytes& bytes = cfi.bytes();
         const uint32_t swallowing = static_cast<uint32_t>(bytes.size() - at - 4);
         const Bytes length = le(swallowing, 4);
         std::copy(length.begin(), length.end(), bytes.begin() + static_cast<long>(at));
         return at;
       },
       "DW_CFA_<unknown 0x1c>"},
  };
  for (const Case& c : cases) {
    CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
    const size_t cie = cfi.cie({});
    cfi.pcrel_fde(cie, 0x1000, 0x20, first);
    const size_t broken = c.broken(cfi, cie);
    cfi.pcrel_fde(cie, 0x1100, 0x20, second);
    cfi.pcrel_fde(cie, 0x1200, 0x20, third);
    cfi.zero_terminator();
    auto table = build_crafted(cfi);
    ASSERT_TRUE(table.ok()) << c.name << ": " << table.error().message;
    EXPECT_EQ(table->rows, good->rows) << c.name << "\n" << dump(table->rows);
    EXPECT_EQ(table->stats.fdes_malformed, 1u) << c.name;
    EXPECT_EQ(table->stats.fdes, 4u) << c.name;
    // Named by its own offset, or (for instructions) by the instruction's
    // and "FDE at" its own.
    EXPECT_THAT(table->first_problem, HasSubstr("crafted: .eh_frame+0x")) << c.name;
    EXPECT_THAT(table->first_problem, AnyOf(HasSubstr("crafted: .eh_frame+" + fmt_hex(broken) + ":"),
                                            HasSubstr("FDE at " + fmt_hex(broken) + " ")))
        << c.name;
    EXPECT_THAT(table->first_problem, HasSubstr(c.reason)) << c.name;
  }
}

// A broken FDE that overlaps a good one must not take its addresses with
// it: the good FDE's rows come back where the broken one would have won.
TEST(UnwindTableMalformed, ABrokenFdeDoesNotShadowTheFdeItOverlaps) {
  CfiBuilder cfi(CfiFormat::kEhFrame, kEhFrameVaddr);
  const size_t cie = cfi.cie({});
  // Starts first, so it would win the overlap, but its program is broken.
  cfi.pcrel_fde(cie, 0x1000, 0x40, {op::advance_loc(1), op::kGnuWindowSave});
  cfi.pcrel_fde(cie, 0x1010, 0x20, {op::advance_loc(4), op::kDefCfaOffset, 32});
  cfi.zero_terminator();
  auto table = build_crafted(cfi);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const std::vector<UnwindRow> expected = {rsp(0x1010, 8), rsp(0x1014, 32), end_marker(0x1030)};
  EXPECT_EQ(table->rows, expected) << dump(table->rows);
  EXPECT_EQ(table->stats.fdes_malformed, 1u);
  EXPECT_EQ(table->stats.fdes_covered, 0u);
  EXPECT_THAT(table->first_problem, HasSubstr("DW_CFA_GNU_window_save"));
}

// The builder sizes its row vector from fde_row_bound once: it must never
// be below what an FDE's program produces.
TEST(UnwindTableOracle, RowBoundCoversEveryFdeOfLibc) {
  auto cfi = read_elf_cfi("/lib/x86_64-linux-gnu/libc.so.6", CfiReadOptions{"/nonexistent", false});
  ASSERT_TRUE(cfi.ok()) << cfi.error().message;
  ASSERT_FALSE(cfi->sections.empty());
  auto parsed = parse_cfi(cfi->sections[0].view());
  ASSERT_TRUE(parsed.ok());
  ASSERT_GT(parsed->fdes.size(), 1000u);
  CfaProgramRunner runner;
  std::vector<CfaRow> rows;
  size_t bound_total = 0;
  size_t rows_total = 0;
  for (const Fde& fde : parsed->fdes) {
    auto cie_state = runner.run_cie(*parsed, parsed->cies[fde.cie_index]);
    ASSERT_TRUE(cie_state.ok()) << cie_state.error().message;
    ASSERT_TRUE(runner.run_fde(*parsed, fde, *cie_state, rows).ok());
    const size_t bound = fde_row_bound(fde.instructions);
    ASSERT_GE(bound, rows.size()) << "FDE at " << fmt_hex(fde.offset);
    bound_total += bound;
    rows_total += rows.size();
  }
  // An over-estimate, but not a wild one.
  EXPECT_LE(bound_total, rows_total * 3 / 2);
}

TEST(UnwindTableMalformed, RandomMutationsOfARealEhFrame) {
  auto cfi = read_elf_cfi("/lib/x86_64-linux-gnu/libc.so.6", CfiReadOptions{"/nonexistent", false});
  ASSERT_TRUE(cfi.ok()) << cfi.error().message;
  ASSERT_FALSE(cfi->sections.empty());
  const CfiSection& eh_frame = cfi->sections[0];
  const Bytes original(eh_frame.data.get(), eh_frame.data.get() + eh_frame.size);
  const char* env = std::getenv("OMNIPROF_FUZZ_ITERATIONS");
  const int iterations = env != nullptr ? std::atoi(env) : 300;
  std::mt19937_64 random(0x5eed);
  size_t accepted = 0;
  size_t rejected = 0;
  size_t damaged = 0;  // built with FDEs skipped or the section cut short
  for (int i = 0; i < iterations; ++i) {
    Bytes mutated = original;
    switch (random() % 4) {
      case 0:  // flip a few bytes anywhere
        for (int n = 1 + random() % 8; n > 0; --n) mutated[random() % mutated.size()] ^= 1u << (random() % 8);
        break;
      case 1:  // random bytes over a short stretch
      {
        const size_t at = random() % mutated.size();
        for (size_t j = at; j < std::min(mutated.size(), at + 1 + random() % 16); ++j) mutated[j] = random();
        break;
      }
      case 2:  // truncate
        mutated.resize(random() % mutated.size());
        break;
      default:  // an entry length field: the most sensitive bytes
      {
        const size_t at = (random() % (mutated.size() / 4)) * 4;
        mutated[at] = random();
        mutated[at + 3] = random() % 3 == 0 ? 0xff : mutated[at + 3];
        break;
      }
    }
    CfiSectionView view = eh_frame.view();
    view.bytes = mutated;
    auto table = UnwindTableBuilder::build_from_sections(std::span<const CfiSectionView>(&view, 1), cfi->code_ranges);
    if (!table.ok()) {
      ++rejected;
      EXPECT_THAT(table.error().message, HasSubstr(".eh_frame+0x"));
      continue;
    }
    ++accepted;
    for (size_t r = 1; r < table->rows.size(); ++r) ASSERT_LT(table->rows[r - 1].pc, table->rows[r].pc);
    if (!table->rows.empty()) ASSERT_EQ(table->rows.back().cfa, CfaRule::kEndOfFunction);
    const bool problems = table->stats.fdes_malformed > 0 || table->stats.sections_cut_short > 0;
    EXPECT_EQ(problems, !table->first_problem.empty());
    if (problems) {
      ++damaged;
      EXPECT_THAT(table->first_problem, HasSubstr(".eh_frame+0x"));
    }
  }
  std::cout << "[ mutation ] " << iterations << " mutated copies of libc's .eh_frame: " << accepted << " built ("
            << damaged << " with FDEs skipped or cut short), " << rejected << " rejected with an error\n";
  EXPECT_GT(damaged, 0u);
}

// ---------------------------------------------------------------------------
// ELF files built at test time

class UnwindTableFromGcc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_tool("gcc") || !have_tool("objcopy")) SKIP_UNLESS_CI("gcc or objcopy not installed");
    if (!have_tool("readelf")) SKIP_UNLESS_CI("readelf (binutils) not installed");
    ASSERT_FALSE(dir_.path().empty());
    source_ = (dir_.path() / "fixture.c").string();
    std::ofstream(source_) << R"(#include <stdio.h>
__attribute__((noinline)) int leaf(int x) { return x * 3; }
__attribute__((noinline)) int with_buffer(int x) {
  volatile char buffer[200];
  buffer[0] = (char)x;
  return leaf(buffer[0]) + 1;
}
__attribute__((noinline)) long with_frame_pointer(long n) {
  long* p = __builtin_alloca(n * sizeof(long));
  for (long i = 0; i < n; ++i) p[i] = i;
  return p[n - 1] + with_buffer((int)n);
}
int main(int argc, char** argv) {
  (void)argv;
  printf("%ld\n", with_frame_pointer(argc + 3));
  return 0;
}
)";
  }

  // Compiles the fixture; "" on failure (recorded).
  std::string compile(const std::string& name, const std::string& flags) {
    const std::string out = (dir_.path() / name).string();
    CommandResult result =
        run_command("gcc -O2 -Wl,--build-id " + flags + " -o " + quote(out) + " " + quote(source_) + " 2>&1");
    if (result.status != 0) {
      ADD_FAILURE() << "gcc " << flags << ": " << result.output;
      return "";
    }
    return out;
  }

  bool run(const std::string& command) {
    CommandResult result = run_command(command + " 2>&1");
    if (result.status != 0) ADD_FAILURE() << command << ": " << result.output;
    return result.status == 0;
  }

  TempDir dir_;
  std::string source_;
};

const TableSource* find_source(const UnwindTable& table, const std::string& section) {
  for (const TableSource& source : table.sources) {
    if (source.section == section) return &source;
  }
  return nullptr;
}

TEST_F(UnwindTableFromGcc, DebugFrameOnly) {
  // Without asynchronous unwind tables gcc writes the CFI of C code to
  // .debug_frame; only the C runtime's objects (crt1.o...) bring .eh_frame.
  const std::string binary = compile("debug_frame_only", "-g -fno-asynchronous-unwind-tables");
  ASSERT_FALSE(binary.empty());
  auto table = UnwindTableBuilder::build(binary);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const TableSource* debug_frame = find_source(*table, ".debug_frame");
  ASSERT_NE(debug_frame, nullptr);
  EXPECT_GE(debug_frame->fdes_used, 4u);  // main, leaf, with_buffer, with_frame_pointer
  EXPECT_FALSE(debug_frame->compressed);
  check_against_readelf(binary, {}, 8);
  // Every function of the fixture has a real rule at its first byte.
  auto elf = ElfFile::open(binary);
  ASSERT_TRUE(elf.ok());
  auto symbols = elf->symbols();
  ASSERT_TRUE(symbols.ok());
  for (const ElfSymbol& symbol : *symbols) {
    if (symbol.name != "leaf" && symbol.name != "with_buffer" && symbol.name != "with_frame_pointer" &&
        symbol.name != "main") {
      continue;
    }
    const UnwindRow* row = table->find(symbol.value);
    ASSERT_NE(row, nullptr) << symbol.name;
    EXPECT_EQ(row->cfa, CfaRule::kRsp) << symbol.name;
    EXPECT_EQ(row->cfa_offset, 8) << symbol.name;
  }
  // _start (from crt1.o's .eh_frame) is the outermost frame.
  EXPECT_GE(table->stats.outermost_rows, 1u);
}

TEST_F(UnwindTableFromGcc, CompressedDebugFrame) {
  const std::string plain = compile("plain", "-g -fno-asynchronous-unwind-tables");
  ASSERT_FALSE(plain.empty());
  const std::string objcopied = (dir_.path() / "objcopy_compressed").string();
  ASSERT_TRUE(run("objcopy --compress-debug-sections=zlib " + quote(plain) + " " + quote(objcopied)));
  const std::string gz = compile("gz_compressed", "-g -gz=zlib -fno-asynchronous-unwind-tables");
  ASSERT_FALSE(gz.empty());

  auto reference = UnwindTableBuilder::build(plain);
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  for (const std::string& binary : {objcopied, gz}) {
    auto table = UnwindTableBuilder::build(binary);
    ASSERT_TRUE(table.ok()) << table.error().message;
    const TableSource* debug_frame = find_source(*table, ".debug_frame");
    ASSERT_NE(debug_frame, nullptr) << binary;
    EXPECT_TRUE(debug_frame->compressed) << binary << ": .debug_frame was expected to be SHF_COMPRESSED";
    EXPECT_EQ(table->rows, reference->rows) << binary;
    check_against_readelf(binary, {}, 8);
  }
}

TEST_F(UnwindTableFromGcc, SeparateDebugFileByBuildIdAndDebuglink) {
  const std::string full = compile("full", "-g -fno-asynchronous-unwind-tables");
  ASSERT_FALSE(full.empty());
  auto reference = UnwindTableBuilder::build(full);
  ASSERT_TRUE(reference.ok()) << reference.error().message;

  // Debug file in a debug root, by build ID (compressed there, as Debian's
  // dh_strip does); the stripped file keeps only .eh_frame.
  const std::string debug = (dir_.path() / "full.debug").string();
  const std::string stripped = (dir_.path() / "stripped").string();
  ASSERT_TRUE(run("objcopy --only-keep-debug --compress-debug-sections=zlib " + quote(full) + " " + quote(debug)));
  ASSERT_TRUE(run("objcopy --strip-debug --add-gnu-debuglink=" + quote(debug) + " " + quote(full) + " " +
                  quote(stripped)));
  auto build_id = read_build_id(full);
  ASSERT_TRUE(build_id.ok() && build_id->size() > 2);
  const fs::path root = dir_.path() / "debug-root";
  const fs::path by_id = root / ".build-id" / build_id->substr(0, 2) / (build_id->substr(2) + ".debug");
  fs::create_directories(by_id.parent_path());
  fs::copy_file(debug, by_id);

  BuildOptions without_debug_file;
  without_debug_file.debug_root = (dir_.path() / "empty-root").string();
  without_debug_file.use_debug_file = false;
  auto alone = UnwindTableBuilder::build(stripped, without_debug_file);
  ASSERT_TRUE(alone.ok()) << alone.error().message;
  EXPECT_EQ(find_source(*alone, ".debug_frame"), nullptr);
  EXPECT_LT(alone->rows.size(), reference->rows.size());

  BuildOptions with_root;
  with_root.debug_root = root.string();
  auto by_build_id = UnwindTableBuilder::build(stripped, with_root);
  ASSERT_TRUE(by_build_id.ok()) << by_build_id.error().message;
  EXPECT_EQ(by_build_id->debug_file, by_id.string());
  const TableSource* separate = find_source(*by_build_id, ".debug_frame");
  ASSERT_NE(separate, nullptr);
  EXPECT_TRUE(separate->from_debug_file);
  EXPECT_TRUE(separate->compressed);
  EXPECT_EQ(by_build_id->rows, reference->rows);
  check_against_readelf(stripped, with_root, 8);

  // By .gnu_debuglink: the debug file next to the binary, an empty root.
  BuildOptions empty_root;
  empty_root.debug_root = (dir_.path() / "empty-root").string();
  auto by_link = UnwindTableBuilder::build(stripped, empty_root);
  ASSERT_TRUE(by_link.ok()) << by_link.error().message;
  EXPECT_EQ(fs::path(by_link->debug_file).filename(), "full.debug");
  EXPECT_EQ(by_link->rows, reference->rows);
}

// The function extents of a stripped binary whose C code has CFI only in
// .debug_frame, and that only in its separate debug file: read from there
// (by .gnu_debuglink), as the table builder reads its rows.
TEST_F(UnwindTableFromGcc, FunctionRangesFromTheSeparateDebugFilesDebugFrame) {
  const std::string full = compile("full", "-g -fno-asynchronous-unwind-tables");
  ASSERT_FALSE(full.empty());
  const std::string debug = (dir_.path() / "full.debug").string();
  const std::string stripped = (dir_.path() / "stripped").string();
  ASSERT_TRUE(run("objcopy --only-keep-debug " + quote(full) + " " + quote(debug)));
  ASSERT_TRUE(run("objcopy --strip-all --add-gnu-debuglink=" + quote(debug) + " " + quote(full) + " " +
                  quote(stripped)));
  auto elf = ElfFile::open(full);
  ASSERT_TRUE(elf.ok());
  auto symbols = elf->symbols();
  ASSERT_TRUE(symbols.ok());

  CfiReadOptions alone;
  alone.use_debug_file = false;
  auto without = FunctionRanges::read(stripped, alone);
  ASSERT_TRUE(without.ok()) << without.error().message;
  CfiReadOptions with_debuglink;
  with_debuglink.debug_root = (dir_.path() / "empty-root").string();
  auto with = FunctionRanges::read(stripped, with_debuglink);
  ASSERT_TRUE(with.ok()) << with.error().message;
  EXPECT_GT(with->size(), without->size());
  size_t checked = 0;
  for (const ElfSymbol& symbol : *symbols) {
    if (symbol.name != "leaf" && symbol.name != "with_buffer" && symbol.name != "with_frame_pointer" &&
        symbol.name != "main") {
      continue;
    }
    ++checked;
    EXPECT_FALSE(without->find(symbol.value)) << symbol.name << ": .eh_frame was expected to lack it";
    auto found = with->find(symbol.value + symbol.size - 1);
    ASSERT_TRUE(found) << symbol.name;
    EXPECT_EQ(found->start, symbol.value) << symbol.name;
  }
  EXPECT_EQ(checked, 4u);
}

// FDEs inside others (the same function in .eh_frame and .debug_frame, a
// nested description) add nothing; two that overlap are cut so that every
// address has one function.
TEST(FunctionRangesCrafted, NestedFdesAddNothingAndOverlapsAreCut) {
  CfiBuilder eh(CfiFormat::kEhFrame, kEhFrameVaddr);
  const size_t eh_cie = eh.cie(CieSpec{});
  eh.pcrel_fde(eh_cie, 0x1000, 0x100, {});
  eh.pcrel_fde(eh_cie, 0x1040, 0x10, {});   // inside the first
  eh.pcrel_fde(eh_cie, 0x1200, 0x100, {});
  eh.pcrel_fde(eh_cie, 0x1280, 0x100, {});  // overlaps the third
  eh.pcrel_fde(eh_cie, 0x5000, 0, {});      // empty: no function
  CfiBuilder debug(CfiFormat::kDebugFrame, 0);
  CieSpec debug_cie_spec;
  debug_cie_spec.augmentation = "";
  const size_t debug_cie = debug.cie(debug_cie_spec);
  debug.absolute_fde(debug_cie, 0x1000, 0x100, {});  // the first again
  debug.absolute_fde(debug_cie, 0x3000, 0x80, {});   // only here
  const CfiSectionView views[] = {eh.view(), debug.view()};
  auto ranges = FunctionRanges::from_sections(views);
  EXPECT_EQ(ranges.size(), 4u);
  auto start_at = [&](uint64_t address) -> std::optional<uint64_t> {
    auto found = ranges.find(address);
    return found ? std::optional<uint64_t>(found->start) : std::nullopt;
  };
  EXPECT_EQ(start_at(0x1000), 0x1000u);
  EXPECT_EQ(start_at(0x1045), 0x1000u);
  EXPECT_EQ(start_at(0x10ff), 0x1000u);
  EXPECT_EQ(start_at(0x1100), std::nullopt);
  EXPECT_EQ(start_at(0x1270), 0x1200u);
  EXPECT_EQ(start_at(0x1290), 0x1280u);
  EXPECT_EQ(start_at(0x137f), 0x1280u);
  EXPECT_EQ(start_at(0x3010), 0x3000u);
  EXPECT_EQ(start_at(0x5000), std::nullopt);
  EXPECT_EQ(start_at(0xfff), std::nullopt);
}

TEST_F(UnwindTableFromGcc, NoCfiAtAll) {
  // No C runtime, no unwind tables: nothing to read, which is not an error.
  std::ofstream((dir_.path() / "bare.c").string())
      << "void _start(void) { for (;;) __asm__ volatile(\"\" ::: \"memory\"); }\n";
  const std::string binary = (dir_.path() / "bare").string();
  ASSERT_TRUE(run("gcc -O2 -nostdlib -static -fno-asynchronous-unwind-tables -fno-unwind-tables -o " + quote(binary) +
                  " " + quote((dir_.path() / "bare.c").string())));
  auto table = UnwindTableBuilder::build(binary);
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_TRUE(table->no_cfi);
  EXPECT_TRUE(table->rows.empty());
  EXPECT_TRUE(table->sources.empty());
  std::ostringstream text;
  print_unwind_table(*table, text);
  EXPECT_THAT(text.str(), HasSubstr(" rows=0 sources=- no_cfi\n"));
}

TEST(UnwindTableElf, EhFrameThroughProgramHeadersOnly) {
  // libc with its section header table removed from the ELF header: the
  // builder must find .eh_frame through PT_GNU_EH_FRAME and .eh_frame_hdr.
  TempDir dir;
  const fs::path copy = dir.path() / "libc-no-sections.so";
  fs::copy_file("/lib/x86_64-linux-gnu/libc.so.6", copy);
  {
    std::fstream file(copy, std::ios::in | std::ios::out | std::ios::binary);
    Elf64_Ehdr header{};
    file.read(reinterpret_cast<char*>(&header), sizeof(header));
    header.e_shoff = 0;
    header.e_shnum = 0;
    header.e_shstrndx = 0;
    file.seekp(0);
    file.write(reinterpret_cast<const char*>(&header), sizeof(header));
  }
  BuildOptions options;
  options.use_debug_file = false;
  auto original = UnwindTableBuilder::build("/lib/x86_64-linux-gnu/libc.so.6", options);
  ASSERT_TRUE(original.ok()) << original.error().message;
  auto through_hdr = UnwindTableBuilder::build(copy.string(), options);
  ASSERT_TRUE(through_hdr.ok()) << through_hdr.error().message;
  ASSERT_EQ(through_hdr->sources.size(), 1u);
  EXPECT_TRUE(through_hdr->sources[0].through_eh_frame_hdr);
  EXPECT_EQ(through_hdr->stats.fdes, original->stats.fdes);
  EXPECT_EQ(through_hdr->rows, original->rows);
}

TEST(UnwindTableElf, MissingAndForeignFiles) {
  auto missing = UnwindTableBuilder::build("/nonexistent/libfoo.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr("/nonexistent/libfoo.so"));
  TempDir dir;
  const fs::path text = dir.path() / "not-elf";
  std::ofstream(text) << "hello";
  auto not_elf = UnwindTableBuilder::build(text.string());
  ASSERT_FALSE(not_elf.ok());
  EXPECT_THAT(not_elf.error().message, HasSubstr(text.string()));
}

// ---------------------------------------------------------------------------
// Text form

TEST(UnwindTableText, PrintsTheDocumentedFormat) {
  UnwindTable table;
  table.path = "/usr/lib/libexample.so";
  table.build_id = "0123abcd";
  table.sources.push_back(TableSource{"/usr/lib/libexample.so", ".eh_frame", false, false, false, 2, 2});
  table.sources.push_back(TableSource{"/usr/lib/debug/.build-id/01/23abcd.debug", ".debug_frame", true, true, false, 1, 1});
  table.rows = {
      rsp(0x1a2b0, 8),
      UnwindRow{0x1a2b1, CfaRule::kRbp, RbpRule::kAtCfaOffset, 16, -16},
      UnwindRow{0x1a2c0, CfaRule::kPltExpression, RbpRule::kUnchanged, 11, 0},
      UnwindRow{0x1a2d0, CfaRule::kUnsupported, RbpRule::kUnsupported, 0, 0},
      UnwindRow{0x1a2e0, CfaRule::kOutermost, RbpRule::kUnchanged, 0, 0},
      UnwindRow{0x1a2f0, CfaRule::kRsp, RbpRule::kUnchanged, -8, 0},
      end_marker(0x1a300),
  };
  std::ostringstream text;
  print_unwind_table(table, text);
  EXPECT_EQ(text.str(),
            "# unwind-table v1 file=/usr/lib/libexample.so build_id=0123abcd rows=7 "
            "sources=.eh_frame,.debug_frame(debug-file,zlib)\n"
            "0x000000000001a2b0 cfa=rsp+8 rbp=unchanged\n"
            "0x000000000001a2b1 cfa=rbp+16 rbp=cfa-16\n"
            "0x000000000001a2c0 cfa=plt11 rbp=unchanged\n"
            "0x000000000001a2d0 cfa=unsupported rbp=unsupported\n"
            "0x000000000001a2e0 outermost\n"
            "0x000000000001a2f0 cfa=rsp-8 rbp=unchanged\n"
            "0x000000000001a300 end\n");
}

}  // namespace
}  // namespace omniprof::unwind
