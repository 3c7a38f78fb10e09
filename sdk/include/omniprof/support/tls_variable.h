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
// thread pointer known from its PT_TLS segment alone. Code built with TLS
// descriptors (-mtls-dialect=gnu2) has a two-word descriptor instead
// (R_X86_64_TLSDESC): {resolver, argument}. The loader picks the resolver per
// process: if the file's block is in static TLS (every library loaded at
// start, and one dlopen()ed later while the static surplus lasts),
// _dl_tlsdesc_return with the variable's offset from the thread pointer as
// argument; otherwise _dl_tlsdesc_dynamic with a pointer to {module id,
// offset in block}.
//
// The loader writes those slots when it maps the file, so
// locate_tls_variable reads them from the process (load bias + slot address)
// to finish the answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "omniprof/support/elf_file.h"
#include "omniprof/support/result.h"

namespace omniprof {

enum class TlsAccessKind {
  kModuleSlot,    // dtv[module id] + offset_in_block; the id is in the GOT slot at slot_vaddr
  kTpOffsetSlot,  // thread pointer + the offset in the GOT slot at slot_vaddr
  kTpOffset,      // thread pointer + tp_offset (the executable's own block)
  kDescriptor,    // a TLS descriptor at slot_vaddr (16 bytes): either of the first two, per process
};

struct TlsVariableAccess {
  TlsAccessKind kind = TlsAccessKind::kModuleSlot;
  uint64_t offset_in_block = 0;  // the variable's offset in the file's TLS block (st_value)
  uint64_t slot_vaddr = 0;       // link-time address of the GOT slot or descriptor
  int64_t tp_offset = 0;         // kTpOffset
  uint64_t relocation_vaddr = 0; // kDescriptor: link-time address of its relocation (a lazily bound
                                 // descriptor's argument points there until first use)
};

// Where one process keeps the variable, from what its loader wrote.
struct TlsVariableLocation {
  enum class Base {
    kDtv,            // dtv[module_id] (the block's address) + offset
    kThreadPointer,  // the thread pointer + offset (negative: variant II)
  };
  Base base = Base::kDtv;
  uint64_t module_id = 0;
  int64_t offset = 0;
};

using ReadProcessMemory = std::function<bool(uint64_t address, void* buffer, std::size_t size)>;

// `main_executable`: the file is the process's executable (its own block is
// the first, right below the thread pointer), not a library it loaded. An
// error naming the file and the variable when it is not a TLS symbol of the
// file, or the file says nothing the three ways above can use (e.g. TLS
// descriptors only). `value`: the variable's st_value when the file's own
// symbols lack it (a stripped library: from its separate debug file).
Result<TlsVariableAccess> find_tls_variable(const ElfFile& elf, std::string_view name, bool main_executable,
                                            std::optional<uint64_t> value = std::nullopt);

// Finishes `access` for one process that maps the file at `load_bias`,
// reading the slot the loader filled through `read`. An error naming the
// address when the slot cannot be read or the loader has not filled it yet
// (no module id; a descriptor not yet bound).
Result<TlsVariableLocation> locate_tls_variable(const TlsVariableAccess& access, uint64_t load_bias,
                                                const ReadProcessMemory& read);

}  // namespace omniprof
