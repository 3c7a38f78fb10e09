// The evaluation loop's cold part, found without its symbol
// (python_eval_loop.h): in Debian's stripped builds, against objdump's
// disassembly of the hot part; in pyenv's, whose symbols name everything,
// nothing.
#include "python_eval_loop.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <regex>
#include <set>

#include "omniprof/support/elf_file.h"
#include "python_test_support.h"

namespace omniprof::python::test {
namespace {

// The ELF file holding the loop: pyenv's libpython, Debian's executable.
std::string loop_file(const PythonBuild& build) {
  return build.debian.empty() ? build.libpython() : build.root() + "/usr/bin/python" + build.minor;
}

struct Symbols {
  std::map<std::string, ElfSymbol> by_name;
  std::set<uint64_t> starts;
};

Symbols function_symbols(const std::string& file) {
  Symbols out;
  auto elf = ElfFile::open(file);
  EXPECT_TRUE(elf) << elf.error().message;
  if (!elf) return out;
  auto listed = elf->for_each_symbol(SymbolKinds::kFunctions, [&](const ElfSymbol& s) {
    out.by_name.try_emplace(s.name, s);
    out.starts.insert(s.value);
    return true;
  });
  EXPECT_TRUE(listed) << listed.error().message;
  return out;
}

std::string command_output(const std::string& command) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe.get())) > 0) out.append(buffer, n);
  return out;
}

// A build whose symbols name every function (pyenv's, with .symtab): no
// part is left unnamed, so nothing else is taken for the loop (a function
// the loop tail-calls, say). The loop's .cold symbol of pyenv's 3.11 and
// 3.12 is no oracle for the finder: its 4 to 8 bytes are reached by no
// direct branch of the hot part (objdump shows none).
class EvalLoopNamedBuild : public ::testing::TestWithParam<PythonBuild> {};

TEST_P(EvalLoopNamedBuild, LeavesNoPartUnnamed) {
  const PythonBuild& build = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(build);
  const std::string file = loop_file(build);
  Symbols symbols = function_symbols(file);
  const char* loop = build.major() == 2 ? "PyEval_EvalFrameEx" : "_PyEval_EvalFrameDefault";
  auto hot = symbols.by_name.find(loop);
  ASSERT_NE(hot, symbols.by_name.end()) << file << " has no " << loop;
  auto elf = ElfFile::open(file);
  ASSERT_TRUE(elf) << elf.error().message;
  auto parts = unnamed_cold_parts(*elf, file, hot->second.value, hot->second.size,
                                  [&](uint64_t a) { return symbols.starts.count(a) > 0; });
  ASSERT_TRUE(parts) << parts.error().message;
  EXPECT_TRUE(parts->empty()) << parts->size() << " unnamed parts, the first at 0x" << std::hex
                              << parts->front().begin;
}

INSTANTIATE_TEST_SUITE_P(Builds, EvalLoopNamedBuild, ::testing::ValuesIn(pyenv_builds()), python_build_test_name);

class EvalLoopColdPart : public ::testing::TestWithParam<PythonBuild> {};

// A stripped build: one part, where objdump's decoding of the hot part
// branches (not calls), that no symbol names.
TEST_P(EvalLoopColdPart, StrippedBuildsPartIsWhereItsHotPartBranches) {
  const PythonBuild& build = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(build);
  const std::string file = loop_file(build);
  Symbols symbols = function_symbols(file);
  ASSERT_EQ(symbols.by_name.count("_PyEval_EvalFrameDefault.cold"), 0u) << file << " is not stripped";
  auto hot = symbols.by_name.find("_PyEval_EvalFrameDefault");
  ASSERT_NE(hot, symbols.by_name.end()) << file;
  const uint64_t start = hot->second.value, end = start + hot->second.size;

  auto elf = ElfFile::open(file);
  ASSERT_TRUE(elf) << elf.error().message;
  auto parts = unnamed_cold_parts(*elf, file, start, hot->second.size,
                                  [&](uint64_t a) { return symbols.starts.count(a) > 0; });
  ASSERT_TRUE(parts) << parts.error().message;
  // Each of Debian's builds has one (3.14's holds the opcode bodies).
  ASSERT_EQ(parts->size(), 1u);

  char range[64];
  std::snprintf(range, sizeof range, "--start-address=0x%llx --stop-address=0x%llx", (unsigned long long)start,
                (unsigned long long)end);
  const std::string listing = command_output("objdump -d --no-show-raw-insn " + std::string(range) + " " + file);
  ASSERT_NE(listing.find("_PyEval_EvalFrameDefault"), std::string::npos) << "objdump listed nothing:\n" << listing;
  static const std::regex branch(R"(\s(j[a-z]+)\s+([0-9a-f]+)\s)");
  std::set<uint64_t> branched_to;
  for (auto it = std::sregex_iterator(listing.begin(), listing.end(), branch); it != std::sregex_iterator(); ++it) {
    const uint64_t target = std::stoull((*it)[2].str(), nullptr, 16);
    if (target < start || target >= end) branched_to.insert(target);
  }
  EXPECT_EQ(branched_to.count(parts->front().begin), 1u)
      << "objdump shows no branch of the hot part to 0x" << std::hex << parts->front().begin;
  EXPECT_EQ(symbols.starts.count(parts->front().begin), 0u);
  EXPECT_GT(parts->front().end, parts->front().begin);
}

INSTANTIATE_TEST_SUITE_P(Builds, EvalLoopColdPart, ::testing::ValuesIn(debian_builds()), python_build_test_name);

}  // namespace
}  // namespace omniprof::python::test
