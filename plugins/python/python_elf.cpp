#include "python_elf.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace omniprof::python {

struct PythonElfFile::ElfHandle {
  Elf* elf;
};

Result<std::unique_ptr<PythonElfFile>> PythonElfFile::open(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE)
    return make_error("libelf: " + std::string(elf_errmsg(-1)));
  // Non-blocking and no controlling tty: the path comes from a process's
  // maps and could name a FIFO or device swapped in under us.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return make_error("cannot open " + path + ": " + std::strerror(errno));
  std::unique_ptr<PythonElfFile> file(new PythonElfFile());
  file->path_ = path;
  file->fd_ = fd;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return make_error(path + ": not a regular file");
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (!elf) return make_error(path + ": not an ELF file: " + elf_errmsg(-1));
  file->elf_ = new ElfHandle{elf};
  if (elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64) {
    return make_error(path + ": not a 64-bit ELF file");
  }
  return file;
}

PythonElfFile::~PythonElfFile() {
  if (elf_) {
    elf_end(elf_->elf);
    delete elf_;
  }
  if (fd_ >= 0) ::close(fd_);
}

// Calls visit(name, symbol) for each named symbol of .symtab then .dynsym
// until it returns true; returns whether it did.
template <typename Visit>
bool PythonElfFile::visit_symbols(Visit&& visit) const {
  for (Elf64_Word type : {SHT_SYMTAB, SHT_DYNSYM}) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf_->elf, scn)) != nullptr) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != type || shdr.sh_entsize == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data) continue;
      std::size_t count = shdr.sh_size / shdr.sh_entsize;
      for (std::size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
        const char* name = elf_strptr(elf_->elf, shdr.sh_link, sym.st_name);
        if (!name || !*name) continue;
        if (visit(name, sym)) return true;
      }
    }
  }
  return false;
}

std::optional<ElfSymbolInfo> PythonElfFile::find_symbol(const std::string& name) const {
  ElfSymbolInfo found;
  bool ok = visit_symbols([&](const char* symbol_name, const GElf_Sym& sym) {
    if (sym.st_shndx == SHN_UNDEF || name != symbol_name) return false;
    found = ElfSymbolInfo{sym.st_value, sym.st_size};
    return true;
  });
  if (!ok) return std::nullopt;
  return found;
}

bool PythonElfFile::has_symbol_with_prefix(const std::string& prefix) const {
  return visit_symbols([&](const char* symbol_name, const GElf_Sym& sym) {
    return sym.st_shndx != SHN_UNDEF &&
           std::strncmp(symbol_name, prefix.c_str(), prefix.size()) == 0;
  });
}

Result<std::vector<uint8_t>> PythonElfFile::read_at(uint64_t vaddr, std::size_t len) const {
  std::size_t count = 0;
  if (elf_getphdrnum(elf_->elf, &count) != 0) return make_error(path_ + ": no program headers");
  for (std::size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf_->elf, static_cast<int>(i), &phdr) || phdr.p_type != PT_LOAD) continue;
    if (vaddr < phdr.p_vaddr || vaddr - phdr.p_vaddr >= phdr.p_filesz) continue;
    if (len > phdr.p_filesz - (vaddr - phdr.p_vaddr)) break;
    std::vector<uint8_t> bytes(len);
    off_t offset = static_cast<off_t>(phdr.p_offset + (vaddr - phdr.p_vaddr));
    ssize_t n = pread(fd_, bytes.data(), len, offset);
    if (n != static_cast<ssize_t>(len))
      return make_error(path_ + ": short read at file offset " + std::to_string(offset));
    return bytes;
  }
  return make_error(path_ + ": address 0x" +
                    [&] {
                      char hex[32];
                      std::snprintf(hex, sizeof hex, "%llx",
                                    static_cast<unsigned long long>(vaddr));
                      return std::string(hex);
                    }() +
                    " (+" + std::to_string(len) + ") is not in a file-backed PT_LOAD segment");
}

std::optional<std::vector<uint8_t>> PythonElfFile::section(const std::string& name) const {
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf_->elf, &shstrndx) != 0) return std::nullopt;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf_->elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    const char* section_name = elf_strptr(elf_->elf, shstrndx, shdr.sh_name);
    if (!section_name || name != section_name || shdr.sh_type == SHT_NOBITS) continue;
    Elf_Data* data = elf_rawdata(scn, nullptr);
    if (!data || !data->d_buf) return std::nullopt;
    const auto* begin = static_cast<const uint8_t*>(data->d_buf);
    return std::vector<uint8_t>(begin, begin + data->d_size);
  }
  return std::nullopt;
}

}  // namespace omniprof::python
