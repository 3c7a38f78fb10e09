#include "omniprof/support/elf_file.h"
#include "omniprof/support/libelf_support.h"

#include "omniprof/support/regular_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include <fmt/format.h>

namespace omniprof {
namespace {

std::string section_name(Elf* elf, size_t shstrndx, const GElf_Shdr& shdr) {
  const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
  return name != nullptr ? name : "";
}

constexpr std::string_view kGnuCompressedPrefix = ".zdebug";

// The size a compressed section says it inflates to: ch_size of its
// compression header (SHF_COMPRESSED), or the big-endian size after "ZLIB"
// (.zdebug_*). nullopt when the header itself is unreadable.
std::optional<uint64_t> declared_inflated_size(Elf_Scn* scn, bool gnu_format) {
  if (!gnu_format) {
    GElf_Chdr chdr;
    if (gelf_getchdr(scn, &chdr) == nullptr) return std::nullopt;
    return chdr.ch_size;
  }
  Elf_Data* raw = elf_rawdata(scn, nullptr);
  if (raw == nullptr || raw->d_buf == nullptr || raw->d_size < 12) return std::nullopt;
  const auto* bytes = static_cast<const unsigned char*>(raw->d_buf);
  if (std::memcmp(bytes, "ZLIB", 4) != 0) return std::nullopt;
  uint64_t size = 0;
  for (int i = 4; i < 12; ++i) size = size << 8 | bytes[i];
  return size;
}

// Contents of a section, decompressed first when it is SHF_COMPRESSED (as
// ld --compress-debug-sections or objcopy may leave non-allocated sections)
// or a GNU .zdebug_* section, after checking that the size it declares is
// sane (check_inflated_size). Errors name the file and the section.
Result<Elf_Data*> section_contents(Elf* elf, Elf_Scn* scn, const std::string& path) {
  GElf_Shdr shdr;
  if (gelf_getshdr(scn, &shdr) == nullptr) {
    return make_error(fmt::format("{}: section {}: unreadable header: {}", path, elf_ndxscn(scn), libelf_error()));
  }
  size_t shstrndx = 0;
  const std::string name = elf_getshdrstrndx(elf, &shstrndx) == 0 ? section_name(elf, shstrndx, shdr) : "";
  const std::string what = fmt::format("section {} ({})", elf_ndxscn(scn), name);
  if (shdr.sh_type == SHT_NOBITS) return make_error(fmt::format("{}: {}: has no bytes in the file", path, what));
  const bool elf_compressed = (shdr.sh_flags & SHF_COMPRESSED) != 0;
  const bool gnu_compressed = !elf_compressed && name.starts_with(kGnuCompressedPrefix);
  if (elf_compressed || gnu_compressed) {
    auto declared = declared_inflated_size(scn, gnu_compressed);
    if (!declared) return make_error(fmt::format("{}: {}: unreadable compression header", path, what));
    if (auto sane = check_inflated_size(path, what, *declared, shdr.sh_size); !sane) return sane.error();
    const int inflated = elf_compressed ? elf_compress(scn, 0, 0) : elf_compress_gnu(scn, 0, 0);
    if (inflated < 0) return make_error(fmt::format("{}: {}: cannot decompress: {}", path, what, libelf_error()));
  }
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr || data->d_buf == nullptr) {
    return make_error(fmt::format("{}: {}: cannot read: {}", path, what, libelf_error()));
  }
  return data;
}

std::string hex_string(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    hex.push_back(kDigits[bytes[i] >> 4]);
    hex.push_back(kDigits[bytes[i] & 0xf]);
  }
  return hex;
}

// Walks the notes in `data` (gelf_getnote checks every bound) and returns the
// GNU build ID, or "" when there is none.
std::string find_build_id_note(Elf_Data* data) {
  if (data == nullptr || data->d_buf == nullptr) return "";
  const auto* base = static_cast<const unsigned char*>(data->d_buf);
  size_t offset = 0;
  GElf_Nhdr note;
  size_t name_offset = 0;
  size_t desc_offset = 0;
  while (offset < data->d_size) {
    size_t next = gelf_getnote(data, offset, &note, &name_offset, &desc_offset);
    if (next == 0) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && note.n_descsz > 0 &&
        std::memcmp(base + name_offset, "GNU", 4) == 0) {
      return hex_string(base + desc_offset, note.n_descsz);
    }
    offset = next;
  }
  return "";
}

// Whether `count` entries of `entry_size` bytes at `offset` fit in the file.
bool table_in_file(uint64_t offset, uint64_t count, uint64_t entry_size, uint64_t file_size) {
  return offset <= file_size && (entry_size == 0 || (file_size - offset) / entry_size >= count);
}

bool is_function_type(unsigned type) { return type == STT_FUNC || type == STT_GNU_IFUNC; }

bool wanted_symbol_type(unsigned type, SymbolKinds kinds) {
  if (is_function_type(type)) return true;
  return kinds == SymbolKinds::kFunctionsAndObjects && (type == STT_OBJECT || type == STT_TLS);
}

}  // namespace

ElfFile::ElfFile(std::string path, UniqueFd fd, Elf* elf)
    : path_(std::move(path)), fd_(std::move(fd)), elf_(elf) {}

ElfFile::ElfFile(ElfFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::move(other.fd_)),
      elf_(std::exchange(other.elf_, nullptr)),
      elf_type_(other.elf_type_),
      machine_(other.machine_),
      is_64bit_little_endian_(other.is_64bit_little_endian_),
      file_size_(other.file_size_),
      program_headers_(std::move(other.program_headers_)),
      load_segments_(std::move(other.load_segments_)),
      tls_segment_(other.tls_segment_) {}

ElfFile& ElfFile::operator=(ElfFile&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    fd_ = std::move(other.fd_);
    elf_ = std::exchange(other.elf_, nullptr);
    elf_type_ = other.elf_type_;
    machine_ = other.machine_;
    is_64bit_little_endian_ = other.is_64bit_little_endian_;
    file_size_ = other.file_size_;
    program_headers_ = std::move(other.program_headers_);
    load_segments_ = std::move(other.load_segments_);
    tls_segment_ = other.tls_segment_;
  }
  return *this;
}

ElfFile::~ElfFile() { close(); }

void ElfFile::close() {
  // The Elf handle reads through the descriptor, so it goes first.
  if (elf_ != nullptr) elf_end(elf_);
  elf_ = nullptr;
  fd_.reset();
}

Result<ElfFile> ElfFile::open(const std::string& path) {
  if (!libelf_ready()) return make_error(fmt::format("{}: libelf is unusable: {}", path, libelf_error()));

  // Never blocks, refuses FIFOs, devices, sockets and directories before
  // any read (the path may be anything a process mapped, or swapped since).
  auto opened = open_regular_file(path);
  if (!opened) return opened.error();
  UniqueFd fd = std::move(opened->fd);

  // ELF_C_READ rather than ELF_C_READ_MMAP: libelf then pread()s only the
  // parts it needs, and a file truncated while we read it gives read errors
  // instead of SIGBUS.
  Elf* elf = elf_begin(fd.get(), ELF_C_READ, nullptr);
  if (elf == nullptr) return make_error(fmt::format("{}: not an ELF file: {}", path, libelf_error()));
  ElfFile file(path, std::move(fd), elf);
  if (elf_kind(elf) != ELF_K_ELF) return make_error(fmt::format("{}: not an ELF file", path));
  if (auto valid = file.validate(); !valid) return valid.error();
  return Result<ElfFile>(std::move(file));
}

// Checks the header tables up front so that later accessors can rely on them
// and errors say precisely what is wrong (libelf's own messages name neither
// the file nor the table).
Result<void> ElfFile::validate() {
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf_, &ehdr) == nullptr) {
    return make_error(fmt::format("{}: invalid ELF header: {}", path_, libelf_error()));
  }
  elf_type_ = ehdr.e_type;
  machine_ = ehdr.e_machine;
  is_64bit_little_endian_ = ehdr.e_ident[EI_CLASS] == ELFCLASS64 && ehdr.e_ident[EI_DATA] == ELFDATA2LSB;

  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return make_error(fmt::format("{}: {}", path_, std::strerror(errno)));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  file_size_ = file_size;

  // Range checks use the raw header fields: libelf quietly reports zero
  // sections (or fewer segments) when a table lies outside the file, which
  // would make a corrupt file look merely stripped.
  size_t shnum = 0;
  if (ehdr.e_shoff == 0 && ehdr.e_shnum != 0) {
    return make_error(fmt::format("{}: {} section headers but no section header table offset", path_, ehdr.e_shnum));
  }
  if (ehdr.e_shoff != 0) {
    const size_t shentsize = gelf_fsize(elf_, ELF_T_SHDR, 1, EV_CURRENT);
    if (ehdr.e_shentsize != shentsize) {
      return make_error(fmt::format("{}: section header entry size {} (expected {})", path_,
                                    ehdr.e_shentsize, shentsize));
    }
    // e_shnum 0 with a table means extended numbering: entry 0 holds the count.
    const uint64_t declared = ehdr.e_shnum != 0 ? ehdr.e_shnum : 1;
    if (!table_in_file(ehdr.e_shoff, declared, shentsize, file_size)) {
      return make_error(fmt::format(
          "{}: section header table at offset {:#x} ({} entries) extends past the end of the file ({} bytes)",
          path_, ehdr.e_shoff, declared, file_size));
    }
    if (elf_getshdrnum(elf_, &shnum) != 0) {
      return make_error(fmt::format("{}: cannot read the section count: {}", path_, libelf_error()));
    }
    if ((ehdr.e_shnum != 0 && shnum != ehdr.e_shnum) || !table_in_file(ehdr.e_shoff, shnum, shentsize, file_size)) {
      return make_error(fmt::format(
          "{}: section header table at offset {:#x} ({} entries) extends past the end of the file ({} bytes)",
          path_, ehdr.e_shoff, shnum, file_size));
    }
  }
  if (shnum > 0) {
    size_t shstrndx = 0;
    if (elf_getshdrstrndx(elf_, &shstrndx) != 0) {
      return make_error(fmt::format("{}: cannot read the section name table index: {}", path_, libelf_error()));
    }
    if (shstrndx >= shnum) {
      return make_error(fmt::format("{}: section name table index {} out of range ({} sections)", path_,
                                    shstrndx, shnum));
    }
    for (size_t index = 0; index < shnum; ++index) {
      Elf_Scn* scn = elf_getscn(elf_, index);
      GElf_Shdr shdr;
      if (scn == nullptr || gelf_getshdr(scn, &shdr) == nullptr) {
        return make_error(fmt::format("{}: section header {} unreadable: {}", path_, index, libelf_error()));
      }
      if (shdr.sh_link >= shnum && (shdr.sh_type == SHT_SYMTAB || shdr.sh_type == SHT_DYNSYM)) {
        return make_error(fmt::format("{}: section header {} links to section {} out of range ({} sections)",
                                      path_, index, shdr.sh_link, shnum));
      }
    }
  }

  size_t phnum = 0;
  if (ehdr.e_phoff == 0 && ehdr.e_phnum != 0) {
    return make_error(fmt::format("{}: {} program headers but no program header table offset", path_, ehdr.e_phnum));
  }
  if (ehdr.e_phoff != 0 && ehdr.e_phnum != 0) {
    const size_t phentsize = gelf_fsize(elf_, ELF_T_PHDR, 1, EV_CURRENT);
    // PN_XNUM: the real count is in section header 0, which libelf reads.
    const uint64_t declared = ehdr.e_phnum != PN_XNUM ? ehdr.e_phnum : 1;
    if (ehdr.e_phentsize != phentsize || !table_in_file(ehdr.e_phoff, declared, phentsize, file_size)) {
      return make_error(fmt::format(
          "{}: program header table at offset {:#x} ({} entries of {} bytes) extends past the end of the file "
          "({} bytes)",
          path_, ehdr.e_phoff, declared, ehdr.e_phentsize, file_size));
    }
    if (elf_getphdrnum(elf_, &phnum) != 0) {
      return make_error(fmt::format("{}: cannot read the program header count: {}", path_, libelf_error()));
    }
    if ((ehdr.e_phnum != PN_XNUM && phnum != ehdr.e_phnum) || !table_in_file(ehdr.e_phoff, phnum, phentsize, file_size)) {
      return make_error(fmt::format(
          "{}: program header table at offset {:#x} ({} entries) extends past the end of the file ({} bytes)",
          path_, ehdr.e_phoff, phnum, file_size));
    }
  }
  for (size_t index = 0; index < phnum; ++index) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf_, static_cast<int>(index), &phdr) == nullptr) {
      return make_error(fmt::format("{}: program header {} unreadable: {}", path_, index, libelf_error()));
    }
    program_headers_.push_back(
        ProgramHeader{phdr.p_type, phdr.p_flags, phdr.p_offset, phdr.p_vaddr, phdr.p_filesz, phdr.p_memsz});
    if (phdr.p_type == PT_LOAD) {
      load_segments_.push_back(program_headers_.back());
    } else if (phdr.p_type == PT_TLS) {
      tls_segment_ = TlsSegment{phdr.p_vaddr, phdr.p_memsz, phdr.p_align ? phdr.p_align : 1};
    }
  }
  return ok();
}

std::string ElfFile::build_id() const {
  // Sections first: a separate debug file keeps .note.gnu.build-id, while its
  // program headers describe bytes that were left out of the file.
  Elf_Scn* scn = nullptr;
  bool has_note_sections = false;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_NOTE) continue;
    has_note_sections = true;
    auto contents = section_contents(elf_, scn, path_);
    std::string id = contents ? find_build_id_note(*contents) : "";
    if (!id.empty()) return id;
  }
  if (has_note_sections) return "";

  // No note sections at all (e.g. section headers stripped): PT_NOTE.
  size_t phnum = 0;
  if (elf_getphdrnum(elf_, &phnum) != 0) return "";
  for (size_t index = 0; index < phnum; ++index) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf_, static_cast<int>(index), &phdr) == nullptr || phdr.p_type != PT_NOTE) continue;
    Elf_Data* data = elf_getdata_rawchunk(elf_, static_cast<int64_t>(phdr.p_offset), phdr.p_filesz,
                                          phdr.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
    std::string id = find_build_id_note(data);
    if (!id.empty()) return id;
  }
  return "";
}

std::optional<DebugLink> ElfFile::debuglink() const {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf_, &shstrndx) != 0) return std::nullopt;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || section_name(elf_, shstrndx, shdr) != ".gnu_debuglink") continue;
    auto contents = section_contents(elf_, scn, path_);
    if (!contents) return std::nullopt;
    Elf_Data* data = *contents;
    // Layout: NUL-terminated file name, zero padding to 4 bytes, CRC32 in
    // the file's byte order.
    const auto* bytes = static_cast<const unsigned char*>(data->d_buf);
    const size_t name_length = strnlen(reinterpret_cast<const char*>(bytes), data->d_size);
    const size_t crc_offset = (name_length + 1 + 3) & ~size_t{3};
    if (name_length == 0 || crc_offset + 4 > data->d_size) return std::nullopt;
    const unsigned char* crc = bytes + crc_offset;
    const char* ident = elf_getident(elf_, nullptr);
    const bool big_endian = ident != nullptr && ident[EI_DATA] == ELFDATA2MSB;
    DebugLink link;
    link.name.assign(reinterpret_cast<const char*>(bytes), name_length);
    link.crc = big_endian ? (uint32_t{crc[0]} << 24 | uint32_t{crc[1]} << 16 | uint32_t{crc[2]} << 8 | crc[3])
                          : (uint32_t{crc[3]} << 24 | uint32_t{crc[2]} << 16 | uint32_t{crc[1]} << 8 | crc[0]);
    // A debug link names a file, never a path: refuse anything that would
    // make the finder look outside the directories it means to search.
    if (link.name.find('/') != std::string::npos || link.name == "." || link.name == "..") return std::nullopt;
    return link;
  }
  return std::nullopt;
}

Result<void> ElfFile::for_each_symbol(SymbolKinds kinds, const std::function<bool(const ElfSymbol&)>& visit) const {
  size_t shnum = 0;
  size_t shstrndx = 0;
  if (elf_getshdrnum(elf_, &shnum) != 0 || elf_getshdrstrndx(elf_, &shstrndx) != 0) {
    return make_error(fmt::format("{}: cannot read section headers: {}", path_, libelf_error()));
  }

  std::vector<uint64_t> section_ends(shnum, 0);
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr && (shdr.sh_flags & SHF_ALLOC) != 0) {
      section_ends[elf_ndxscn(scn)] = shdr.sh_addr + shdr.sh_size;
    }
  }

  const size_t symbol_entry_size = gelf_fsize(elf_, ELF_T_SYM, 1, EV_CURRENT);
  scn = nullptr;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    if (shdr.sh_type != SHT_SYMTAB && shdr.sh_type != SHT_DYNSYM) continue;
    const size_t index = elf_ndxscn(scn);
    const std::string name = section_name(elf_, shstrndx, shdr);

    Elf_Scn* string_scn = elf_getscn(elf_, shdr.sh_link);
    GElf_Shdr string_shdr;
    if (string_scn == nullptr || gelf_getshdr(string_scn, &string_shdr) == nullptr ||
        string_shdr.sh_type != SHT_STRTAB) {
      return make_error(fmt::format("{}: section {} ({}): linked section {} is not a string table", path_, index,
                                    name, shdr.sh_link));
    }
    // elf_strptr reads the string table's raw bytes: decompress it first.
    if ((string_shdr.sh_flags & SHF_COMPRESSED) != 0) {
      if (auto strings = section_contents(elf_, string_scn, path_); !strings) return strings.error();
    }
    auto contents = section_contents(elf_, scn, path_);
    if (!contents) return make_error(contents.error().message + " (cannot read symbols)");
    Elf_Data* data = *contents;

    const size_t count = data->d_size / symbol_entry_size;
    for (size_t i = 1; i < count; ++i) {  // entry 0 is the reserved null symbol
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) break;
      const unsigned type = GELF_ST_TYPE(sym.st_info);
      if (!wanted_symbol_type(type, kinds) || sym.st_shndx == SHN_UNDEF) continue;
      // Functions at address 0 are placeholders; TLS values are offsets in
      // the TLS block, where 0 is a real offset.
      if (sym.st_value == 0 && type != STT_TLS) continue;
      const char* symbol_name = elf_strptr(elf_, shdr.sh_link, sym.st_name);
      if (symbol_name == nullptr || symbol_name[0] == '\0') continue;

      ElfSymbol symbol;
      symbol.name = symbol_name;
      symbol.value = sym.st_value;
      // On 32-bit ARM bit 0 of a function address marks Thumb code.
      if (machine_ == EM_ARM && is_function_type(type)) symbol.value &= ~uint64_t{1};
      symbol.size = sym.st_size;
      symbol.binding = static_cast<uint8_t>(GELF_ST_BIND(sym.st_info));
      symbol.type = static_cast<uint8_t>(type);
      if (sym.st_shndx < section_ends.size()) symbol.section_end = section_ends[sym.st_shndx];
      if (!visit(symbol)) return ok();
    }
  }
  return ok();
}

Result<std::vector<ElfSymbol>> ElfFile::symbols(SymbolKinds kinds) const {
  std::vector<ElfSymbol> result;
  auto visited = for_each_symbol(kinds, [&](const ElfSymbol& symbol) {
    result.push_back(symbol);
    return true;
  });
  if (!visited) return visited.error();
  return result;
}

Result<std::optional<ElfSymbol>> ElfFile::find_symbol(std::string_view name) const {
  std::optional<ElfSymbol> found;
  auto visited = for_each_symbol(SymbolKinds::kFunctionsAndObjects, [&](const ElfSymbol& symbol) {
    if (symbol.name != name) return true;
    found = symbol;
    return false;
  });
  if (!visited) return visited.error();
  return found;
}

bool ElfFile::has_symtab() const {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr && shdr.sh_type == SHT_SYMTAB && shdr.sh_size > 0) return true;
  }
  return false;
}

std::optional<uint64_t> ElfFile::file_offset_to_vaddr(uint64_t file_offset) const {
  for (const LoadSegment& segment : load_segments_) {
    if (file_offset >= segment.offset && file_offset - segment.offset < segment.filesz) {
      return segment.vaddr + (file_offset - segment.offset);
    }
  }
  return std::nullopt;
}

Result<std::vector<uint8_t>> ElfFile::read_at_vaddr(uint64_t vaddr, size_t size) const {
  for (const LoadSegment& segment : load_segments_) {
    if (vaddr < segment.vaddr || vaddr - segment.vaddr >= segment.filesz) continue;
    const uint64_t into = vaddr - segment.vaddr;
    if (size > segment.filesz - into) break;  // runs past the file-backed part
    std::vector<uint8_t> bytes(size);
    auto read = read_file_range(segment.offset + into, size, bytes.data(), fmt::format("address {:#x}", vaddr));
    if (!read) return read.error();
    return bytes;
  }
  return make_error(fmt::format("{}: address {:#x} (+{} bytes) is not in the file-backed part of a PT_LOAD segment",
                                path_, vaddr, size));
}

Result<std::vector<uint8_t>> ElfFile::section_bytes(std::string_view name, uint64_t* vaddr) const {
  for (const ElfSection& section : sections()) {
    if (section.name != name) continue;
    auto bytes = read_section(section);
    if (!bytes) return bytes.error();
    if (vaddr) *vaddr = section.addr;
    return std::vector<uint8_t>(bytes->data.get(), bytes->data.get() + bytes->size);
  }
  return make_error(fmt::format("{}: no section named {}", path_, name));
}

bool ElfSection::compressed() const {
  return (flags & SHF_COMPRESSED) != 0 || std::string_view(name).starts_with(kGnuCompressedPrefix);
}

std::vector<ElfSection> ElfFile::sections() const {
  std::vector<ElfSection> result;
  size_t shstrndx = 0;
  const bool have_names = elf_getshdrstrndx(elf_, &shstrndx) == 0;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;  // validate() read every header once
    result.push_back(ElfSection{elf_ndxscn(scn), have_names ? section_name(elf_, shstrndx, shdr) : "", shdr.sh_type,
                                shdr.sh_flags, shdr.sh_addr, shdr.sh_offset, shdr.sh_size});
  }
  return result;
}

Result<OwnedBytes> ElfFile::read_section(const ElfSection& section) const {
  const std::string what = fmt::format("section {}", section.name);
  if (section.type == SHT_NOBITS) return make_error(fmt::format("{}: {}: has no bytes in the file", path_, what));
  if (!section.compressed()) return read_file_bytes(section.offset, section.size, what);
  Elf_Scn* scn = elf_getscn(elf_, section.index);
  if (scn == nullptr) return make_error(fmt::format("{}: {}: no section {}: {}", path_, what, section.index, libelf_error()));
  auto contents = section_contents(elf_, scn, path_);
  if (!contents) return contents.error();
  OwnedBytes bytes;
  bytes.size = (*contents)->d_size;
  bytes.data = std::make_unique_for_overwrite<uint8_t[]>(bytes.size);
  std::memcpy(bytes.data.get(), (*contents)->d_buf, bytes.size);
  return bytes;
}

Result<OwnedBytes> ElfFile::read_file_bytes(uint64_t offset, uint64_t size, std::string_view what) const {
  // A corrupt (or hostile) header must not make us allocate gigabytes.
  if (size > kMaxInflatedSectionBytes) {
    return make_error(fmt::format("{}: {} is {:#x} bytes, more than the {:#x} accepted", path_, what, size,
                                  kMaxInflatedSectionBytes));
  }
  OwnedBytes bytes;
  bytes.data = std::make_unique_for_overwrite<uint8_t[]>(size);
  bytes.size = size;
  if (auto read = read_file_range(offset, size, bytes.data.get(), what); !read) return read.error();
  return bytes;
}

Result<void> ElfFile::read_file_range(uint64_t offset, uint64_t size, uint8_t* out, std::string_view what) const {
  if (offset > file_size_ || size > file_size_ - offset) {
    return make_error(fmt::format("{}: {} (file offset {:#x}, {:#x} bytes) extends past the end of the file ({:#x} bytes)",
                                  path_, what, offset, size, file_size_));
  }
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_.get(), out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(fmt::format("{}: reading {}: {}", path_, what, std::strerror(errno)));
    if (n == 0) return make_error(fmt::format("{}: reading {}: the file ended early (truncated while reading?)", path_, what));
    done += static_cast<uint64_t>(n);
  }
  return ok();
}

Result<void> check_inflated_size(const std::string& path, const std::string& section, uint64_t declared,
                                 uint64_t compressed) {
  if (declared > kMaxInflatedSectionBytes) {
    return make_error(fmt::format("{}: {}: declares {} bytes uncompressed, more than the {} accepted", path, section,
                                  declared, kMaxInflatedSectionBytes));
  }
  if (declared > kAlwaysInflatableBytes && declared / kMaxInflationRatio > compressed) {
    return make_error(fmt::format("{}: {}: declares {} bytes uncompressed from {} compressed, more than {}x", path,
                                  section, declared, compressed, kMaxInflationRatio));
  }
  return ok();
}

Result<std::string> read_build_id(const std::string& path) {
  auto file = ElfFile::open(path);
  if (!file) return file.error();
  return file->build_id();
}

}  // namespace omniprof
