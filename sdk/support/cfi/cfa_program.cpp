#include "omniprof/support/cfi/cfa_program.h"

#include <array>
#include <cstring>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "omniprof/support/cfi/byte_reader.h"
#include "omniprof/support/cfi/pointer_encoding.h"

namespace omniprof::unwind {
namespace {

// DW_CFA_* opcodes (DWARF 5, table 7.29; GNU extensions from GCC's dwarf2.def).
// The top two bits hold the three "primary" opcodes with an operand in the
// low six bits.
enum : uint8_t {
  kAdvanceLoc = 0x40,
  kOffset = 0x80,
  kRestore = 0xc0,
  kNop = 0x00,
  kSetLoc = 0x01,
  kAdvanceLoc1 = 0x02,
  kAdvanceLoc2 = 0x03,
  kAdvanceLoc4 = 0x04,
  kOffsetExtended = 0x05,
  kRestoreExtended = 0x06,
  kUndefined = 0x07,
  kSameValue = 0x08,
  kRegister = 0x09,
  kRememberState = 0x0a,
  kRestoreState = 0x0b,
  kDefCfa = 0x0c,
  kDefCfaRegister = 0x0d,
  kDefCfaOffset = 0x0e,
  kDefCfaExpression = 0x0f,
  kExpression = 0x10,
  kOffsetExtendedSf = 0x11,
  kDefCfaSf = 0x12,
  kDefCfaOffsetSf = 0x13,
  kValOffset = 0x14,
  kValOffsetSf = 0x15,
  kValExpression = 0x16,
  kMipsAdvanceLoc8 = 0x1d,
  kGnuWindowSave = 0x2d,
  kGnuArgsSize = 0x2e,
  kGnuNegativeOffsetExtended = 0x2f,
};

// Nesting deeper than this is certainly corrupt data; without a bound a few
// megabytes of DW_CFA_remember_state would allocate gigabytes.
constexpr size_t kMaxRememberedStates = 1024;

// The rule of `reg` if it is one of the registers we track, else nullptr.
// (State is FrameState or const FrameState.)
template <typename State>
auto* tracked_rule(State& state, uint64_t reg) {
  using Rule = decltype(&state.rbp);
  switch (reg) {
    case x86_64_register::kRbp: return &state.rbp;
    case x86_64_register::kRsp: return &state.rsp;
    case x86_64_register::kReturnAddress: return &state.return_address;
    default: return Rule{nullptr};
  }
}

// One run of an instruction sequence: a CIE's initial instructions (fde ==
// nullptr, no rows) or an FDE's.
class Interpreter {
 public:
  Interpreter(const ParsedCfi& cfi, const Cie& cie, const Fde* fde, std::vector<FrameState>& remembered)
      : cfi_(cfi), cie_(cie), fde_(fde), remembered_(remembered) {}

  // `initial` is what DW_CFA_restore returns to (nullptr inside the CIE).
  Result<void> run(std::span<const uint8_t> instructions, FrameState& state, const FrameState* initial,
                   std::vector<CfaRow>* rows) {
    remembered_.clear();
    uint64_t loc = fde_ != nullptr ? fde_->pc_begin : 0;
    const uint64_t end = fde_ != nullptr ? fde_->pc_end : 0;
    bool emitted_at_loc = false;  // a row for `loc` exists (advances by 0 replace it)
    auto emit = [&] {
      if (rows == nullptr || loc >= end) return;  // past the FDE's end: describes nothing
      if (emitted_at_loc) {
        rows->back().state = state;
      } else {
        CfaRow& row = rows->emplace_back();  // one copy of the state, not two
        row.pc = loc;
        row.state = state;
        emitted_at_loc = true;
      }
    };

    ByteReader reader(instructions);
    while (!reader.at_end()) {
      const uint8_t* const at = reader.position();
      const uint8_t byte = reader.u8();
      uint8_t opcode = byte;
      uint8_t operand = 0;
      if ((byte & 0xc0) != 0) {
        opcode = byte & 0xc0;
        operand = byte & 0x3f;
      }
      auto error = [&](std::string_view reason) {
        return make_error(fmt::format("{}: {} in {}: {}", cfi_.where(cfi_.offset_of(at)), cfa_opcode_name(opcode),
                                      owner(), reason));
      };
      auto truncated = [&] { return error("operands run past the end of the instructions"); };
      // Location-changing instructions: the current row ends here. The
      // most frequent instruction, so it returns a bool (a Result carries a
      // string) and advance_error says why afterwards.
      auto advance = [&](uint64_t delta) -> bool {
        uint64_t scaled = 0;
        if (fde_ == nullptr || __builtin_mul_overflow(delta, cie_.code_alignment_factor, &scaled) ||
            scaled > std::numeric_limits<uint64_t>::max() - loc) {
          return false;
        }
        emit();
        if (scaled != 0) emitted_at_loc = false;
        loc += scaled;
        return true;
      };
      auto advance_error = [&](uint64_t delta) {
        if (fde_ == nullptr) return error("location instructions are not valid in a CIE's initial instructions");
        return error(fmt::format("advancing {:#x} by {} x {} overflows", loc, delta, cie_.code_alignment_factor));
      };
      // DWARF "factored" offsets: operand x data alignment factor.
      auto factored = [&](int64_t value, int64_t& out) {
        return !__builtin_mul_overflow(value, cie_.data_alignment_factor, &out);
      };
      // The CFA offset operand of def_cfa / def_cfa_offset (unsigned, not
      // factored) and of their _sf forms (signed, factored).
      auto cfa_offset_operand = [&](bool signed_form, int64_t& offset) -> Result<void> {
        if (!signed_form) {
          const uint64_t raw = reader.uleb128();
          if (reader.ok() && raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            return error(fmt::format("offset {:#x} does not fit in 63 bits", raw));
          }
          offset = static_cast<int64_t>(raw);
        } else {
          const int64_t raw = reader.sleb128();
          if (reader.ok() && !factored(raw, offset)) {
            return error(fmt::format("offset {} x {} overflows", raw, cie_.data_alignment_factor));
          }
        }
        if (!reader.ok()) return truncated();
        return ok();
      };

      switch (opcode) {
        case kNop:
          break;
        case kAdvanceLoc:
          if (!advance(operand)) return advance_error(operand);
          break;
        case kAdvanceLoc1:
        case kAdvanceLoc2:
        case kAdvanceLoc4: {
          const size_t size = opcode == kAdvanceLoc1 ? 1 : opcode == kAdvanceLoc2 ? 2 : 4;
          const uint64_t delta = reader.fixed(size);
          if (!reader.ok()) return truncated();
          if (!advance(delta)) return advance_error(delta);
          break;
        }
        case kSetLoc: {
          if (fde_ == nullptr) return error("location instructions are not valid in a CIE's initial instructions");
          uint64_t target = 0;
          if (cfi_.format == CfiFormat::kEhFrame) {
            const uint64_t field_vaddr = cfi_.vaddr + cfi_.offset_of(reader.position());
            auto value = read_encoded_pointer(reader, cie_.fde_pointer_encoding, field_vaddr, cfi_.data_base,
                                              cie_.address_size);
            if (!value) return error(value.error().message);
            target = *value;
          } else {
            target = reader.fixed(cie_.address_size);
            if (!reader.ok()) return truncated();
          }
          if (target < loc) return error(fmt::format("moves the location back from {:#x} to {:#x}", loc, target));
          emit();
          if (target != loc) emitted_at_loc = false;
          loc = target;
          break;
        }
        case kOffset:
        case kOffsetExtended:
        case kOffsetExtendedSf:
        case kValOffset:
        case kValOffsetSf:
        case kGnuNegativeOffsetExtended: {
          const uint64_t reg = opcode == kOffset ? operand : reader.uleb128();
          int64_t raw = 0;
          if (opcode == kOffsetExtendedSf || opcode == kValOffsetSf) {
            raw = reader.sleb128();
          } else {
            const uint64_t unsigned_raw = reader.uleb128();
            if (unsigned_raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
              return error(fmt::format("offset {:#x} does not fit in 63 bits", unsigned_raw));
            }
            raw = static_cast<int64_t>(unsigned_raw);
            if (opcode == kGnuNegativeOffsetExtended) raw = -raw;
          }
          if (!reader.ok()) return truncated();
          int64_t offset = 0;
          if (!factored(raw, offset)) return error(fmt::format("offset {} x {} overflows", raw, cie_.data_alignment_factor));
          if (RegisterRule* rule = tracked_rule(state, reg)) {
            const bool value_rule = opcode == kValOffset || opcode == kValOffsetSf;
            *rule = RegisterRule{value_rule ? RegisterRule::Kind::kValOffset : RegisterRule::Kind::kOffset, offset};
          }
          break;
        }
        case kRestore:
        case kRestoreExtended: {
          const uint64_t reg = opcode == kRestore ? operand : reader.uleb128();
          if (!reader.ok()) return truncated();
          if (RegisterRule* rule = tracked_rule(state, reg)) {
            const RegisterRule* restored = initial != nullptr ? tracked_rule(*initial, reg) : nullptr;
            *rule = restored != nullptr ? *restored : RegisterRule{};
          }
          break;
        }
        case kUndefined:
        case kSameValue: {
          const uint64_t reg = reader.uleb128();
          if (!reader.ok()) return truncated();
          if (RegisterRule* rule = tracked_rule(state, reg)) {
            *rule = RegisterRule{opcode == kUndefined ? RegisterRule::Kind::kUndefined : RegisterRule::Kind::kSameValue, 0};
          }
          break;
        }
        case kRegister: {
          const uint64_t reg = reader.uleb128();
          const uint64_t source = reader.uleb128();
          if (!reader.ok()) return truncated();
          if (source > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            return error(fmt::format("register number {:#x} is out of range", source));
          }
          if (RegisterRule* rule = tracked_rule(state, reg)) {
            *rule = RegisterRule{RegisterRule::Kind::kRegister, static_cast<int64_t>(source)};
          }
          break;
        }
        case kRememberState:
          if (remembered_.size() >= kMaxRememberedStates) {
            return error(fmt::format("more than {} nested states", kMaxRememberedStates));
          }
          remembered_.push_back(state);
          break;
        case kRestoreState:
          if (remembered_.empty()) return error("no state was remembered (DW_CFA_remember_state) to restore");
          // The stack holds the CFA rule too: GCC relies on that after
          // epilogues in the middle of a function.
          state = remembered_.back();
          remembered_.pop_back();
          break;
        case kDefCfa:
        case kDefCfaSf: {
          const uint64_t reg = reader.uleb128();
          int64_t offset = 0;
          if (auto r = cfa_offset_operand(opcode == kDefCfaSf, offset); !r) return r;
          state.cfa = CfaDefinition{CfaDefinition::Kind::kRegisterOffset, reg, offset, {}};
          break;
        }
        case kDefCfaRegister: {
          const uint64_t reg = reader.uleb128();
          if (!reader.ok()) return truncated();
          // DWARF 5 6.4.2.2: only valid while the CFA is register+offset.
          if (state.cfa.kind != CfaDefinition::Kind::kRegisterOffset) {
            return error("the CFA is defined by an expression, so it has no register to change");
          }
          state.cfa.reg = reg;
          break;
        }
        case kDefCfaOffset:
        case kDefCfaOffsetSf: {
          int64_t offset = 0;
          if (auto r = cfa_offset_operand(opcode == kDefCfaOffsetSf, offset); !r) return r;
          if (state.cfa.kind != CfaDefinition::Kind::kRegisterOffset) {
            return error("the CFA is defined by an expression, so it has no offset to change");
          }
          state.cfa.offset = offset;
          break;
        }
        case kDefCfaExpression: {
          const uint64_t length = reader.uleb128();
          std::span<const uint8_t> expression = reader.bytes(length);
          if (!reader.ok()) return truncated();
          state.cfa = CfaDefinition{CfaDefinition::Kind::kExpression, 0, 0, expression};
          break;
        }
        case kExpression:
        case kValExpression: {
          const uint64_t reg = reader.uleb128();
          const uint64_t length = reader.uleb128();
          reader.skip(length);  // only the PLT CFA expressions are ever evaluated
          if (!reader.ok()) return truncated();
          if (RegisterRule* rule = tracked_rule(state, reg)) {
            *rule = RegisterRule{
                opcode == kExpression ? RegisterRule::Kind::kExpression : RegisterRule::Kind::kValExpression, 0};
          }
          break;
        }
        case kGnuArgsSize:
          // Outgoing argument size, for the C++ runtime's landing pads; no
          // effect on the CFA rule (it is expressed separately).
          reader.uleb128();
          if (!reader.ok()) return truncated();
          break;
        case kGnuWindowSave:
          return error("SPARC register-window instruction (AArch64 pointer authentication), not valid on x86-64");
        case kMipsAdvanceLoc8:
          return error("MIPS-only instruction, not valid on x86-64");
        default:
          return error(fmt::format("unknown call-frame instruction {:#04x}", byte));
      }
    }
    emit();
    return ok();
  }

 private:
  // "FDE at 0x18 (pc 0x26000..0x26360)" or "CIE at 0x0".
  std::string owner() const {
    if (fde_ == nullptr) return fmt::format("CIE at {:#x}", cie_.offset);
    return fmt::format("FDE at {:#x} (pc {:#x}..{:#x})", fde_->offset, fde_->pc_begin, fde_->pc_end);
  }

  const ParsedCfi& cfi_;
  const Cie& cie_;
  const Fde* fde_;
  std::vector<FrameState>& remembered_;
};

}  // namespace

std::string_view cfa_opcode_name(uint8_t opcode) {
  switch (opcode) {
    case kAdvanceLoc: return "DW_CFA_advance_loc";
    case kOffset: return "DW_CFA_offset";
    case kRestore: return "DW_CFA_restore";
    case kNop: return "DW_CFA_nop";
    case kSetLoc: return "DW_CFA_set_loc";
    case kAdvanceLoc1: return "DW_CFA_advance_loc1";
    case kAdvanceLoc2: return "DW_CFA_advance_loc2";
    case kAdvanceLoc4: return "DW_CFA_advance_loc4";
    case kOffsetExtended: return "DW_CFA_offset_extended";
    case kRestoreExtended: return "DW_CFA_restore_extended";
    case kUndefined: return "DW_CFA_undefined";
    case kSameValue: return "DW_CFA_same_value";
    case kRegister: return "DW_CFA_register";
    case kRememberState: return "DW_CFA_remember_state";
    case kRestoreState: return "DW_CFA_restore_state";
    case kDefCfa: return "DW_CFA_def_cfa";
    case kDefCfaRegister: return "DW_CFA_def_cfa_register";
    case kDefCfaOffset: return "DW_CFA_def_cfa_offset";
    case kDefCfaExpression: return "DW_CFA_def_cfa_expression";
    case kExpression: return "DW_CFA_expression";
    case kOffsetExtendedSf: return "DW_CFA_offset_extended_sf";
    case kDefCfaSf: return "DW_CFA_def_cfa_sf";
    case kDefCfaOffsetSf: return "DW_CFA_def_cfa_offset_sf";
    case kValOffset: return "DW_CFA_val_offset";
    case kValOffsetSf: return "DW_CFA_val_offset_sf";
    case kValExpression: return "DW_CFA_val_expression";
    case kMipsAdvanceLoc8: return "DW_CFA_MIPS_advance_loc8";
    case kGnuWindowSave: return "DW_CFA_GNU_window_save";
    case kGnuArgsSize: return "DW_CFA_GNU_args_size";
    case kGnuNegativeOffsetExtended: return "DW_CFA_GNU_negative_offset_extended";
    default: break;
  }
  // Undefined opcodes are all below 0x40 (the top two bits select the
  // primary opcodes above); their names are formatted once.
  static const std::array<std::string, 0x40> unknown_names = [] {
    std::array<std::string, 0x40> names;
    for (unsigned i = 0; i < names.size(); ++i) names[i] = fmt::format("DW_CFA_<unknown {:#04x}>", i);
    return names;
  }();
  return opcode < unknown_names.size() ? std::string_view(unknown_names[opcode]) : std::string_view("DW_CFA_<unknown>");
}

size_t fde_row_bound(std::span<const uint8_t> instructions) {
  // Every instruction that moves the location is one byte of
  // DW_CFA_set_loc .. DW_CFA_advance_loc4 (0x01..0x04) or DW_CFA_advance_loc
  // (0x40..0x7f). Counting every such byte, operands included, over-counts
  // (by about 30% on libc, libpython, libLLVM) but needs no decoding:
  // decoding the instructions a second time cost a tenth of the build.
  // Eight bytes at a time: the top bit of each byte of `hits` says whether
  // that byte is one of them.
  constexpr uint64_t kHigh = 0x8080808080808080;
  constexpr uint64_t kOnes = 0x0101010101010101;
  const uint8_t* p = instructions.data();
  const uint8_t* const end = p + instructions.size();
  size_t rows = 1;
  for (; end - p >= 8; p += 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof(word));
    const uint64_t advance_loc = ~word & (word << 1) & kHigh;  // bit 7 clear, bit 6 set
    // (byte | 0x80) - n never borrows from the next byte; its top bit says
    // whether the low seven bits are >= n.
    const uint64_t at_least_1 = (word | kHigh) - kOnes;
    const uint64_t at_least_5 = (word | kHigh) - 5 * kOnes;
    const uint64_t one_to_four = ~word & at_least_1 & ~at_least_5 & kHigh;
    // One bit per byte, at bit 7: gather them into the top byte (the build
    // does not assume the popcnt instruction).
    rows += static_cast<size_t>((((advance_loc | one_to_four) >> 7) * kOnes) >> 56);
  }
  for (; p < end; ++p) {
    rows += static_cast<size_t>((*p & 0xc0) == 0x40) + static_cast<size_t>(static_cast<uint8_t>(*p - 1) < 4);
  }
  return rows;
}

Result<FrameState> CfaProgramRunner::run_cie(const ParsedCfi& cfi, const Cie& cie) {
  FrameState state;
  Interpreter interpreter(cfi, cie, nullptr, remembered_);
  if (auto r = interpreter.run(cie.initial_instructions, state, nullptr, nullptr); !r) return r.error();
  return state;
}

Result<void> CfaProgramRunner::run_fde(const ParsedCfi& cfi, const Fde& fde, const FrameState& cie_state,
                                       std::vector<CfaRow>& rows) {
  rows.clear();
  FrameState state = cie_state;
  Interpreter interpreter(cfi, cfi.cies[fde.cie_index], &fde, remembered_);
  return interpreter.run(fde.instructions, state, &cie_state, &rows);
}

}  // namespace omniprof::unwind
