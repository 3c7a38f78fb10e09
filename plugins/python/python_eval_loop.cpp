#include "python_eval_loop.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "omniprof/support/cfi/cfa_program.h"
#include "omniprof/support/cfi/elf_cfi.h"

namespace omniprof::python {

namespace {

// Targets outside [start, end) of the rel32 branches in `code` (at `start`):
// jcc (0F 80..8F) and jmp (E9). Byte patterns, not decoded instructions: a
// pattern inside another instruction gives a target too, which the FDE
// tests below (an exact, unnamed FDE start of a cold part) then have to pass.
std::set<uint64_t> branch_targets(const std::vector<uint8_t>& code, uint64_t start) {
  std::set<uint64_t> targets;
  const uint64_t end = start + code.size();
  auto rel32 = [&](size_t at) {
    int32_t value;
    std::memcpy(&value, code.data() + at, sizeof value);
    return static_cast<int64_t>(value);
  };
  auto add = [&](size_t next, int64_t displacement) {
    const uint64_t target = start + next + static_cast<uint64_t>(displacement);
    if (target < start || target >= end) targets.insert(target);
  };
  for (size_t i = 0; i + 5 <= code.size(); ++i) {
    if (code[i] == 0xe9) add(i + 5, rel32(i + 1));
    if (i + 6 <= code.size() && code[i] == 0x0f && (code[i + 1] & 0xf0) == 0x80) add(i + 6, rel32(i + 2));
  }
  return targets;
}

// Whether the FDE's first row has the CFA where a function's entry has it
// (RSP+8: the return address just pushed).
Result<bool> starts_like_a_function(unwind::CfaProgramRunner& runner, const unwind::ParsedCfi& cfi,
                                    const unwind::Fde& fde) {
  auto cie_state = runner.run_cie(cfi, cfi.cies.at(fde.cie_index));
  if (!cie_state) return cie_state.error();
  std::vector<unwind::CfaRow> rows;
  if (auto r = runner.run_fde(cfi, fde, *cie_state, rows); !r) return r.error();
  if (rows.empty()) return true;  // nothing says otherwise: not taken for a cold part
  const unwind::CfaDefinition& cfa = rows.front().state.cfa;
  return cfa.kind == unwind::CfaDefinition::Kind::kRegisterOffset && cfa.reg == unwind::x86_64_register::kRsp &&
         cfa.offset == 8;
}

}  // namespace

Result<std::vector<CodeRange>> unnamed_cold_parts(const ElfFile& elf, const std::string& path, uint64_t start,
                                                 uint64_t size, const std::function<bool(uint64_t)>& named) {
  auto code = elf.read_at_vaddr(start, size);
  if (!code) return code.error();
  std::set<uint64_t> targets = branch_targets(*code, start);
  for (auto it = targets.begin(); it != targets.end();) it = named(*it) ? targets.erase(it) : std::next(it);
  std::vector<CodeRange> parts;
  if (targets.empty()) return parts;

  unwind::CfiReadOptions options;
  options.use_debug_file = false;  // a debug file would have the .cold symbol
  auto cfi = unwind::read_elf_cfi(path, options);
  if (!cfi) return cfi.error();
  unwind::CfaProgramRunner runner;
  for (const unwind::CfiSection& section : cfi->sections) {
    unwind::CfiSectionWalker walker(section.view());
    walker.read_cies();
    unwind::Fde fde;
    while (walker.next_fde(fde)) {
      if (!targets.count(fde.pc_begin) || !unwind::fde_in_code(fde, cfi->code_ranges)) continue;
      auto function = starts_like_a_function(runner, walker.cfi(), fde);
      if (!function) return function.error();
      if (*function) continue;
      CodeRange part{fde.pc_begin, fde.pc_end};
      if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
    }
  }
  return parts;
}

}  // namespace omniprof::python
