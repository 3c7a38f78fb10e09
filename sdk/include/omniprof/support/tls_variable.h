// How a thread reaches a thread-local variable of an ELF file (CRuby's
// `ruby_current_ec`, CPython 3.13's thread state...), from what the file
// itself says: the variable's TLS symbol and the dynamic relocations the
// loader resolves for it. x86-64 glibc, TLS variant II.
//
// A shared library's variable is reached through the dynamic thread vector
// when the library uses the general or local dynamic model (a GOT slot the
// loader fills with the library's module id: R_X86_64_DTPMOD64), or at a
// fixed offset from the thread pointer when it uses initial exec (a slot the
// loader fills with that offset: R_X86_64_TPOFF64). An executable's own
// variable (local exec, no relocation) sits at a fixed offset below the
// thread pointer known from its PT_TLS segment alone.
//
// The loader writes those slots when it maps the file, so the plugin reads
// them from the process (load bias + slot address) to finish the answer.
#pragma once

#include <cstdint>
#include <string_view>

#include "omniprof/support/elf_file.h"
#include "omniprof/support/result.h"

namespace omniprof {

enum class TlsAccessKind {
  kModuleSlot,    // dtv[module id] + offset_in_block; the id is in the GOT slot at slot_vaddr
  kTpOffsetSlot,  // thread pointer + the offset in the GOT slot at slot_vaddr
  kTpOffset,      // thread pointer + tp_offset (the executable's own block)
};

struct TlsVariableAccess {
  TlsAccessKind kind = TlsAccessKind::kModuleSlot;
  uint64_t offset_in_block = 0;  // the variable's offset in the file's TLS block (st_value)
  uint64_t slot_vaddr = 0;       // link-time address of the GOT slot (kModuleSlot, kTpOffsetSlot)
  int64_t tp_offset = 0;         // kTpOffset
};

// `main_executable`: the file is the process's executable (its own block is
// the first, right below the thread pointer), not a library it loaded. An
// error naming the file and the variable when it is not a TLS symbol of the
// file, or the file says nothing the three ways above can use (e.g. TLS
// descriptors only).
Result<TlsVariableAccess> find_tls_variable(const ElfFile& elf, std::string_view name, bool main_executable);

}  // namespace omniprof
