// The little ELF reading the python plugin needs (symbols, bytes at a virtual
// address, a section's contents), on libelf, behind this one file so it can
// move onto the SDK's ELF library once there is one.
#pragma once

#include <cstdint>
#include <memory>
#include "omniprof/support/result.h"
#include <optional>
#include <string>
#include <vector>

namespace omniprof::python {

struct ElfSymbolInfo {
  uint64_t value = 0;  // st_value: the link-time virtual address
  uint64_t size = 0;
};

class PythonElfFile {
 public:
  // Opens `path` (a regular file, read-only) and checks it is a 64-bit ELF.
  static Result<std::unique_ptr<PythonElfFile>> open(const std::string& path);
  ~PythonElfFile();
  PythonElfFile(const PythonElfFile&) = delete;
  PythonElfFile& operator=(const PythonElfFile&) = delete;

  // Looks in .symtab, then .dynsym (a stripped binary has only the latter).
  std::optional<ElfSymbolInfo> find_symbol(const std::string& name) const;
  // Whether any symbol's name starts with `prefix`.
  bool has_symbol_with_prefix(const std::string& prefix) const;
  // `len` bytes at link-time address `vaddr`, read from the file (a PT_LOAD
  // segment's file-backed part).
  Result<std::vector<uint8_t>> read_at(uint64_t vaddr, std::size_t len) const;
  // The contents of the section named `name` (nullopt: no such section or NOBITS).
  std::optional<std::vector<uint8_t>> section(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  PythonElfFile() = default;
  template <typename Visit>
  bool visit_symbols(Visit&& visit) const;

  std::string path_;
  int fd_ = -1;
  struct ElfHandle;
  ElfHandle* elf_ = nullptr;
};

}  // namespace omniprof::python
