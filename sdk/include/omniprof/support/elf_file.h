// ElfFile: read-only view of one ELF file on disk (executable, shared library
// or separate debug file), built on libelf, the only libelf handle in the
// tree. Everything a symbolizer needs (build ID, .gnu_debuglink, PT_LOAD
// segments, the function symbols of .symtab/.dynsym) and what an unwinder
// needs (program headers, section headers, a section's bytes read straight
// into a buffer of its own). Malformed files produce errors, never crashes:
// the profiler reads whatever happens to be mapped into processes on the
// machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/support/unique_fd.h"

struct Elf;  // from <libelf.h>; kept out of this header

namespace omniprof {

struct ElfSymbol {
  std::string name;  // raw (mangled) name as stored in the string table
  uint64_t value = 0;
  uint64_t size = 0;
  uint8_t binding = 0;  // STB_GLOBAL, STB_WEAK, STB_LOCAL, ...
  uint8_t type = 0;     // STT_FUNC, STT_GNU_IFUNC, STT_OBJECT, STT_TLS
  // End address of the section that holds the symbol (0 when unknown). It
  // bounds symbols with size 0, which otherwise extend to the next symbol.
  uint64_t section_end = 0;
};

// One entry of the program header table.
struct ProgramHeader {
  uint32_t type = 0;   // PT_LOAD, PT_GNU_EH_FRAME, ...
  uint32_t flags = 0;  // PF_R | PF_W | PF_X
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
};
// The PT_LOAD entries (load_segments()).
using LoadSegment = ProgramHeader;

// One entry of the section header table.
struct ElfSection {
  size_t index = 0;
  std::string name;    // "" when the name table does not give one
  uint32_t type = 0;   // SHT_PROGBITS, SHT_NOBITS, ...
  uint64_t flags = 0;  // SHF_ALLOC, SHF_COMPRESSED, ...
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;  // in the file (compressed size when compressed)

  // SHF_COMPRESSED (ELF compression header) or .zdebug_* (the older GNU
  // format, "ZLIB" and a big-endian size).
  bool compressed() const;
};

// Bytes read from a file into a buffer of their own (not zeroed first: a
// section read whole costs one pread and no copy).
struct OwnedBytes {
  std::unique_ptr<uint8_t[]> data;
  uint64_t size = 0;
};

// The PT_TLS segment: the initial image of the file's thread-local block.
struct TlsSegment {
  uint64_t vaddr = 0;
  uint64_t memsz = 0;
  uint64_t align = 1;
};

struct DebugLink {
  std::string name;  // file name only, no directory
  uint32_t crc = 0;  // CRC32 of the whole debug file
};

enum class SymbolKinds {
  kFunctions,            // STT_FUNC, STT_GNU_IFUNC
  kFunctionsAndObjects,  // plus STT_OBJECT and STT_TLS, for lookups by name
};

// Not thread-safe: libelf decompresses and caches section data inside the
// handle even through the const accessors. Use one ElfFile per thread.
class ElfFile {
 public:
  // Opens and validates the ELF header, the program header table and the
  // section header table. Only regular files are opened (open_regular_file):
  // a mapping may name a device node or a FIFO, and opening one of those can
  // block or have side effects.
  static Result<ElfFile> open(const std::string& path);

  ElfFile(ElfFile&& other) noexcept;
  ElfFile& operator=(ElfFile&& other) noexcept;
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;
  ~ElfFile();

  const std::string& path() const { return path_; }

  // Hex string of the NT_GNU_BUILD_ID note; empty when the file has none.
  std::string build_id() const;
  std::optional<DebugLink> debuglink() const;
  uint16_t elf_type() const { return elf_type_; }  // ET_EXEC, ET_DYN, ...
  uint16_t machine() const { return machine_; }    // EM_X86_64, ...
  // ELFCLASS64 and ELFDATA2LSB for x86-64 files.
  bool is_64bit_little_endian() const { return is_64bit_little_endian_; }
  // Every entry of the program header table, in file order.
  const std::vector<ProgramHeader>& program_headers() const { return program_headers_; }
  const std::vector<LoadSegment>& load_segments() const { return load_segments_; }
  // nullopt when the file has no thread-local storage.
  const std::optional<TlsSegment>& tls_segment() const { return tls_segment_; }

  // Defined symbols of .symtab and .dynsym (both, unfiltered for duplicates).
  // Function symbols need a nonzero address; undefined symbols are skipped.
  Result<std::vector<ElfSymbol>> symbols(SymbolKinds kinds = SymbolKinds::kFunctions) const;
  // The same symbols, one at a time, without collecting them: `visit`
  // returns false to stop early. An error when a symbol table is unreadable.
  Result<void> for_each_symbol(SymbolKinds kinds, const std::function<bool(const ElfSymbol&)>& visit) const;
  // The first defined symbol named `name` (functions, objects and TLS), in
  // section order; nullopt when there is none.
  Result<std::optional<ElfSymbol>> find_symbol(std::string_view name) const;
  // True when a non-empty SHT_SYMTAB section is present (i.e. not stripped).
  bool has_symtab() const;

  // Maps a file offset to a virtual address through the PT_LOAD whose file
  // range contains it.
  std::optional<uint64_t> file_offset_to_vaddr(uint64_t file_offset) const;

  // `size` bytes at link-time virtual address `vaddr`, read from the file:
  // they must lie in the file-backed part of one PT_LOAD segment (a
  // variable's initial value, a constant), else an error naming the address.
  Result<std::vector<uint8_t>> read_at_vaddr(uint64_t vaddr, size_t size) const;
  // The contents of the section named `name` (decompressed when it is
  // compressed); an error when there is no such section or it is SHT_NOBITS.
  // `vaddr`, when given, receives the section's address (sh_addr).
  Result<std::vector<uint8_t>> section_bytes(std::string_view name, uint64_t* vaddr = nullptr) const;

  // Every entry of the section header table but the null one, in file order.
  std::vector<ElfSection> sections() const;
  // A section's bytes in a buffer of their own: read with pread when stored
  // as is, inflated by libelf (after check_inflated_size) when compressed.
  // An error for SHT_NOBITS, a range past the end of the file, or more than
  // kMaxInflatedSectionBytes.
  Result<OwnedBytes> read_section(const ElfSection& section) const;
  // `size` bytes at file offset `offset` (at most kMaxInflatedSectionBytes);
  // `what` names them in errors.
  Result<OwnedBytes> read_file_bytes(uint64_t offset, uint64_t size, std::string_view what) const;
  // The same into `out`, which holds at least `size` bytes.
  Result<void> read_file_range(uint64_t offset, uint64_t size, uint8_t* out, std::string_view what) const;

 private:
  ElfFile(std::string path, UniqueFd fd, Elf* elf);
  Result<void> validate();
  void close();

  std::string path_;
  UniqueFd fd_;  // libelf reads lazily from this descriptor: keep it open
  Elf* elf_ = nullptr;
  uint16_t elf_type_ = 0;
  uint16_t machine_ = 0;
  bool is_64bit_little_endian_ = false;
  uint64_t file_size_ = 0;
  std::vector<ProgramHeader> program_headers_;
  std::vector<LoadSegment> load_segments_;
  std::optional<TlsSegment> tls_segment_;
};

// Bounds on compressed sections (SHF_COMPRESSED or .zdebug_*), checked on
// the size their header declares before anything is inflated, so that a
// lying header cannot make us allocate gigabytes. zlib cannot compress
// better than about 1000:1 and real debug and symbol sections compress 3 to
// 10 times, so more than 64x is refused; a section of at most 1 MiB is
// always accepted (a tiny compressed section may legitimately have a big
// ratio, and 1 MiB costs nothing); nothing above 1 GiB is accepted at all.
inline constexpr uint64_t kMaxInflatedSectionBytes = uint64_t{1} << 30;
inline constexpr uint64_t kAlwaysInflatableBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxInflationRatio = 64;
// ok(), or an error naming the file and the section.
Result<void> check_inflated_size(const std::string& path, const std::string& section, uint64_t declared,
                                 uint64_t compressed);

// Build ID of the ELF file at `path` (hex, empty when it has none).
Result<std::string> read_build_id(const std::string& path);

}  // namespace omniprof
