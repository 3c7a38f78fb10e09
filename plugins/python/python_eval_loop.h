// The parts of CPython's evaluation loop that its symbols do not name.
//
// GCC moves a function's unlikely blocks into a part of their own, with an
// FDE of its own and the symbol NAME.cold, which only .symtab has. A build
// whose .symtab is stripped (Debian's python3.X; its symbols are in the
// -dbgsym package) names only the hot part through .dynsym: Debian's 3.14
// keeps 84 KB of _PyEval_EvalFrameDefault's opcode bodies in its cold part
// and 1 KB under the name, so without it the walk finds no evaluation loop
// frame to hand over to the Python frames.
//
// The hot part branches into the cold part: a jcc or jmp with a 32-bit
// displacement whose target is the start of an FDE that no symbol names and
// whose first row does not have the CFA at RSP+8, which is where every
// function entry has it; the cold part runs inside its parent's frame.
// That last test keeps out the static functions the hot part tail-calls.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "omniprof/support/elf_file.h"
#include "omniprof/support/result.h"

namespace omniprof::python {

struct CodeRange {
  uint64_t begin = 0;  // ELF virtual addresses
  uint64_t end = 0;    // exclusive
  bool operator==(const CodeRange&) const = default;
};

// The cold parts of the function at [start, start + size) of `elf` (the
// file at `path`) that `named(address)` (a symbol starts there) does not
// name, found from its branches and the file's call-frame information.
// Empty when it has none; an error when the code or the CFI cannot be read.
Result<std::vector<CodeRange>> unnamed_cold_parts(const ElfFile& elf, const std::string& path, uint64_t start,
                                                 uint64_t size, const std::function<bool(uint64_t)>& named);

}  // namespace omniprof::python
