// Tests of ELF reading and symbolization against the binaries built in
// tests/fixtures/symbols. Expected addresses come from nm and readelf run at
// test time (an independent reading of the same files), or from the running
// processes themselves; no address is hard-coded.
#include "symbolize/elf_symbolizer.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <elf.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "process/proc_maps.h"
#include "omniprof/support/debug_file_finder.h"
#include "symbolize/demangle.h"
#include "omniprof/support/elf_file.h"

// A function of this (PIE) test binary, for the runtime address tests.
extern "C" __attribute__((noinline, used)) int omniprof_symbolizer_test_marker(int value) {
  static volatile int sink;
  sink = value * 3;
  return sink + 1;
}

namespace omniprof {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return std::string(OMNIPROF_TEST_FIXTURES_DIR) + "/symbols/" + name; }

std::string run_command(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string output;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  ::pclose(pipe);
  return output;
}

struct NmSymbol {
  uint64_t address = 0;
  uint64_t size = 0;
  char type = 0;
};

// name -> symbol, from `nm -S --defined-only` (first definition of a name).
std::map<std::string, NmSymbol> nm_symbols(const std::string& path) {
  std::map<std::string, NmSymbol> symbols;
  std::istringstream lines(run_command("nm -S --defined-only '" + path + "' 2>/dev/null"));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<std::string> parts{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    NmSymbol symbol;
    if (parts.size() == 4) {
      symbol.address = std::stoull(parts[0], nullptr, 16);
      symbol.size = std::stoull(parts[1], nullptr, 16);
      symbol.type = parts[2][0];
    } else if (parts.size() == 3) {
      symbol.address = std::stoull(parts[0], nullptr, 16);
      symbol.type = parts[1][0];
    } else {
      continue;
    }
    symbols.emplace(parts.back(), symbol);
  }
  return symbols;
}

std::string readelf_build_id(const std::string& path) {
  const std::string notes = run_command("readelf -n '" + path + "' 2>/dev/null");
  const std::string marker = "Build ID: ";
  const size_t at = notes.find(marker);
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  return notes.substr(begin, notes.find_first_not_of("0123456789abcdef", begin) - begin);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "omniprof_symbolizer_XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Path of `relative` inside the directory, creating its parent directories.
  std::string file(const std::string& relative) const {
    const fs::path full = fs::path(path_) / relative;
    fs::create_directories(full.parent_path());
    return full.string();
  }

 private:
  std::string path_;
};

// Functions in symbols_pie / symbols_nopie: raw name -> expected display name.
const std::vector<std::pair<std::string, std::string>>& known_executable_functions() {
  static const std::vector<std::pair<std::string, std::string>> functions{
      {"omniprof_fixture_alpha", "omniprof_fixture_alpha"},
      {"omniprof_fixture_beta", "omniprof_fixture_beta"},
      {"omniprof_fixture_static_helper", "omniprof_fixture_static_helper"},
      {"_ZN16omniprof_fixture5scaleEi", "omniprof_fixture::scale(int)"},
      {"_ZN16omniprof_fixture5twiceEl", "omniprof_fixture::twice(long)"},
      {"_ZN16omniprof_fixture11Accumulator3addEl", "omniprof_fixture::Accumulator::add(long)"},
  };
  return functions;
}

// Names `address` of root_prefix + path, cached under `file_id` (any
// nonzero id, one per file in a symbolizer); its debug file is looked for
// by `path` under `root_prefix`.
std::optional<ElfSymbolizer::Symbol> symbolize_or_fail(ElfSymbolizer& symbolizer, uint64_t file_id,
                                                       const std::string& path, uint64_t address,
                                                       const std::string& root_prefix = "") {
  auto symbol = symbolizer.symbolize(file_id, root_prefix + path, address, {path, root_prefix});
  EXPECT_TRUE(symbol.ok()) << symbol.error().message;
  if (!symbol.ok()) return std::nullopt;
  return *symbol;
}

// A symbolizer whose debug root is an empty directory, so that only the
// files next to the binary (debuglink) can supply debug files.
struct IsolatedSymbolizer {
  TempDir empty_debug_root;
  ElfSymbolizer symbolizer{DebugFileFinder(empty_debug_root.path())};
};

// --- ElfFile -----------------------------------------------------------------

TEST(ElfFileTest, ReportsTypeSegmentsAndSymtab) {
  auto pie = ElfFile::open(fixture("symbols_pie"));
  ASSERT_TRUE(pie.ok()) << pie.error().message;
  auto nopie = ElfFile::open(fixture("symbols_nopie"));
  ASSERT_TRUE(nopie.ok()) << nopie.error().message;
  auto library = ElfFile::open(fixture("libsymbols_fixture.so"));
  ASSERT_TRUE(library.ok()) << library.error().message;
  auto stripped = ElfFile::open(fixture("symbols_pie_stripped"));
  ASSERT_TRUE(stripped.ok()) << stripped.error().message;

  EXPECT_EQ(pie->elf_type(), ET_DYN);
  EXPECT_EQ(nopie->elf_type(), ET_EXEC);
  EXPECT_EQ(library->elf_type(), ET_DYN);
  EXPECT_TRUE(pie->has_symtab());
  EXPECT_TRUE(library->has_symtab());
  EXPECT_FALSE(stripped->has_symtab());

  for (const ElfFile* file : {&*pie, &*nopie, &*library}) {
    SCOPED_TRACE(file->path());
    ASSERT_FALSE(file->load_segments().empty());
    bool any_executable = false;
    for (const LoadSegment& segment : file->load_segments()) {
      any_executable |= (segment.flags & PF_X) != 0;
      EXPECT_LE(segment.filesz, segment.memsz);
      if (segment.filesz == 0) continue;
      EXPECT_EQ(file->file_offset_to_vaddr(segment.offset), segment.vaddr);
      EXPECT_EQ(file->file_offset_to_vaddr(segment.offset + segment.filesz - 1), segment.vaddr + segment.filesz - 1);
    }
    EXPECT_TRUE(any_executable);
    EXPECT_EQ(file->file_offset_to_vaddr(uint64_t{1} << 40), std::nullopt);
  }
}

TEST(ElfFileTest, BuildIdMatchesReadelf) {
  const std::string library_id = readelf_build_id(fixture("libsymbols_fixture.so"));
  ASSERT_FALSE(library_id.empty());
  const std::string build_id_debug_file =
      fixture("debug_root/.build-id/" + library_id.substr(0, 2) + "/" + library_id.substr(2) + ".debug");
  for (const std::string& path :
       {fixture("symbols_pie"), fixture("symbols_nopie"), fixture("libsymbols_fixture.so"),
        fixture("libsymbols_fixture_stripped.so"), fixture("symbols_pie_stripped"),
        fixture(".debug/symbols_pie_stripped.debug"), build_id_debug_file}) {
    SCOPED_TRACE(path);
    const std::string expected = readelf_build_id(path);
    ASSERT_FALSE(expected.empty());
    auto file = ElfFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->build_id(), expected);
    auto id = read_build_id(path);
    ASSERT_TRUE(id.ok()) << id.error().message;
    EXPECT_EQ(*id, expected);
  }
  // Stripping keeps the note, so the stripped library and its debug file
  // share the original's build ID.
  EXPECT_EQ(readelf_build_id(fixture("libsymbols_fixture_stripped.so")), library_id);
}

TEST(ElfFileTest, SymbolsMatchNm) {
  const std::string path = fixture("symbols_pie");
  const auto nm = nm_symbols(path);
  auto file = ElfFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto functions = file->symbols();
  ASSERT_TRUE(functions.ok()) << functions.error().message;

  for (const auto& [raw_name, display_name] : known_executable_functions()) {
    SCOPED_TRACE(raw_name);
    ASSERT_TRUE(nm.count(raw_name));
    bool found = false;
    for (const ElfSymbol& symbol : *functions) {
      if (symbol.name != raw_name) continue;
      found = true;
      EXPECT_EQ(symbol.value, nm.at(raw_name).address);
      EXPECT_EQ(symbol.size, nm.at(raw_name).size);
      EXPECT_TRUE(symbol.type == STT_FUNC || symbol.type == STT_GNU_IFUNC);
      EXPECT_GT(symbol.section_end, symbol.value);
    }
    EXPECT_TRUE(found);
  }
  for (const ElfSymbol& symbol : *functions) {
    EXPECT_NE(symbol.name, "omniprof_fixture_counter") << "data symbols are not functions";
    EXPECT_NE(symbol.value, 0u);
  }

  auto everything = file->symbols(SymbolKinds::kFunctionsAndObjects);
  ASSERT_TRUE(everything.ok()) << everything.error().message;
  bool found_counter = false;
  for (const ElfSymbol& symbol : *everything) {
    if (symbol.name == "omniprof_fixture_counter") {
      found_counter = true;
      EXPECT_EQ(symbol.type, STT_OBJECT);
      EXPECT_EQ(symbol.value, nm.at("omniprof_fixture_counter").address);
    }
  }
  EXPECT_TRUE(found_counter);
}

// find_symbol answers what symbols() would, without collecting them all;
// for_each_symbol stops when told to.
TEST(ElfFileTest, FindsASymbolByNameAndStopsEarly) {
  const std::string path = fixture("symbols_pie");
  const auto nm = nm_symbols(path);
  auto file = ElfFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  for (const auto& [raw_name, display_name] : known_executable_functions()) {
    SCOPED_TRACE(raw_name);
    auto symbol = file->find_symbol(raw_name);
    ASSERT_TRUE(symbol.ok()) << symbol.error().message;
    ASSERT_TRUE(symbol->has_value());
    EXPECT_EQ((*symbol)->value, nm.at(raw_name).address);
    EXPECT_EQ((*symbol)->size, nm.at(raw_name).size);
  }
  auto counter = file->find_symbol("omniprof_fixture_counter");  // data, not a function
  ASSERT_TRUE(counter.ok() && counter->has_value());
  EXPECT_EQ((*counter)->type, STT_OBJECT);
  EXPECT_EQ((*counter)->value, nm.at("omniprof_fixture_counter").address);
  auto missing = file->find_symbol("omniprof_no_such_symbol");
  ASSERT_TRUE(missing.ok()) << missing.error().message;
  EXPECT_FALSE(missing->has_value());

  int visited = 0;
  auto stopped = file->for_each_symbol(SymbolKinds::kFunctionsAndObjects, [&](const ElfSymbol&) {
    ++visited;
    return visited < 3;
  });
  ASSERT_TRUE(stopped.ok()) << stopped.error().message;
  EXPECT_EQ(visited, 3);
}

}  // namespace
}  // namespace omniprof

// A constant this test binary carries in its own file: what read_at_vaddr
// and section_bytes read from /proc/self/exe must be what the loader mapped.
extern "C" __attribute__((used)) const char omniprof_elf_file_test_marker[] = "bytes at a link-time address";

namespace omniprof {
namespace {

TEST(ElfFileTest, ReadsBytesAtAVirtualAddressAndASectionsContents) {
  auto file = ElfFile::open("/proc/self/exe");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto symbol = file->find_symbol("omniprof_elf_file_test_marker");
  ASSERT_TRUE(symbol.ok() && symbol->has_value());
  const ElfSymbol& marker = **symbol;
  ASSERT_EQ(marker.size, sizeof(omniprof_elf_file_test_marker));
  auto bytes = file->read_at_vaddr(marker.value, marker.size);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()),
            std::string(omniprof_elf_file_test_marker, sizeof(omniprof_elf_file_test_marker)));

  auto rodata = file->section_bytes(".rodata");
  ASSERT_TRUE(rodata.ok()) << rodata.error().message;
  const std::string text(rodata->begin(), rodata->end());
  EXPECT_NE(text.find(omniprof_elf_file_test_marker), std::string::npos);

  // Past every segment's file-backed bytes, or running off the end of one.
  auto nowhere = file->read_at_vaddr(uint64_t{1} << 46, 8);
  ASSERT_FALSE(nowhere.ok());
  EXPECT_NE(nowhere.error().message.find("0x400000000000"), std::string::npos) << nowhere.error().message;
  const LoadSegment& last = file->load_segments().back();
  EXPECT_FALSE(file->read_at_vaddr(last.vaddr + last.filesz - 4, 8).ok());
  // .bss has no bytes in the file; a missing section is named.
  auto bss = file->section_bytes(".bss");
  ASSERT_FALSE(bss.ok());
  EXPECT_NE(bss.error().message.find("no bytes in the file"), std::string::npos) << bss.error().message;
  auto none = file->section_bytes(".omniprof_none");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no section named .omniprof_none"), std::string::npos) << none.error().message;
}

TEST(ElfFileTest, DebuglinkNamesDebugFileAndItsCrc) {
  auto stripped = ElfFile::open(fixture("symbols_pie_stripped"));
  ASSERT_TRUE(stripped.ok()) << stripped.error().message;
  auto link = stripped->debuglink();
  ASSERT_TRUE(link.has_value());
  EXPECT_EQ(link->name, "symbols_pie_stripped.debug");
  auto crc = file_crc32(fixture(".debug/symbols_pie_stripped.debug"));
  ASSERT_TRUE(crc.ok()) << crc.error().message;
  EXPECT_EQ(link->crc, *crc);

  auto unstripped = ElfFile::open(fixture("symbols_pie"));
  ASSERT_TRUE(unstripped.ok()) << unstripped.error().message;
  EXPECT_FALSE(unstripped->debuglink().has_value());
}

// --- Malformed input ---------------------------------------------------------

// Byte offset of e_shoff etc. come from <elf.h>'s Elf64_Ehdr: the fixtures
// are native 64-bit ELF files.
template <typename Field>
void patch(std::string& bytes, size_t offset, Field value) {
  ASSERT_LE(offset + sizeof(value), bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(value));
}

// Index and header offset of the section named `name`, read by hand.
std::optional<std::pair<size_t, size_t>> find_section_header(const std::string& bytes, const std::string& name) {
  Elf64_Ehdr ehdr;
  std::memcpy(&ehdr, bytes.data(), sizeof(ehdr));
  auto header = [&](size_t index) {
    Elf64_Shdr shdr;
    std::memcpy(&shdr, bytes.data() + ehdr.e_shoff + index * sizeof(Elf64_Shdr), sizeof(shdr));
    return shdr;
  };
  const Elf64_Shdr names = header(ehdr.e_shstrndx);
  for (size_t index = 0; index < ehdr.e_shnum; ++index) {
    if (bytes.c_str() + names.sh_offset + header(index).sh_name == name) {
      return std::make_pair(index, ehdr.e_shoff + index * sizeof(Elf64_Shdr));
    }
  }
  return std::nullopt;
}

class MalformedElfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = read_file(fixture("libsymbols_fixture.so"));
    ASSERT_GT(original_.size(), sizeof(Elf64_Ehdr));
    if (original_[EI_CLASS] != ELFCLASS64) GTEST_SKIP() << "the byte patching below assumes 64-bit ELF";
  }

  // Writes `bytes` to a fresh file; opening it must fail (or reading its
  // symbols must), with a message naming the file, and nothing may crash.
  void expect_error(const std::string& name, const std::string& bytes, const std::string& message_part = "") {
    SCOPED_TRACE(name);
    const std::string path = dir_.file(name);
    write_file(path, bytes);
    auto file = ElfFile::open(path);
    if (file.ok()) {
      auto symbols = file->symbols();
      ASSERT_FALSE(symbols.ok()) << "malformed file read without error";
      EXPECT_NE(symbols.error().message.find(path), std::string::npos) << symbols.error().message;
      EXPECT_NE(symbols.error().message.find(message_part), std::string::npos) << symbols.error().message;
    } else {
      EXPECT_NE(file.error().message.find(path), std::string::npos) << file.error().message;
      EXPECT_NE(file.error().message.find(message_part), std::string::npos) << file.error().message;
      EXPECT_FALSE(read_build_id(path).ok());
    }
    auto symbol = symbolizer_.symbolize(1, path, 0x1000);
    EXPECT_FALSE(symbol.ok());
  }

  std::string original_;
  TempDir dir_;
  ElfSymbolizer symbolizer_{DebugFileFinder(dir_.path())};
};

TEST_F(MalformedElfTest, TextFile) { expect_error("text.so", "this is not an ELF file\n", "not an ELF file"); }

TEST_F(MalformedElfTest, EmptyFile) { expect_error("empty.so", "", "not an ELF file"); }

TEST_F(MalformedElfTest, TruncatedElfHeader) { expect_error("truncated_header.so", original_.substr(0, 20)); }

TEST_F(MalformedElfTest, OnlyTheElfHeader) {
  expect_error("header_only.so", original_.substr(0, sizeof(Elf64_Ehdr)), "extends past the end of the file");
}

TEST_F(MalformedElfTest, TruncatedAfterFirstPage) {
  expect_error("first_page.so", original_.substr(0, 4096), "extends past the end of the file");
}

TEST_F(MalformedElfTest, SectionHeaderTableOffsetPastEnd) {
  std::string bytes = original_;
  patch<uint64_t>(bytes, offsetof(Elf64_Ehdr, e_shoff), uint64_t{0xffffffff00});
  expect_error("shoff_huge.so", bytes, "section header table at offset 0xffffffff00");
}

TEST_F(MalformedElfTest, SectionHeaderTableOverlappingEnd) {
  std::string bytes = original_;
  patch<uint64_t>(bytes, offsetof(Elf64_Ehdr, e_shoff), uint64_t{bytes.size() - 16});
  expect_error("shoff_end.so", bytes, "section header table");
}

TEST_F(MalformedElfTest, SectionNameTableIndexOutOfRange) {
  std::string bytes = original_;
  patch<uint16_t>(bytes, offsetof(Elf64_Ehdr, e_shstrndx), uint16_t{0xfeff});
  expect_error("shstrndx.so", bytes);
}

TEST_F(MalformedElfTest, WrongSectionHeaderEntrySize) {
  std::string bytes = original_;
  patch<uint16_t>(bytes, offsetof(Elf64_Ehdr, e_shentsize), uint16_t{12});
  expect_error("shentsize.so", bytes, "section header entry size 12");
}

TEST_F(MalformedElfTest, ProgramHeaderTableOutOfRange) {
  std::string bytes = original_;
  patch<uint64_t>(bytes, offsetof(Elf64_Ehdr, e_phoff), uint64_t{bytes.size() - 8});
  expect_error("phoff.so", bytes, "program header table");
}

TEST_F(MalformedElfTest, SymbolTableLinkOutOfRange) {
  std::string bytes = original_;
  auto symtab = find_section_header(bytes, ".symtab");
  ASSERT_TRUE(symtab.has_value());
  patch<uint32_t>(bytes, symtab->second + offsetof(Elf64_Shdr, sh_link), uint32_t{9999});
  expect_error("symtab_link.so", bytes, "section 9999 out of range");
}

TEST_F(MalformedElfTest, SymbolTableLinkedToNonStringSection) {
  std::string bytes = original_;
  auto symtab = find_section_header(bytes, ".symtab");
  auto text = find_section_header(bytes, ".text");
  ASSERT_TRUE(symtab.has_value() && text.has_value());
  patch<uint32_t>(bytes, symtab->second + offsetof(Elf64_Shdr, sh_link), static_cast<uint32_t>(text->first));
  expect_error("symtab_link_text.so", bytes, "is not a string table");
}

TEST_F(MalformedElfTest, SymbolTableContentsPastEnd) {
  std::string bytes = original_;
  auto symtab = find_section_header(bytes, ".symtab");
  ASSERT_TRUE(symtab.has_value());
  patch<uint64_t>(bytes, symtab->second + offsetof(Elf64_Shdr, sh_offset), uint64_t{bytes.size() + 4096});
  expect_error("symtab_offset.so", bytes, "cannot read symbols");
}

TEST_F(MalformedElfTest, CompressedFlagOnPlainSymbolTable) {
  std::string bytes = original_;
  auto symtab = find_section_header(bytes, ".symtab");
  ASSERT_TRUE(symtab.has_value());
  Elf64_Shdr shdr;
  std::memcpy(&shdr, bytes.data() + symtab->second, sizeof(shdr));
  patch<uint64_t>(bytes, symtab->second + offsetof(Elf64_Shdr, sh_flags), shdr.sh_flags | SHF_COMPRESSED);
  expect_error("symtab_flagged_compressed.so", bytes, "cannot read symbols");
}

TEST_F(MalformedElfTest, NotARegularFile) {
  auto directory = ElfFile::open(dir_.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("not a regular file"), std::string::npos);
  auto missing = ElfFile::open(dir_.path() + "/missing.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(dir_.path() + "/missing.so"), std::string::npos);
  auto symbol = symbolizer_.symbolize(1, dir_.path() + "/missing.so", 0x1000);
  ASSERT_FALSE(symbol.ok());
  EXPECT_NE(symbol.error().message.find("missing.so"), std::string::npos);
}

// Random corruption of headers and tables: every call must return, with a
// value or an error. Fixed seed, so a failure reproduces; set
// OMNIPROF_FUZZ_ITERATIONS for a longer run (e.g. under ASan).
TEST_F(MalformedElfTest, RandomCorruptionNeverCrashes) {
  Elf64_Ehdr ehdr;
  std::memcpy(&ehdr, original_.data(), sizeof(ehdr));
  std::mt19937_64 random(20240611);
  const int iterations = std::getenv("OMNIPROF_FUZZ_ITERATIONS") ? std::atoi(std::getenv("OMNIPROF_FUZZ_ITERATIONS")) : 300;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    std::string bytes = original_;
    const int mutations = 1 + static_cast<int>(random() % 8);
    for (int m = 0; m < mutations; ++m) {
      size_t position = 0;
      switch (random() % 3) {
        case 0:  // ELF and program headers
          position = random() % (ehdr.e_phoff + ehdr.e_phnum * sizeof(Elf64_Phdr));
          break;
        case 1:  // section header table
          position = ehdr.e_shoff + random() % (ehdr.e_shnum * sizeof(Elf64_Shdr));
          break;
        default:  // anywhere, including symbol and string tables
          position = random() % bytes.size();
      }
      bytes[position] = static_cast<char>(random());
    }
    if (random() % 10 == 0) bytes.resize(random() % bytes.size());
    // A distinct file each time: the symbolizer caches by inode and mtime.
    const std::string path = dir_.file("mutated_" + std::to_string(iteration) + ".so");
    write_file(path, bytes);

    auto file = ElfFile::open(path);
    if (file.ok()) {
      (void)file->build_id();
      (void)file->debuglink();
      (void)file->has_symtab();
      (void)file->file_offset_to_vaddr(0x1000);
      auto symbols = file->symbols(SymbolKinds::kFunctionsAndObjects);
      if (!symbols.ok()) {
        EXPECT_FALSE(symbols.error().message.empty());
      }
    } else {
      EXPECT_FALSE(file.error().message.empty());
    }
    const uint64_t file_id = static_cast<uint64_t>(iteration) + 1;
    (void)symbolizer_.symbolize(file_id, path, 0x1120);
    (void)symbolizer_.runtime_to_elf_vaddr(file_id, path, 0x7f0000001120, 0x7f0000001000, 0x1000);
    (void)symbolizer_.find_symbol(path, "omniprof_fixture_lib_add");
  }
}

// --- Compressed sections -----------------------------------------------------

// Compresses the named sections of the ELF file at `path` in place with
// elfutils' eu-elfcompress, which keeps the loadable sections where they are.
::testing::AssertionResult compress_sections(const std::string& path, const std::set<std::string>& names) {
  std::string command = "eu-elfcompress -q --force -t zlib";
  for (const std::string& name : names) command += " -n '" + name + "'";
  command += " '" + path + "' 2>&1";
  const std::string output = run_command(command + "; echo \"exit $?\"");
  if (output.find("exit 0") == std::string::npos) return ::testing::AssertionFailure() << command << ": " << output;
  return ::testing::AssertionSuccess();
}

bool section_is_compressed(const std::string& path, const std::string& name) {
  const std::string sections = run_command("readelf -SW '" + path + "'");
  std::istringstream lines(sections);
  std::string line;
  while (std::getline(lines, line)) {
    // "  [NN] .symtab  SYMTAB  addr off size es Flg Lk Inf Al": 'C' in Flg.
    std::istringstream fields(line.substr(std::min(line.find(']') + 1, line.size())));
    std::vector<std::string> parts{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    if (parts.size() >= 10 && parts[0] == name) return parts[6].find('C') != std::string::npos;
  }
  return false;
}

TEST(CompressedSectionsTest, CompressedSymbolTableIsRead) {
  TempDir dir;
  const std::string path = dir.file("symbols_nopie_compressed");
  fs::copy_file(fixture("symbols_nopie"), path);
  ASSERT_TRUE(compress_sections(path, {".symtab", ".strtab"}));
  ASSERT_TRUE(section_is_compressed(path, ".symtab")) << run_command("readelf -SW '" + path + "'");
  ASSERT_TRUE(section_is_compressed(path, ".strtab"));

  auto original = ElfFile::open(fixture("symbols_nopie"));
  ASSERT_TRUE(original.ok()) << original.error().message;
  auto compressed = ElfFile::open(path);
  ASSERT_TRUE(compressed.ok()) << compressed.error().message;
  EXPECT_TRUE(compressed->has_symtab());
  auto original_symbols = original->symbols();
  auto compressed_symbols = compressed->symbols();
  ASSERT_TRUE(original_symbols.ok()) << original_symbols.error().message;
  ASSERT_TRUE(compressed_symbols.ok()) << compressed_symbols.error().message;
  auto as_set = [](const std::vector<ElfSymbol>& symbols) {
    std::set<std::tuple<std::string, uint64_t, uint64_t>> set;
    for (const ElfSymbol& s : symbols) set.emplace(s.name, s.value, s.size);
    return set;
  };
  EXPECT_EQ(as_set(*compressed_symbols), as_set(*original_symbols));

  ElfSymbolizer symbolizer;
  const auto nm = nm_symbols(fixture("symbols_nopie"));
  auto symbol = symbolize_or_fail(symbolizer, 1, path, nm.at("omniprof_fixture_alpha").address + 1);
  ASSERT_TRUE(symbol.has_value());
  EXPECT_EQ(symbol->name, "omniprof_fixture_alpha");
}

// Overwrites ch_size in the compression header of section `name` (an
// Elf64_Chdr: ch_type, ch_reserved, then ch_size) with `declared`.
::testing::AssertionResult patch_compressed_size(const std::string& path, const std::string& name, uint64_t declared,
                                                 uint64_t* compressed_size) {
  uint64_t offset = 0;
  {
    auto elf = ElfFile::open(path);
    if (!elf) return ::testing::AssertionFailure() << elf.error().message;
    for (const ElfSection& section : elf->sections()) {
      if (section.name == name && (section.flags & SHF_COMPRESSED) != 0) {
        offset = section.offset;
        *compressed_size = section.size;
      }
    }
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ::testing::AssertionFailure() << "open " << path;
  const bool written = offset != 0 && ::pwrite(fd, &declared, sizeof(declared), static_cast<off_t>(offset + 8)) == 8;
  ::close(fd);
  if (!written) return ::testing::AssertionFailure() << "no compressed " << name << " in " << path;
  return ::testing::AssertionSuccess();
}

// A compressed section whose header lies about its size is refused before
// anything is inflated, by an error naming the file and the section; the
// file's other parts (segments, build ID) stay usable.
TEST(CompressedSectionsTest, LyingUncompressedSizeIsRefusedBeforeInflating) {
  for (const bool over_cap : {false, true}) {
    TempDir dir;
    const std::string path = dir.file(over_cap ? "over_cap" : "over_ratio");
    fs::copy_file(fixture("symbols_nopie"), path);
    ASSERT_TRUE(compress_sections(path, {".symtab"}));
    uint64_t compressed_size = 0;
    // 2 MiB from a few KiB is far more than 64x; 4 GiB is past the cap.
    const uint64_t declared = over_cap ? uint64_t{4} << 30 : uint64_t{2} << 20;
    ASSERT_TRUE(patch_compressed_size(path, ".symtab", declared, &compressed_size));
    ASSERT_LT(compressed_size * kMaxInflationRatio, declared);

    auto file = ElfFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto symbols = file->symbols();
    ASSERT_FALSE(symbols.ok()) << "inflated a section declaring " << declared << " bytes";
    EXPECT_NE(symbols.error().message.find(path), std::string::npos) << symbols.error().message;
    EXPECT_NE(symbols.error().message.find(".symtab"), std::string::npos) << symbols.error().message;
    EXPECT_NE(symbols.error().message.find(std::to_string(declared)), std::string::npos) << symbols.error().message;
    EXPECT_FALSE(file->load_segments().empty());

    ElfSymbolizer symbolizer;
    auto symbol = symbolizer.symbolize(1, path, 0x401000);
    ASSERT_FALSE(symbol.ok());
    EXPECT_NE(symbol.error().message.find(".symtab"), std::string::npos) << symbol.error().message;
  }
}

// --- Symbolization -----------------------------------------------------------

class ElfSymbolizerExecutableTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ElfSymbolizerExecutableTest, NamesKnownFunctionsAtStartMiddleAndEnd) {
  const std::string path = fixture(GetParam());
  const auto nm = nm_symbols(path);
  ElfSymbolizer symbolizer;
  for (const auto& [raw_name, display_name] : known_executable_functions()) {
    SCOPED_TRACE(raw_name);
    ASSERT_TRUE(nm.count(raw_name));
    const NmSymbol& expected = nm.at(raw_name);
    ASSERT_GT(expected.size, 1u);
    for (uint64_t offset : {uint64_t{0}, expected.size / 2, expected.size - 1}) {
      auto symbol = symbolize_or_fail(symbolizer, 1, path, expected.address + offset);
      ASSERT_TRUE(symbol.has_value()) << "offset " << offset;
      EXPECT_EQ(symbol->name, display_name);
      EXPECT_EQ(symbol->system_name, raw_name);
      EXPECT_EQ(symbol->start, expected.address);
      EXPECT_EQ(symbol->size, expected.size);
    }
  }
}

TEST_P(ElfSymbolizerExecutableTest, PrefersGlobalAliasDeterministically) {
  const std::string path = fixture(GetParam());
  const auto nm = nm_symbols(path);
  // local, weak and global names for one address (see known_c_functions.c).
  ASSERT_EQ(nm.at("omniprof_fixture_local_alias").address, nm.at("omniprof_fixture_global_alias").address);
  ASSERT_EQ(nm.at("omniprof_fixture_weak_alias").address, nm.at("omniprof_fixture_global_alias").address);
  ElfSymbolizer symbolizer;
  for (uint64_t offset : {0, 5, 15}) {
    auto symbol = symbolize_or_fail(symbolizer, 1, path, nm.at("omniprof_fixture_global_alias").address + offset);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_EQ(symbol->name, "omniprof_fixture_global_alias");
  }
}

TEST_P(ElfSymbolizerExecutableTest, SizedSymbolDoesNotCoverTheGapAfterIt) {
  const std::string path = fixture(GetParam());
  const auto nm = nm_symbols(path);
  const NmSymbol sized = nm.at("omniprof_fixture_sized_with_gap");
  const NmSymbol next = nm.at("omniprof_fixture_unsized");
  ASSERT_EQ(sized.size, 8u);
  ASSERT_EQ(next.address - sized.address, 32u);  // 8 bytes of function, 24 of nothing
  ElfSymbolizer symbolizer;

  auto inside = symbolize_or_fail(symbolizer, 1, path, sized.address + 7);
  ASSERT_TRUE(inside.has_value());
  EXPECT_EQ(inside->name, "omniprof_fixture_sized_with_gap");
  for (uint64_t gap_offset : {8, 20, 31}) {
    auto in_gap = symbolizer.symbolize(1, path, sized.address + gap_offset);
    ASSERT_TRUE(in_gap.ok()) << in_gap.error().message;
    EXPECT_FALSE(in_gap->has_value()) << "gap offset " << gap_offset << " named " << (*in_gap)->name;
  }
}

TEST_P(ElfSymbolizerExecutableTest, UnsizedSymbolExtendsToTheNextSymbol) {
  const std::string path = fixture(GetParam());
  const auto nm = nm_symbols(path);
  const NmSymbol unsized = nm.at("omniprof_fixture_unsized");
  const NmSymbol next = nm.at("omniprof_fixture_after_unsized");
  ASSERT_EQ(unsized.size, 0u);
  ASSERT_EQ(next.address - unsized.address, 40u);
  ElfSymbolizer symbolizer;

  for (uint64_t offset : {0, 20, 39}) {
    auto symbol = symbolize_or_fail(symbolizer, 1, path, unsized.address + offset);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_EQ(symbol->name, "omniprof_fixture_unsized");
    EXPECT_EQ(symbol->size, 0u);
  }
  auto after = symbolize_or_fail(symbolizer, 1, path, next.address);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->name, "omniprof_fixture_after_unsized");
}

TEST_P(ElfSymbolizerExecutableTest, AddressesOutsideAnyFunctionHaveNoSymbol) {
  const std::string path = fixture(GetParam());
  ElfSymbolizer symbolizer;
  for (uint64_t address : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, uint64_t{1} << 40}) {
    auto symbol = symbolizer.symbolize(1, path, address);
    ASSERT_TRUE(symbol.ok()) << symbol.error().message;
    EXPECT_FALSE(symbol->has_value()) << std::hex << address << " named " << (*symbol)->name;
  }
}

TEST_P(ElfSymbolizerExecutableTest, FindsSymbolsByName) {
  const std::string path = fixture(GetParam());
  const auto nm = nm_symbols(path);
  ElfSymbolizer symbolizer;
  for (const std::string name : {"omniprof_fixture_alpha", "_ZN16omniprof_fixture5scaleEi",
                                 "omniprof_fixture_static_helper", "omniprof_fixture_counter"}) {
    SCOPED_TRACE(name);
    auto found = symbolizer.find_symbol(path, name);
    ASSERT_TRUE(found.ok()) << found.error().message;
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->first, nm.at(name).address);
    EXPECT_EQ((*found)->second, nm.at(name).size);
  }
  auto missing = symbolizer.find_symbol(path, "omniprof_fixture_no_such_symbol");
  ASSERT_TRUE(missing.ok()) << missing.error().message;
  EXPECT_FALSE(missing->has_value());
}

INSTANTIATE_TEST_SUITE_P(PieAndNonPie, ElfSymbolizerExecutableTest,
                         ::testing::Values("symbols_pie", "symbols_nopie"));

TEST(ElfSymbolizerTest, NamesLibraryFunctions) {
  const std::string path = fixture("libsymbols_fixture.so");
  const auto nm = nm_symbols(path);
  ElfSymbolizer symbolizer;
  for (const std::string name : {"omniprof_fixture_lib_add", "omniprof_fixture_lib_mul", "omniprof_fixture_lib_hidden"}) {
    SCOPED_TRACE(name);
    const NmSymbol expected = nm.at(name);
    auto symbol = symbolize_or_fail(symbolizer, 1, path, expected.address + expected.size / 2);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_EQ(symbol->name, name);
    EXPECT_EQ(symbol->start, expected.address);
  }
}

// --- Separate debug files ----------------------------------------------------

TEST(DebugFileTest, DebuglinkDebugFileSuppliesSymbolsOfStrippedBinary) {
  const auto nm = nm_symbols(fixture("symbols_pie"));  // same addresses as the stripped copy
  const std::string stripped = fixture("symbols_pie_stripped");
  ASSERT_EQ(nm_symbols(stripped).count("omniprof_fixture_alpha"), 0u) << "the stripped copy must lack .symtab";

  IsolatedSymbolizer isolated;
  for (const auto& [raw_name, display_name] : known_executable_functions()) {
    SCOPED_TRACE(raw_name);
    auto symbol = symbolize_or_fail(isolated.symbolizer, 1, stripped, nm.at(raw_name).address + 1);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_EQ(symbol->name, display_name);
  }
  auto debug_file = isolated.symbolizer.debug_file(stripped);
  ASSERT_TRUE(debug_file.ok()) << debug_file.error().message;
  EXPECT_EQ(*debug_file, fixture(".debug/symbols_pie_stripped.debug"));
}

TEST(DebugFileTest, FinderSearchesEveryDebuglinkLocation) {
  TempDir dir;
  const DebugFileFinder finder(dir.path() + "/debug_root");
  const std::string debug_name = "symbols_pie_stripped.debug";

  // <dir>/<name>
  const std::string beside = dir.file("beside/symbols_pie_stripped");
  fs::copy_file(fixture("symbols_pie_stripped"), beside);
  fs::copy_file(fixture(".debug/" + debug_name), dir.file("beside/" + debug_name));
  auto elf = ElfFile::open(beside);
  ASSERT_TRUE(elf.ok()) << elf.error().message;
  EXPECT_EQ(finder.find(*elf, beside), dir.path() + "/beside/" + debug_name);

  // <dir>/.debug/<name>
  const std::string dot_debug = dir.file("dot_debug/symbols_pie_stripped");
  fs::copy_file(fixture("symbols_pie_stripped"), dot_debug);
  fs::copy_file(fixture(".debug/" + debug_name), dir.file("dot_debug/.debug/" + debug_name));
  EXPECT_EQ(finder.find(*elf, dot_debug), dir.path() + "/dot_debug/.debug/" + debug_name);

  // <debug_root>/<dir>/<name>
  const std::string global = dir.file("global/symbols_pie_stripped");
  fs::copy_file(fixture("symbols_pie_stripped"), global);
  const std::string global_debug = dir.file("debug_root" + dir.path() + "/global/" + debug_name);
  fs::copy_file(fixture(".debug/" + debug_name), global_debug);
  EXPECT_EQ(finder.find(*elf, global), global_debug);

  // A candidate whose CRC does not match is not the debug file.
  const std::string mismatched = dir.file("mismatched/symbols_pie_stripped");
  fs::copy_file(fixture("symbols_pie_stripped"), mismatched);
  std::string corrupted = read_file(fixture(".debug/" + debug_name));
  corrupted[corrupted.size() / 2] ^= 0x5a;
  write_file(dir.file("mismatched/" + debug_name), corrupted);
  EXPECT_EQ(finder.find(*elf, mismatched), std::nullopt);

  // Nowhere to be found: the stripped binary keeps only .dynsym.
  const std::string alone = dir.file("alone/symbols_pie_stripped");
  fs::copy_file(fixture("symbols_pie_stripped"), alone);
  EXPECT_EQ(finder.find(*elf, alone), std::nullopt);
  ElfSymbolizer symbolizer{finder};
  const auto nm = nm_symbols(fixture("symbols_pie"));
  auto symbol = symbolizer.symbolize(1, alone, nm.at("omniprof_fixture_alpha").address, {alone});
  ASSERT_TRUE(symbol.ok()) << symbol.error().message;
  EXPECT_FALSE(symbol->has_value());
  auto debug_file = symbolizer.debug_file(alone);
  ASSERT_TRUE(debug_file.ok());
  EXPECT_EQ(*debug_file, std::nullopt);
  auto found = symbolizer.symbolize(2, mismatched, nm.at("omniprof_fixture_alpha").address, {mismatched});
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_FALSE(found->has_value()) << "used a debug file with the wrong CRC";
}

TEST(DebugFileTest, BuildIdDebugFileSuppliesSymbolsOfStrippedLibrary) {
  const std::string stripped = fixture("libsymbols_fixture_stripped.so");
  const std::string build_id = readelf_build_id(stripped);
  ASSERT_GE(build_id.size(), 4u);
  const std::string expected_debug_file =
      fixture("debug_root/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug");
  const auto nm = nm_symbols(fixture("libsymbols_fixture.so"));

  const DebugFileFinder finder(fixture("debug_root"));
  auto elf = ElfFile::open(stripped);
  ASSERT_TRUE(elf.ok()) << elf.error().message;
  EXPECT_FALSE(elf->debuglink().has_value());
  EXPECT_EQ(finder.find(*elf, stripped), expected_debug_file);

  ElfSymbolizer symbolizer{finder};
  for (const std::string name : {"omniprof_fixture_lib_add", "omniprof_fixture_lib_mul", "omniprof_fixture_lib_hidden"}) {
    SCOPED_TRACE(name);
    auto symbol = symbolize_or_fail(symbolizer, 1, stripped, nm.at(name).address + 2);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_EQ(symbol->name, name);
  }
  auto debug_file = symbolizer.debug_file(stripped);
  ASSERT_TRUE(debug_file.ok());
  EXPECT_EQ(*debug_file, expected_debug_file);

  // Without the debug file only the exported functions (.dynsym) are known.
  IsolatedSymbolizer isolated;
  auto exported = symbolize_or_fail(isolated.symbolizer, 1, stripped, nm.at("omniprof_fixture_lib_add").address + 2);
  ASSERT_TRUE(exported.has_value());
  EXPECT_EQ(exported->name, "omniprof_fixture_lib_add");
  auto hidden =
      isolated.symbolizer.symbolize(1, stripped, nm.at("omniprof_fixture_lib_hidden").address + 2, {stripped});
  ASSERT_TRUE(hidden.ok()) << hidden.error().message;
  EXPECT_FALSE(hidden->has_value());
}

TEST(DebugFileTest, RootPrefixLocatesFilesOfAnotherMountNamespace) {
  // A fake container root: /opt/app holds a stripped binary with its
  // .debug/ directory, /usr/lib/debug/.build-id the library's debug file.
  TempDir root;
  fs::copy_file(fixture("symbols_pie_stripped"), root.file("opt/app/symbols_pie_stripped"));
  fs::copy_file(fixture(".debug/symbols_pie_stripped.debug"),
                root.file("opt/app/.debug/symbols_pie_stripped.debug"));
  fs::copy_file(fixture("libsymbols_fixture_stripped.so"), root.file("lib/libsymbols_fixture_stripped.so"));
  const std::string build_id = readelf_build_id(fixture("libsymbols_fixture_stripped.so"));
  const std::string build_id_path = "usr/lib/debug/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug";
  fs::copy_file(fixture("debug_root/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug"),
                root.file(build_id_path));

  ElfSymbolizer symbolizer{DebugFileFinder("/usr/lib/debug")};
  const auto pie_nm = nm_symbols(fixture("symbols_pie"));
  auto alpha = symbolize_or_fail(symbolizer, 1, "/opt/app/symbols_pie_stripped",
                                 pie_nm.at("omniprof_fixture_alpha").address + 3, root.path());
  ASSERT_TRUE(alpha.has_value());
  EXPECT_EQ(alpha->name, "omniprof_fixture_alpha");
  auto debuglink_file = symbolizer.debug_file("/opt/app/symbols_pie_stripped", root.path());
  ASSERT_TRUE(debuglink_file.ok());
  EXPECT_EQ(*debuglink_file, root.path() + "/opt/app/.debug/symbols_pie_stripped.debug");

  const auto lib_nm = nm_symbols(fixture("libsymbols_fixture.so"));
  auto hidden = symbolize_or_fail(symbolizer, 2, "/lib/libsymbols_fixture_stripped.so",
                                  lib_nm.at("omniprof_fixture_lib_hidden").address, root.path());
  ASSERT_TRUE(hidden.has_value());
  EXPECT_EQ(hidden->name, "omniprof_fixture_lib_hidden");
  auto build_id_file = symbolizer.debug_file("/lib/libsymbols_fixture_stripped.so", root.path());
  ASSERT_TRUE(build_id_file.ok());
  EXPECT_EQ(*build_id_file, root.path() + "/" + build_id_path);
}

// A file read through a descriptor (/proc/self/fd/N, what the host keeps
// for a mapped file) has no name to find its debug file by: the FileID API
// takes the name the process sees and its root for that.
TEST(DebugFileTest, FileReadThroughADescriptorFindsItsDebugFileByTheProcessName) {
  TempDir root;
  fs::copy_file(fixture("symbols_pie_stripped"), root.file("opt/app/symbols_pie_stripped"));
  fs::copy_file(fixture(".debug/symbols_pie_stripped.debug"),
                root.file("opt/app/.debug/symbols_pie_stripped.debug"));
  const int fd = ::open(root.file("opt/app/symbols_pie_stripped").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::string through_fd = "/proc/self/fd/" + std::to_string(fd);
  const uint64_t alpha = nm_symbols(fixture("symbols_pie")).at("omniprof_fixture_alpha").address + 3;

  ElfSymbolizer with_name{DebugFileFinder("/usr/lib/debug")};
  auto named = with_name.symbolize(11, through_fd, alpha, {"/opt/app/symbols_pie_stripped", root.path()});
  ASSERT_TRUE(named.ok()) << named.error().message;
  ASSERT_TRUE(named->has_value());
  EXPECT_EQ((*named)->name, "omniprof_fixture_alpha");

  ElfSymbolizer without_name{DebugFileFinder("/usr/lib/debug")};
  auto unnamed = without_name.symbolize(11, through_fd, alpha);
  ASSERT_TRUE(unnamed.ok()) << unnamed.error().message;
  EXPECT_FALSE(unnamed->has_value() && (*unnamed)->name == "omniprof_fixture_alpha")
      << "the debug file was found without the name: the test proves nothing";
  ::close(fd);
}

TEST(DebugFileTest, ProcRootPathsAreSplitIntoPrefixAndPath) {
  // Callers of the by-path lookups may pass /proc/PID/root/<path> as one
  // host path; the debug file must still be looked up relative to <path>
  // inside that root. This process's own root is "/", which makes the
  // lookup checkable here.
  TempDir dir;
  const std::string binary = dir.file("app/symbols_pie_stripped");
  fs::copy_file(fixture("symbols_pie_stripped"), binary);
  const std::string global_debug = dir.file("debug_root" + dir.path() + "/app/symbols_pie_stripped.debug");
  fs::copy_file(fixture(".debug/symbols_pie_stripped.debug"), global_debug);
  const std::string proc_root = "/proc/" + std::to_string(::getpid()) + "/root";

  ElfSymbolizer symbolizer{DebugFileFinder(dir.path() + "/debug_root")};
  const auto nm = nm_symbols(fixture("symbols_pie"));
  auto beta = symbolizer.find_symbol(proc_root + binary, "omniprof_fixture_beta");  // .symtab only
  ASSERT_TRUE(beta.ok()) << beta.error().message;
  ASSERT_TRUE(beta->has_value());
  EXPECT_EQ((*beta)->first, nm.at("omniprof_fixture_beta").address);
  auto debug_file = symbolizer.debug_file(proc_root + binary);
  ASSERT_TRUE(debug_file.ok()) << debug_file.error().message;
  EXPECT_EQ(*debug_file, proc_root + global_debug);
}

// --- Runtime addresses -------------------------------------------------------

struct ResolvedAddress {
  std::string path;
  uint64_t elf_vaddr = 0;
};

// What a profiler does with a sampled address: find its mapping in
// /proc/PID/maps, then convert to the ELF file's own address. `file_id`:
// the file the address is expected in (cached under that id).
ResolvedAddress resolve_runtime_address(ElfSymbolizer& symbolizer, uint64_t file_id, int pid,
                                        uint64_t runtime_address) {
  auto mappings = read_proc_maps(pid);
  EXPECT_TRUE(mappings.ok()) << mappings.error().message;
  if (!mappings.ok()) return {};
  const ProcMapping* mapping = find_mapping(*mappings, runtime_address);
  EXPECT_NE(mapping, nullptr) << std::hex << runtime_address;
  if (mapping == nullptr) return {};
  EXPECT_TRUE(mapping->is_file_backed()) << mapping->path;
  auto vaddr =
      symbolizer.runtime_to_elf_vaddr(file_id, mapping->path, runtime_address, mapping->start, mapping->offset);
  EXPECT_TRUE(vaddr.ok()) << vaddr.error().message;
  if (!vaddr.ok()) return {};
  return ResolvedAddress{mapping->path, *vaddr};
}

TEST(RuntimeAddressTest, DlopenedSharedLibrary) {
  const std::string path = fixture("libsymbols_fixture.so");
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  const auto nm = nm_symbols(path);
  ElfSymbolizer symbolizer;

  for (const std::string name : {"omniprof_fixture_lib_add", "omniprof_fixture_lib_mul"}) {
    SCOPED_TRACE(name);
    void* function = ::dlsym(handle, name.c_str());
    ASSERT_NE(function, nullptr) << ::dlerror();
    for (uint64_t offset : {0, 3}) {
      const ResolvedAddress resolved =
          resolve_runtime_address(symbolizer, 1, ::getpid(), reinterpret_cast<uint64_t>(function) + offset);
      EXPECT_EQ(fs::canonical(resolved.path), fs::canonical(path));
      EXPECT_EQ(resolved.elf_vaddr, nm.at(name).address + offset);
      auto symbol = symbolize_or_fail(symbolizer, 1, resolved.path, resolved.elf_vaddr);
      ASSERT_TRUE(symbol.has_value());
      EXPECT_EQ(symbol->name, name);
    }
  }

  // A data address: the RW segment's vaddr and file offset differ, and RELRO
  // splits its mapping, so this checks that the right segment is used.
  void* state = ::dlsym(handle, "omniprof_fixture_lib_state");
  ASSERT_NE(state, nullptr) << ::dlerror();
  const ResolvedAddress resolved =
      resolve_runtime_address(symbolizer, 1, ::getpid(), reinterpret_cast<uint64_t>(state));
  EXPECT_EQ(resolved.elf_vaddr, nm.at("omniprof_fixture_lib_state").address);
  ::dlclose(handle);
}

TEST(RuntimeAddressTest, ThisPieTestBinary) {
  const uint64_t runtime_address = reinterpret_cast<uint64_t>(&omniprof_symbolizer_test_marker);
  ElfSymbolizer symbolizer;
  const ResolvedAddress resolved = resolve_runtime_address(symbolizer, 1, ::getpid(), runtime_address + 1);
  ASSERT_FALSE(resolved.path.empty());
  EXPECT_EQ(fs::canonical(resolved.path), fs::canonical("/proc/self/exe"));
  auto elf = ElfFile::open(resolved.path);
  ASSERT_TRUE(elf.ok()) << elf.error().message;
  if (elf->elf_type() == ET_DYN) {
    EXPECT_NE(resolved.elf_vaddr, runtime_address + 1) << "a PIE is loaded with a nonzero bias";
  }
  auto symbol = symbolize_or_fail(symbolizer, 1, resolved.path, resolved.elf_vaddr);
  ASSERT_TRUE(symbol.has_value());
  EXPECT_EQ(symbol->name, "omniprof_symbolizer_test_marker");
  EXPECT_EQ(symbol->start + 1, resolved.elf_vaddr);
}

// Runs a fixture executable that prints the runtime addresses of its
// functions and waits for stdin to close.
class FixtureProcess {
 public:
  explicit FixtureProcess(const std::string& path) {
    int to_child[2];
    int from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to_child[0], STDIN_FILENO);
      ::dup2(from_child[1], STDOUT_FILENO);
      ::execl(path.c_str(), path.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    stdin_ = to_child[1];
    stdout_ = ::fdopen(from_child[0], "r");
  }
  ~FixtureProcess() {
    if (stdin_ >= 0) ::close(stdin_);  // the child exits on EOF
    if (stdout_ != nullptr) std::fclose(stdout_);
    if (pid_ > 0) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  FixtureProcess(const FixtureProcess&) = delete;
  FixtureProcess& operator=(const FixtureProcess&) = delete;

  int pid() const { return pid_; }

  // name -> runtime address, read up to the "ready" line.
  std::map<std::string, uint64_t> read_addresses() {
    std::map<std::string, uint64_t> addresses;
    char line[512];
    while (stdout_ != nullptr && std::fgets(line, sizeof(line), stdout_) != nullptr) {
      std::string text(line);
      if (text == "ready\n") break;
      const size_t tab = text.find('\t');
      if (tab == std::string::npos) continue;
      addresses[text.substr(0, tab)] = std::stoull(text.substr(tab + 1), nullptr, 16);
    }
    return addresses;
  }

 private:
  int pid_ = -1;
  int stdin_ = -1;
  FILE* stdout_ = nullptr;
};

class RunningFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RunningFixtureTest, SymbolizesAddressesOfALiveProcess) {
  const std::string path = fixture(GetParam());
  const auto nm = nm_symbols(path);
  FixtureProcess process(path);
  ASSERT_GT(process.pid(), 0);
  const auto addresses = process.read_addresses();
  ASSERT_EQ(addresses.size(), 5u);
  auto elf = ElfFile::open(path);
  ASSERT_TRUE(elf.ok()) << elf.error().message;

  ElfSymbolizer symbolizer;
  for (const auto& [name, runtime_address] : addresses) {
    SCOPED_TRACE(name);
    const ResolvedAddress resolved = resolve_runtime_address(symbolizer, 1, process.pid(), runtime_address + 2);
    EXPECT_EQ(fs::canonical(resolved.path), fs::canonical(path));
    if (elf->elf_type() == ET_EXEC) {
      EXPECT_EQ(resolved.elf_vaddr, runtime_address + 2) << "non-PIE: no bias";
    }
    auto symbol = symbolize_or_fail(symbolizer, 1, resolved.path, resolved.elf_vaddr);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_EQ(symbol->name, name);
    EXPECT_EQ(symbol->start + 2, resolved.elf_vaddr);
    ASSERT_TRUE(nm.count(symbol->system_name));
    EXPECT_EQ(symbol->start, nm.at(symbol->system_name).address);
  }
}

INSTANTIATE_TEST_SUITE_P(PieAndNonPie, RunningFixtureTest, ::testing::Values("symbols_pie", "symbols_nopie"));

TEST(RuntimeAddressTest, RejectsOffsetsOutsideTheFile) {
  ElfSymbolizer symbolizer;
  const std::string path = fixture("libsymbols_fixture.so");
  auto beyond = symbolizer.runtime_to_elf_vaddr(1, path, 0x7f0000001000, 0x7f0000000000, uint64_t{1} << 40);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.error().message.find("no PT_LOAD segment contains file offset"), std::string::npos);
  auto below = symbolizer.runtime_to_elf_vaddr(1, path, 0x1000, 0x2000, 0);
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.error().message.find(path), std::string::npos);
}

// --- Cache -------------------------------------------------------------------

TEST(ElfSymbolizerCacheTest, ReadsEachFileOnceWhateverItsPath) {
  TempDir dir;
  const std::string link = dir.file("link_to_pie");
  fs::create_symlink(fixture("symbols_pie"), link);
  const auto nm = nm_symbols(fixture("symbols_pie"));
  const uint64_t alpha = nm.at("omniprof_fixture_alpha").address;
  auto finds_alpha = [&](ElfSymbolizer& symbolizer, const std::string& path) {
    auto found = symbolizer.find_symbol(path, "omniprof_fixture_alpha");
    return found.ok() && found->has_value() && (*found)->first == alpha;
  };

  // By path: cached under the file's stat() identity.
  ElfSymbolizer symbolizer;
  EXPECT_EQ(symbolizer.cached_file_count(), 0u);
  ASSERT_TRUE(finds_alpha(symbolizer, fixture("symbols_pie")));
  ASSERT_TRUE(finds_alpha(symbolizer, link));
  ASSERT_TRUE(symbolizer.debug_file(link).ok());
  EXPECT_EQ(symbolizer.cached_file_count(), 1u);

  // A copy is another file (another inode).
  const std::string copy = dir.file("copy_of_pie");
  fs::copy_file(fixture("symbols_pie"), copy);
  ASSERT_TRUE(finds_alpha(symbolizer, copy));
  EXPECT_EQ(symbolizer.cached_file_count(), 2u);

  // Files that failed to load are cached too, and keep failing.
  const std::string junk = dir.file("junk.so");
  write_file(junk, "junk");
  EXPECT_FALSE(symbolizer.find_symbol(junk, "omniprof_fixture_alpha").ok());
  EXPECT_FALSE(symbolizer.find_symbol(junk, "omniprof_fixture_alpha").ok());
  EXPECT_EQ(symbolizer.cached_file_count(), 3u);

  // By FileID: one entry per id, whatever path reads it; a file that cannot
  // be read is not cached under its id.
  ElfSymbolizer by_id;
  ASSERT_TRUE(symbolize_or_fail(by_id, 1, fixture("symbols_pie"), alpha).has_value());
  ASSERT_TRUE(symbolize_or_fail(by_id, 1, link, alpha).has_value());
  ASSERT_TRUE(by_id.runtime_to_elf_vaddr(1, copy, 0x1000, 0x1000, 0).ok());
  EXPECT_EQ(by_id.cached_file_count(), 1u);
  EXPECT_FALSE(by_id.symbolize(2, junk, 0).ok());
  EXPECT_FALSE(by_id.symbolize(2, junk, 0).ok());
  EXPECT_EQ(by_id.cached_file_count(), 1u);
}

TEST(ElfSymbolizerCacheTest, EvictsLeastRecentlyUsedBeyondCapacity) {
  ElfSymbolizer symbolizer(DebugFileFinder(), 2);
  const auto pie = nm_symbols(fixture("symbols_pie"));
  const auto nopie = nm_symbols(fixture("symbols_nopie"));
  ASSERT_TRUE(symbolize_or_fail(symbolizer, 1, fixture("symbols_pie"), pie.at("omniprof_fixture_alpha").address));
  ASSERT_TRUE(symbolize_or_fail(symbolizer, 2, fixture("symbols_nopie"), nopie.at("omniprof_fixture_alpha").address));
  ASSERT_TRUE(symbolizer.build_id(3, fixture("libsymbols_fixture.so")).ok());
  EXPECT_EQ(symbolizer.cached_file_count(), 2u);
  // Evicted entries are simply loaded again.
  auto again = symbolize_or_fail(symbolizer, 1, fixture("symbols_pie"), pie.at("omniprof_fixture_alpha").address);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->name, "omniprof_fixture_alpha");
  EXPECT_EQ(symbolizer.cached_file_count(), 2u);
}

TEST(ElfSymbolizerCacheTest, ConcurrentLookupsAgree) {
  struct Expectation {
    uint64_t file_id;
    std::string path;
    uint64_t address;
    std::string name;
  };
  std::vector<Expectation> expectations;
  uint64_t file_id = 0;
  for (const std::string file : {"symbols_pie", "symbols_nopie"}) {
    const auto nm = nm_symbols(fixture(file));
    ++file_id;
    for (const auto& [raw_name, display_name] : known_executable_functions()) {
      expectations.push_back({file_id, fixture(file), nm.at(raw_name).address + 1, display_name});
    }
  }
  const auto lib_nm = nm_symbols(fixture("libsymbols_fixture.so"));
  expectations.push_back({file_id + 1, fixture("libsymbols_fixture_stripped.so"),
                          lib_nm.at("omniprof_fixture_lib_hidden").address, "omniprof_fixture_lib_hidden"});

  ElfSymbolizer symbolizer{DebugFileFinder(fixture("debug_root"))};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const Expectation& e = expectations[(i * 7 + t) % expectations.size()];
        auto symbol = symbolizer.symbolize(e.file_id, e.path, e.address, {e.path});
        if (!symbol.ok() || !symbol->has_value() || (*symbol)->name != e.name) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(symbolizer.cached_file_count(), 3u);
}

// --- Demangling --------------------------------------------------------------

TEST(DemangleTest, DemanglesItaniumNamesAndLeavesOthersAlone) {
  EXPECT_EQ(demangle("_ZN16omniprof_fixture5scaleEi"), "omniprof_fixture::scale(int)");
  EXPECT_EQ(demangle("_ZN16omniprof_fixture11Accumulator3addEl"), "omniprof_fixture::Accumulator::add(long)");
  EXPECT_EQ(demangle("_ZN3foo3barEv.cold"), "foo::bar() [clone .cold]");
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle("_start"), "_start");
  EXPECT_EQ(demangle("_Z"), "_Z");
  EXPECT_EQ(demangle("_Znot a mangled name"), "_Znot a mangled name");
  EXPECT_EQ(demangle(""), "");
}

}  // namespace
}  // namespace omniprof
