#include "omniprof/support/tls_variable.h"

#include <elf.h>
#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <vector>

namespace omniprof {
namespace {

// The variable as the file defines it: its offset in the file's TLS block,
// and its index in .dynsym when it is there (0 otherwise: a hidden or static
// variable, which relocations reach through symbol 0 and an addend).
struct TlsSymbol {
  uint64_t dynamic_index = 0;
  uint64_t value = 0;
};

Result<std::optional<TlsSymbol>> dynamic_tls_symbol(const ElfFile& elf, std::string_view name) {
  auto symbols = elf.section_bytes(".dynsym");
  if (!symbols) return std::optional<TlsSymbol>{};  // no dynamic symbols: an executable's own TLS
  auto strings = elf.section_bytes(".dynstr");
  if (!strings) return strings.error();
  const size_t count = symbols->size() / sizeof(Elf64_Sym);
  for (size_t i = 1; i < count; ++i) {
    Elf64_Sym sym;
    std::memcpy(&sym, symbols->data() + i * sizeof(Elf64_Sym), sizeof(sym));
    if (ELF64_ST_TYPE(sym.st_info) != STT_TLS || sym.st_shndx == SHN_UNDEF || sym.st_name >= strings->size()) continue;
    const char* text = reinterpret_cast<const char*>(strings->data()) + sym.st_name;
    if (std::string_view(text, strnlen(text, strings->size() - sym.st_name)) == name) {
      return std::optional<TlsSymbol>{TlsSymbol{i, sym.st_value}};
    }
  }
  return std::optional<TlsSymbol>{};
}

struct Relocation {
  Elf64_Rela rela;
  uint64_t vaddr;  // where the relocation itself is (link time)
};

// The dynamic relocations: .rela.dyn, and .rela.plt, where the linker puts
// TLS descriptors (so that they can be bound lazily).
Result<std::vector<Relocation>> dynamic_relocations(const ElfFile& elf) {
  std::vector<Relocation> relocations;
  bool any = false;
  for (const char* section : {".rela.dyn", ".rela.plt"}) {
    uint64_t vaddr = 0;
    auto bytes = elf.section_bytes(section, &vaddr);
    if (!bytes) continue;
    any = true;
    const size_t count = bytes->size() / sizeof(Elf64_Rela);
    for (size_t i = 0; i < count; ++i) {
      Relocation r;
      std::memcpy(&r.rela, bytes->data() + i * sizeof(Elf64_Rela), sizeof(r.rela));
      r.vaddr = vaddr + i * sizeof(Elf64_Rela);
      relocations.push_back(r);
    }
  }
  if (!any) return make_error(fmt::format("{}: no .rela.dyn or .rela.plt section", elf.path()));
  return relocations;
}

// How the relocations reach a library's variable: first those naming its
// symbol, then those through symbol 0 (a variable not in .dynsym; initial
// exec and descriptors carry its offset as addend; local dynamic only the
// file's module id).
std::optional<TlsVariableAccess> access_by_relocation(const std::vector<Relocation>& relocations,
                                                      const TlsSymbol& symbol) {
  std::optional<TlsVariableAccess> module_slot;
  for (bool through_symbol_0 : {false, true}) {
    if (through_symbol_0 && module_slot) break;
    for (const auto& [rela, where] : relocations) {
      const uint64_t sym = ELF64_R_SYM(rela.r_info);
      if (through_symbol_0 ? sym != 0 : (symbol.dynamic_index == 0 || sym != symbol.dynamic_index)) continue;
      const uint64_t offset = through_symbol_0 ? static_cast<uint64_t>(rela.r_addend)
                                               : symbol.value + static_cast<uint64_t>(rela.r_addend);
      const bool this_variable = offset == symbol.value;
      switch (ELF64_R_TYPE(rela.r_info)) {
        case R_X86_64_TPOFF64:  // initial exec: the loader writes the offset from the thread pointer
          if (this_variable) return TlsVariableAccess{TlsAccessKind::kTpOffsetSlot, symbol.value, rela.r_offset, 0, 0};
          break;
        case R_X86_64_TLSDESC:  // a descriptor: the loader writes a resolver and its argument
          if (this_variable) {
            return TlsVariableAccess{TlsAccessKind::kDescriptor, symbol.value, rela.r_offset, 0, where};
          }
          break;
        case R_X86_64_DTPMOD64:  // general (or, through symbol 0, local) dynamic: the module id
          if (!module_slot) module_slot = TlsVariableAccess{TlsAccessKind::kModuleSlot, symbol.value, rela.r_offset, 0, 0};
          break;
        default:
          break;
      }
    }
  }
  return module_slot;
}

}  // namespace

Result<TlsVariableAccess> find_tls_variable(const ElfFile& elf, std::string_view name, bool main_executable,
                                            std::optional<uint64_t> value) {
  if (elf.machine() != EM_X86_64) {
    return make_error(fmt::format("{}: {}: thread-local variables are read on x86-64 only", elf.path(), name));
  }
  const auto& tls = elf.tls_segment();
  if (!tls) return make_error(fmt::format("{}: {}: the file has no PT_TLS segment", elf.path(), name));
  auto dynamic = dynamic_tls_symbol(elf, name);
  if (!dynamic) return dynamic.error();
  TlsSymbol symbol;
  if (*dynamic) {
    symbol = **dynamic;
  } else {
    auto found = elf.find_symbol(name);
    if (!found) return found.error();
    if (*found && (*found)->type == STT_TLS) {
      symbol.value = (*found)->value;
    } else if (!*found && value) {
      symbol.value = *value;
    } else {
      return make_error(fmt::format("{}: no thread-local symbol {}", elf.path(), name));
    }
  }
  if (auto relocations = dynamic_relocations(elf)) {
    if (auto access = access_by_relocation(*relocations, symbol)) return *access;
  } else if (!main_executable) {
    return relocations.error();
  }
  if (!main_executable) {
    return make_error(fmt::format("{}: {}: no TPOFF64, DTPMOD64 or TLSDESC relocation reaches it", elf.path(), name));
  }
  // An executable's own variable (local exec): its block ends at the thread
  // pointer, aligned (TLS variant II: tp - roundup(memsz, align)).
  const uint64_t block = (tls->memsz + tls->align - 1) / tls->align * tls->align;
  TlsVariableAccess access{TlsAccessKind::kTpOffset, symbol.value, 0, 0, 0};
  access.tp_offset = static_cast<int64_t>(symbol.value) - static_cast<int64_t>(block);
  return access;
}

Result<TlsVariableLocation> locate_tls_variable(const TlsVariableAccess& access, uint64_t load_bias,
                                                const ReadProcessMemory& read) {
  using Base = TlsVariableLocation::Base;
  if (access.kind == TlsAccessKind::kTpOffset) return TlsVariableLocation{Base::kThreadPointer, 0, access.tp_offset};
  const uint64_t slot = load_bias + access.slot_vaddr;
  uint64_t words[2] = {0, 0};
  const size_t size = access.kind == TlsAccessKind::kDescriptor ? sizeof(words) : sizeof(words[0]);
  if (!read(slot, words, size)) return make_error(fmt::format("cannot read the TLS slot at {:#x}", slot));
  switch (access.kind) {
    case TlsAccessKind::kModuleSlot:
      if (words[0] == 0) return make_error(fmt::format("the TLS slot at {:#x} holds no module id yet", slot));
      return TlsVariableLocation{Base::kDtv, words[0], static_cast<int64_t>(access.offset_in_block)};
    case TlsAccessKind::kTpOffsetSlot:
      return TlsVariableLocation{Base::kThreadPointer, 0, static_cast<int64_t>(words[0])};
    case TlsAccessKind::kDescriptor:
      break;
    case TlsAccessKind::kTpOffset:
      break;
  }
  // words = {resolver, argument}. Static TLS (_dl_tlsdesc_return): the
  // argument is the variable's offset from the thread pointer, negative in
  // variant II, so it cannot be mistaken for a user-space pointer (below
  // 2^47). Lazy binding (glibc before 2.35 with lazy binding on): the
  // argument is the relocation's own address until the first access.
  const uint64_t argument = words[1];
  if (words[0] == 0 || argument == load_bias + access.relocation_vaddr) {
    return make_error(fmt::format("the TLS descriptor at {:#x} is not bound yet", slot));
  }
  if (static_cast<int64_t>(argument) < 0) {
    return TlsVariableLocation{Base::kThreadPointer, 0, static_cast<int64_t>(argument)};
  }
  // Dynamic TLS (_dl_tlsdesc_dynamic): the argument points to glibc's
  // tlsdesc_dynamic_arg, which starts with tls_index {module id, offset}.
  uint64_t index[2] = {0, 0};
  if (!read(argument, index, sizeof(index))) {
    return make_error(fmt::format("cannot read the TLS descriptor argument at {:#x} (descriptor at {:#x})", argument,
                                  slot));
  }
  if (index[0] == 0 || index[1] != access.offset_in_block) {
    return make_error(fmt::format("the TLS descriptor at {:#x} points to {:#x}, which holds no tls_index of this "
                                  "variable (module {}, offset {:#x}; expected offset {:#x})",
                                  slot, argument, index[0], index[1], access.offset_in_block));
  }
  return TlsVariableLocation{Base::kDtv, index[0], static_cast<int64_t>(index[1])};
}

}  // namespace omniprof
