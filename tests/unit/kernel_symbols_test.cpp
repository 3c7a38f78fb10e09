#include "symbolize/kernel_symbols.h"

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace omniprof {
namespace {

// kallsyms as the kernel prints it: vmlinux symbols, then module symbols with
// a tab-separated [module]; data (D/B/R/A) symbols mixed in.
constexpr const char* kKallsyms =
    "0000000000000000 A fixed_percpu_data\n"
    "ffffffff81000000 T _text\n"
    "ffffffff81000000 T _stext\n"
    "ffffffff81000000 t startup_64_alias\n"
    "ffffffff81000100 t local_helper\n"
    "ffffffff81000200 T schedule\n"
    "ffffffff81000300 D some_data\n"
    "ffffffff81000340 B some_bss\n"
    "ffffffff81000380 R some_rodata\n"
    "ffffffff81000400 W weak_function\n"
    "ffffffff81000500 w weak_local\n"
    "ffffffff81000600 T _etext\n"
    "ffffffffc0001000 t mymod_init\t[mymod]\n"
    "ffffffffc0001080 d mymod_data\t[mymod]\n"
    "ffffffffc0001100 T mymod_exported\t[mymod]\n"
    "ffffffffc0002000 t bpf_prog_6deef7357e7b4530_handler\t[bpf]\n";

KernelSymbols parse_fixture() {
  auto symbols = KernelSymbols::parse(kKallsyms, "fixture");
  EXPECT_TRUE(symbols.ok()) << symbols.error().message;
  return symbols.ok() ? std::move(symbols).value() : KernelSymbols();
}

TEST(KernelSymbolsTest, LooksUpTextSymbols) {
  const KernelSymbols symbols = parse_fixture();
  EXPECT_EQ(symbols.size(), 9u);  // 11 text symbols, three of them at one address

  auto schedule = symbols.lookup(0xffffffff81000200);
  ASSERT_TRUE(schedule.has_value());
  EXPECT_EQ(schedule->name, "schedule");
  EXPECT_EQ(schedule->module, "");
  EXPECT_EQ(schedule->start, 0xffffffff81000200u);

  auto inside = symbols.lookup(0xffffffff81000250);
  ASSERT_TRUE(inside.has_value());
  EXPECT_EQ(inside->name, "schedule");

  auto local = symbols.lookup(0xffffffff81000101);
  ASSERT_TRUE(local.has_value());
  EXPECT_EQ(local->name, "local_helper");

  auto weak = symbols.lookup(0xffffffff81000450);
  ASSERT_TRUE(weak.has_value());
  EXPECT_EQ(weak->name, "weak_function");
  auto weak_local = symbols.lookup(0xffffffff81000500);
  ASSERT_TRUE(weak_local.has_value());
  EXPECT_EQ(weak_local->name, "weak_local");
}

TEST(KernelSymbolsTest, IgnoresDataSymbols) {
  const KernelSymbols symbols = parse_fixture();
  // some_data, some_bss and some_rodata are not text: schedule extends over them.
  for (uint64_t address : {0xffffffff81000300, 0xffffffff81000340, 0xffffffff81000380}) {
    auto symbol = symbols.lookup(address);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_EQ(symbol->name, "schedule");
  }
  auto module = symbols.lookup(0xffffffffc0001090);
  ASSERT_TRUE(module.has_value());
  EXPECT_EQ(module->name, "mymod_init");
}

TEST(KernelSymbolsTest, NamesModules) {
  const KernelSymbols symbols = parse_fixture();
  auto init = symbols.lookup(0xffffffffc0001004);
  ASSERT_TRUE(init.has_value());
  EXPECT_EQ(init->name, "mymod_init");
  EXPECT_EQ(init->module, "mymod");
  auto exported = symbols.lookup(0xffffffffc0001100);
  ASSERT_TRUE(exported.has_value());
  EXPECT_EQ(exported->name, "mymod_exported");
  EXPECT_EQ(exported->module, "mymod");
  auto bpf = symbols.lookup(0xffffffffc0002010);
  ASSERT_TRUE(bpf.has_value());
  EXPECT_EQ(bpf->name, "bpf_prog_6deef7357e7b4530_handler");
  EXPECT_EQ(bpf->module, "bpf");
}

TEST(KernelSymbolsTest, AliasesResolveDeterministically) {
  // _text, _stext (both T) and startup_64_alias (t) share an address: global
  // first, then the plainest name.
  const KernelSymbols symbols = parse_fixture();
  auto first = symbols.lookup(0xffffffff81000000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->name, "_text");

  std::string reversed;
  std::istringstream lines(kKallsyms);
  std::vector<std::string> all;
  for (std::string line; std::getline(lines, line);) all.push_back(line);
  for (auto it = all.rbegin(); it != all.rend(); ++it) reversed += *it + "\n";
  auto reparsed = KernelSymbols::parse(reversed, "reversed");
  ASSERT_TRUE(reparsed.ok()) << reparsed.error().message;
  EXPECT_EQ(reparsed->lookup(0xffffffff81000000)->name, "_text");
}

TEST(KernelSymbolsTest, AddressesOutsideKnownTextHaveNoSymbol) {
  const KernelSymbols symbols = parse_fixture();
  EXPECT_FALSE(symbols.lookup(0).has_value());
  EXPECT_FALSE(symbols.lookup(0xffffffff80ffffff).has_value());
  // Far past the last symbol.
  EXPECT_FALSE(symbols.lookup(0xffffffffc0002000 + KernelSymbols::kMaxSymbolSpan + 1).has_value());
  EXPECT_FALSE(symbols.lookup(~uint64_t{0}).has_value());
  // A little past the last symbol is still that symbol.
  EXPECT_TRUE(symbols.lookup(0xffffffffc0002100).has_value());
  // Far past a vmlinux symbol, in the gap before the modules.
  EXPECT_FALSE(symbols.lookup(0xffffffff90000000).has_value());
}

TEST(KernelSymbolsTest, AllZeroAddressesMeanKptrRestrict) {
  const char* restricted =
      "0000000000000000 A fixed_percpu_data\n"
      "0000000000000000 T _text\n"
      "0000000000000000 T schedule\n"
      "0000000000000000 t mymod_init\t[mymod]\n";
  auto symbols = KernelSymbols::parse(restricted, "/proc/kallsyms");
  ASSERT_FALSE(symbols.ok());
  EXPECT_NE(symbols.error().message.find("kptr_restrict"), std::string::npos) << symbols.error().message;
  EXPECT_NE(symbols.error().message.find("root"), std::string::npos) << symbols.error().message;
  EXPECT_NE(symbols.error().message.find("kernel.kptr_restrict=0"), std::string::npos);
}

TEST(KernelSymbolsTest, MalformedLinesAreErrorsNamingTheLine) {
  auto bad_address = KernelSymbols::parse("ffffffff81000000 T _text\nzzzz T broken\n", "fixture");
  ASSERT_FALSE(bad_address.ok());
  EXPECT_NE(bad_address.error().message.find("fixture:2"), std::string::npos) << bad_address.error().message;
  EXPECT_NE(bad_address.error().message.find("zzzz T broken"), std::string::npos);

  auto missing_name = KernelSymbols::parse("ffffffff81000000 T\n", "fixture");
  ASSERT_FALSE(missing_name.ok());
  EXPECT_NE(missing_name.error().message.find("fixture:1"), std::string::npos);

  auto bad_module = KernelSymbols::parse("ffffffffc0001000 t f\tmymod\n", "fixture");
  EXPECT_FALSE(bad_module.ok());

  auto no_text = KernelSymbols::parse("ffffffff81000300 D some_data\n", "fixture");
  ASSERT_FALSE(no_text.ok());
  EXPECT_NE(no_text.error().message.find("no kernel text symbols"), std::string::npos);

  EXPECT_FALSE(KernelSymbols::parse("", "fixture").ok());
}

TEST(KernelSymbolsTest, LoadsFromAFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("omniprof_kallsyms_" + std::to_string(::getpid()))).string();
  {
    std::ofstream out(path);
    out << kKallsyms;
  }
  auto symbols = KernelSymbols::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(symbols.ok()) << symbols.error().message;
  EXPECT_EQ(symbols->lookup(0xffffffff81000210)->name, "schedule");

  auto missing = KernelSymbols::load(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(path), std::string::npos);
}

// load() reads the file in pieces: lines split across reads, a last line
// without its newline, and a malformed line's number far into the file come
// out as parse() gives them from the whole text.
TEST(KernelSymbolsTest, LoadingAFileBiggerThanOneReadEqualsParsingItWhole) {
  std::string text;
  for (int i = 0; i < 20000; ++i) {
    text += fmt::format("{:016x} {} fn_{}{}{}\n", 0xffffffff81000000ull + 0x40ull * i, i % 3 == 0 ? 't' : 'T', i,
                        std::string(i % 17, 'x'), i % 5 == 0 ? "\t[mod]" : "");
  }
  text.pop_back();  // the last line has no newline
  ASSERT_GT(text.size(), 4u << 16);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("omniprof_kallsyms_big_" + std::to_string(::getpid()))).string();
  auto write = [&](const std::string& contents) {
    std::ofstream out(path);
    out << contents;
  };
  write(text);
  auto loaded = KernelSymbols::load(path);
  auto parsed = KernelSymbols::parse(text, path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(loaded->size(), 20000u);
  EXPECT_EQ(loaded->size(), parsed->size());
  for (int i = 0; i < 20000; ++i) {
    const uint64_t address = 0xffffffff81000000ull + 0x40ull * i + 8;
    const auto from_file = loaded->lookup(address);
    const auto from_text = parsed->lookup(address);
    ASSERT_TRUE(from_file && from_text) << i;
    EXPECT_EQ(from_file->name, from_text->name);
    EXPECT_EQ(from_file->module, from_text->module);
  }

  text.insert(text.find("\n", text.size() / 2) + 1, "not a kallsyms line\n");
  const size_t bad_line = static_cast<size_t>(std::count(text.begin(), text.begin() + text.find("not a"), '\n')) + 1;
  write(text);
  auto malformed = KernelSymbols::load(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.error().message.find(fmt::format("{}:{}: malformed", path, bad_line)), std::string::npos)
      << malformed.error().message;
}

// The running kernel's own symbols, when this process may see them.
TEST(KernelSymbolsTest, RealKallsymsNameSchedule) {
  auto symbols = KernelSymbols::load();
  if (!symbols.ok()) {
    if (symbols.error().message.find("kptr_restrict") != std::string::npos) {
      GTEST_SKIP() << symbols.error().message;
    }
    FAIL() << symbols.error().message;
  }
  // Find schedule's address independently of the parser.
  std::ifstream kallsyms("/proc/kallsyms");
  uint64_t schedule = 0;
  for (std::string line; std::getline(kallsyms, line);) {
    std::istringstream fields(line);
    std::string address;
    std::string type;
    std::string name;
    fields >> address >> type >> name;
    if (name == "schedule" && (type == "T" || type == "t")) {
      schedule = std::stoull(address, nullptr, 16);
      break;
    }
  }
  if (schedule == 0) GTEST_SKIP() << "this kernel has no schedule symbol";
  for (uint64_t offset : {0, 1, 8}) {
    auto symbol = symbols->lookup(schedule + offset);
    ASSERT_TRUE(symbol.has_value());
    EXPECT_EQ(symbol->name, "schedule");
    EXPECT_EQ(symbol->module, "");
    EXPECT_EQ(symbol->start, schedule);
  }
}

}  // namespace
}  // namespace omniprof
