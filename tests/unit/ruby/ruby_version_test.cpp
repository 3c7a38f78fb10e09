#include "ruby_version.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ruby_test_support.h"

namespace omniprof::ruby {
namespace {

std::string ruby_says(const char* expression) {
  std::string command = std::string(test::kRuby) + " -e 'print " + expression + "'";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return "";
  char buffer[256] = {};
  std::size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, pipe);
  pclose(pipe);
  return std::string(buffer, n);
}

TEST(RubyVersion, ReadsLibrubysVersionAsRubyReportsIt) {
  OMNIPROF_REQUIRE_RUBY();
  auto elf = ElfFile::open(test::kLibruby);
  ASSERT_TRUE(elf) << elf.error().message;
  auto version = read_ruby_version(*elf);
  ASSERT_TRUE(version) << version.error().message;
  EXPECT_EQ(version->to_string(), ruby_says("RUBY_VERSION"));
  EXPECT_EQ(version->major, 3);
  EXPECT_EQ(version->minor, 1);
}

TEST(RubyVersion, NotARubyNamesTheFile) {
  OMNIPROF_REQUIRE_RUBY();
  // The ruby executable links libruby and defines no ruby_version itself.
  auto elf = ElfFile::open(test::kRuby);
  ASSERT_TRUE(elf) << elf.error().message;
  auto version = read_ruby_version(*elf);
  ASSERT_FALSE(version);
  EXPECT_NE(version.error().message.find(test::kRuby), std::string::npos) << version.error().message;
  EXPECT_NE(version.error().message.find("ruby_version"), std::string::npos) << version.error().message;
}

TEST(RubyGlobalSymbols, DecodesBothLoadForms) {
  const uint8_t eax[] = {0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, 0xc3};
  auto address = decode_rip_relative_load(eax, 0x1000);
  ASSERT_TRUE(address) << address.error().message;
  EXPECT_EQ(*address, 0x1000u + 6 + 0x10);
  const uint8_t rax[] = {0x48, 0x8b, 0x05, 0xf0, 0xff, 0xff, 0xff, 0xc3};  // disp -16
  address = decode_rip_relative_load(rax, 0x2000);
  ASSERT_TRUE(address) << address.error().message;
  EXPECT_EQ(*address, 0x2000u + 7 - 16);
  // -fcf-protection (Debian 13's libruby-3.3): endbr64 first.
  const uint8_t endbr[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x8b, 0x05, 0x20, 0x00, 0x00, 0x00, 0xc3};
  address = decode_rip_relative_load(endbr, 0x3000);
  ASSERT_TRUE(address) << address.error().message;
  EXPECT_EQ(*address, 0x3000u + 4 + 6 + 0x20);
}

TEST(RubyGlobalSymbols, RefusesOtherCode) {
  // mov eax, [rip + disp] without the ret; a call; too short; a mov into ecx (8b 0d).
  const std::vector<std::vector<uint8_t>> malformed = {
      {0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, 0x90},
      {0xe8, 0x00, 0x00, 0x00, 0x00, 0xc3, 0x90},
      {0x8b, 0x05, 0x10},
      {0x8b, 0x0d, 0x10, 0x00, 0x00, 0x00, 0xc3},
      {0xf3, 0x0f, 0x1e, 0xfa, 0xc3},
      {0xf3, 0x0f, 0x1e, 0xfa},
      {},
  };
  for (const auto& code : malformed) {
    auto address = decode_rip_relative_load(code, 0x1234);
    ASSERT_FALSE(address);
    EXPECT_NE(address.error().message.find("0x1234"), std::string::npos) << address.error().message;
  }
}

// On the stripped Debian libruby the table is found through
// rb_sym_immortal_count; in a live process it holds what an rb_symbols_t
// does (a plausible last_id, an Array of ID chunks), and the frame reader
// tests name C functions through it.
TEST(RubyGlobalSymbols, FoundInStrippedLibrubyPointsAtTheIdTable) {
  OMNIPROF_REQUIRE_RUBY();
  auto elf = ElfFile::open(test::kLibruby);
  ASSERT_TRUE(elf) << elf.error().message;
  ASSERT_FALSE(elf->has_symtab()) << "this test is about the stripped libruby";
  auto address = find_global_symbols(*elf);
  ASSERT_TRUE(address) << address.error().message;
  // It lies in the writable data of the file (.data/.bss).
  bool in_writable = false;
  for (const LoadSegment& segment : elf->load_segments()) {
    if ((segment.flags & 2) && *address >= segment.vaddr && *address + 32 <= segment.vaddr + segment.memsz) in_writable = true;
  }
  EXPECT_TRUE(in_writable) << std::hex << *address;

  std::string error;
  auto process = test::RubyProcess::start(std::string(OMNIPROF_RUBY_TEST_DIR) + "/spin.rb", error);
  ASSERT_TRUE(process) << error;
  auto bias = test::load_bias(process->pid(), *elf);
  ASSERT_TRUE(bias);
  ReadMemory read = test::process_reader(process->pid());
  uint32_t last_id = 0;
  uint64_t ids = 0;
  ASSERT_TRUE(read(*bias + *address, &last_id, 4));
  const RubyVersionOffsets& offsets = test::shipped_offsets(3, 1, 2);
  ASSERT_TRUE(read(*bias + *address + offsets.reader.symbols_ids, &ids, 8));
  // Thousands of IDs exist once a script runs; ids is an Array (T_ARRAY 0x07).
  EXPECT_GT(last_id, 1000u);
  EXPECT_LT(last_id, 1u << 24);
  uint64_t ids_flags = 0;
  ASSERT_TRUE(read(ids, &ids_flags, 8));
  EXPECT_EQ(ids_flags & 0x1f, 0x07u);
}

}  // namespace
}  // namespace omniprof::ruby
