// Interpreter of DWARF call-frame instructions for x86-64: runs a CIE's
// initial instructions and an FDE's instructions and produces, for each
// address range of the FDE, the rule for the CFA and for the three registers
// a stack walker needs: RBP (DWARF register 6), RSP (7, whose value in the
// caller is the CFA unless a rule says otherwise) and the return address (16).
// Rules for other registers are parsed and validated but not kept.
//
// Every instruction of DWARF 5 section 6.4.2 is either handled or rejected
// with an error naming the instruction, the FDE (file, offset, PC range) and
// the byte offset of the instruction; operands running past the end of the
// FDE are errors, never reads past it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/support/cfi/dwarf_cfi.h"

namespace omniprof::unwind {

// x86-64 DWARF register numbers (psABI, "DWARF Register Number Mapping").
namespace x86_64_register {
inline constexpr uint64_t kRbp = 6;
inline constexpr uint64_t kRsp = 7;
inline constexpr uint64_t kReturnAddress = 16;
}  // namespace x86_64_register

// How to find a register's value in the caller.
struct RegisterRule {
  enum class Kind : uint8_t {
    kUnspecified,    // no instruction mentioned it: callee-saved registers keep their value
    kUndefined,      // DW_CFA_undefined: not recoverable (for the return address: outermost frame)
    kSameValue,      // DW_CFA_same_value
    kOffset,         // saved at CFA + value
    kValOffset,      // is CFA + value
    kRegister,       // is in register `value`
    kExpression,     // saved at the address an expression computes
    kValExpression,  // is the value an expression computes
  };
  Kind kind = Kind::kUnspecified;
  int64_t value = 0;

  bool operator==(const RegisterRule&) const = default;
};

// How to compute the CFA (the caller's stack pointer before the call).
struct CfaDefinition {
  enum class Kind : uint8_t { kRegisterOffset, kExpression };
  Kind kind = Kind::kRegisterOffset;
  uint64_t reg = 0;
  int64_t offset = 0;
  std::span<const uint8_t> expression;  // kExpression: DWARF expression bytes, into the section
};

struct FrameState {
  CfaDefinition cfa;
  RegisterRule rbp;
  RegisterRule rsp;
  RegisterRule return_address;
};

// `state` applies from `pc` to the next row's pc (or the end of the FDE).
struct CfaRow {
  uint64_t pc = 0;
  FrameState state;
};

// "DW_CFA_def_cfa_offset"; "DW_CFA_<unknown 0x1e>" for opcodes DWARF does not
// define.
std::string_view cfa_opcode_name(uint8_t opcode);

// At most how many rows run_fde produces for an FDE with these
// instructions: one, plus one per byte that could be a location-changing
// instruction. A quick over-estimate (so the table builder can size its row
// vector once), not a decoder: bytes it cannot make sense of are run_fde's
// to report.
size_t fde_row_bound(std::span<const uint8_t> instructions);

// Holds the scratch space (the DW_CFA_remember_state stack) reused across
// FDEs, so running a program allocates nothing once it has warmed up.
class CfaProgramRunner {
 public:
  // The rules a CIE's initial instructions set up: the state every FDE of
  // that CIE starts from and DW_CFA_restore returns to.
  Result<FrameState> run_cie(const ParsedCfi& cfi, const Cie& cie);

  // Replaces `rows` with the FDE's table: strictly increasing pcs, all in
  // [fde.pc_begin, fde.pc_end), the first at pc_begin. `cie_state` is
  // run_cie() of the FDE's CIE.
  Result<void> run_fde(const ParsedCfi& cfi, const Fde& fde, const FrameState& cie_state, std::vector<CfaRow>& rows);

 private:
  std::vector<FrameState> remembered_;
};

}  // namespace omniprof::unwind
