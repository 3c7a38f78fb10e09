#include "omniprof/support/tls_variable.h"

#include <elf.h>
#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <vector>

namespace omniprof {
namespace {

// The index of `name` in .dynsym, if it is a defined STT_TLS symbol there.
struct DynamicTlsSymbol {
  uint64_t index = 0;
  uint64_t value = 0;
};

Result<std::optional<DynamicTlsSymbol>> dynamic_tls_symbol(const ElfFile& elf, std::string_view name) {
  auto symbols = elf.section_bytes(".dynsym");
  if (!symbols) return std::optional<DynamicTlsSymbol>{};  // no dynamic symbols: an executable's own TLS
  auto strings = elf.section_bytes(".dynstr");
  if (!strings) return strings.error();
  const size_t count = symbols->size() / sizeof(Elf64_Sym);
  for (size_t i = 1; i < count; ++i) {
    Elf64_Sym sym;
    std::memcpy(&sym, symbols->data() + i * sizeof(Elf64_Sym), sizeof(sym));
    if (ELF64_ST_TYPE(sym.st_info) != STT_TLS || sym.st_shndx == SHN_UNDEF || sym.st_name >= strings->size()) continue;
    const char* text = reinterpret_cast<const char*>(strings->data()) + sym.st_name;
    if (std::string_view(text, strnlen(text, strings->size() - sym.st_name)) == name) {
      return std::optional<DynamicTlsSymbol>{DynamicTlsSymbol{i, sym.st_value}};
    }
  }
  return std::optional<DynamicTlsSymbol>{};
}

}  // namespace

Result<TlsVariableAccess> find_tls_variable(const ElfFile& elf, std::string_view name, bool main_executable) {
  if (elf.machine() != EM_X86_64) {
    return make_error(fmt::format("{}: {}: thread-local variables are read on x86-64 only", elf.path(), name));
  }
  const auto& tls = elf.tls_segment();
  if (!tls) return make_error(fmt::format("{}: {}: the file has no PT_TLS segment", elf.path(), name));
  auto dynamic = dynamic_tls_symbol(elf, name);
  if (!dynamic) return dynamic.error();
  if (*dynamic) {
    auto relocations = elf.section_bytes(".rela.dyn");
    if (!relocations) return relocations.error();
    const size_t count = relocations->size() / sizeof(Elf64_Rela);
    std::optional<TlsVariableAccess> module_slot;
    for (size_t i = 0; i < count; ++i) {
      Elf64_Rela rela;
      std::memcpy(&rela, relocations->data() + i * sizeof(Elf64_Rela), sizeof(rela));
      if (ELF64_R_SYM(rela.r_info) != (*dynamic)->index) continue;
      switch (ELF64_R_TYPE(rela.r_info)) {
        case R_X86_64_TPOFF64:  // initial exec: the loader writes the offset from the thread pointer
          return TlsVariableAccess{TlsAccessKind::kTpOffsetSlot, (*dynamic)->value, rela.r_offset, 0};
        case R_X86_64_DTPMOD64:  // general dynamic: the loader writes the module id
          if (!module_slot) module_slot = TlsVariableAccess{TlsAccessKind::kModuleSlot, (*dynamic)->value, rela.r_offset, 0};
          break;
        default:
          break;
      }
    }
    if (module_slot) return *module_slot;
    // Local dynamic: the file's own module id, in a DTPMOD64 slot against
    // symbol 0, and the variable at its st_value in the block.
    for (size_t i = 0; i < count; ++i) {
      Elf64_Rela rela;
      std::memcpy(&rela, relocations->data() + i * sizeof(Elf64_Rela), sizeof(rela));
      if (ELF64_R_SYM(rela.r_info) == 0 && ELF64_R_TYPE(rela.r_info) == R_X86_64_DTPMOD64) {
        return TlsVariableAccess{TlsAccessKind::kModuleSlot, (*dynamic)->value, rela.r_offset, 0};
      }
    }
    if (!main_executable) {
      return make_error(fmt::format("{}: {}: no TPOFF64 or DTPMOD64 relocation reaches it (TLS descriptors are "
                                    "not read)",
                                    elf.path(), name));
    }
  }
  // An executable's own variable (local exec): its block ends at the thread
  // pointer, aligned (TLS variant II: tp - roundup(memsz, align)).
  auto symbol = elf.find_symbol(name);
  if (!symbol) return symbol.error();
  if (!*symbol || (*symbol)->type != STT_TLS) {
    return make_error(fmt::format("{}: no thread-local symbol {}", elf.path(), name));
  }
  if (!main_executable) {
    return make_error(fmt::format("{}: {}: a library's thread-local variable needs a relocation to be found",
                                  elf.path(), name));
  }
  const uint64_t block = (tls->memsz + tls->align - 1) / tls->align * tls->align;
  TlsVariableAccess access{TlsAccessKind::kTpOffset, (*symbol)->value, 0, 0};
  access.tp_offset = static_cast<int64_t>((*symbol)->value) - static_cast<int64_t>(block);
  return access;
}

}  // namespace omniprof
