// What the ruby plugin reads from a ruby executable's or libruby's ELF file:
// its version and where its ID table (ruby_global_symbols) is.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "omniprof/offsets.hpp"
#include "omniprof/support/elf_file.h"
#include "omniprof/support/result.h"

namespace omniprof::ruby {

using RubyVersion = sdk::RuntimeVersion;

// The exported `ruby_version` (const char[]: "3.1.2", NUL-terminated, in
// .rodata), read from the file. Errors name the file: no such symbol (not a
// ruby), a string that is not MAJOR.MINOR.PATCH.
Result<RubyVersion> read_ruby_version(const ElfFile& elf);

// The ELF virtual address of `ruby_global_symbols` (symbol.c's rb_symbols_t,
// ID -> name): from .symtab when the file has it, else decoded from the
// exported rb_sym_immortal_count(), which returns the table's first field
// (last_id) with a single RIP-relative load. The caller adds the load bias.
Result<uint64_t> find_global_symbols(const ElfFile& elf);

// The address rb_sym_immortal_count's code at `function_vaddr` loads from:
// exactly `8b 05 disp32 c3` (mov eax, [rip + disp32]; ret) or its
// `48 8b 05 disp32 c3` form; an error describing the bytes otherwise.
Result<uint64_t> decode_rip_relative_load(std::span<const uint8_t> code, uint64_t function_vaddr);

}  // namespace omniprof::ruby
