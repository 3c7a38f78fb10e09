// The perf map reader of the perfmap plugin (sdk/examples/perfmap): lines,
// lookups by address (later entries win where they overlap), and a file
// read as it grows, shrinks, is replaced or holds malformed lines.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "perf_map.h"

namespace omniprof::perfmap {
namespace {

std::string name_at(const PerfMapSymbols& symbols, uint64_t address) {
  const std::string* name = symbols.lookup(address);
  return name ? *name : "<none>";
}

void expect_line(const std::string& text, uint64_t start, uint64_t size, const std::string& name) {
  auto line = parse_perf_map_line(text);
  ASSERT_TRUE(line) << text << ": " << line.error().message;
  EXPECT_EQ(line->start, start) << text;
  EXPECT_EQ(line->size, size) << text;
  EXPECT_EQ(line->name, name) << text;
}

TEST(PerfMapLineTest, ParsesStartSizeAndTheRestAsName) {
  expect_line("7fcc5efc6040 2c4 JS:*perfmapHotLoop /tmp/hot.js:1:24", 0x7fcc5efc6040, 0x2c4,
              "JS:*perfmapHotLoop /tmp/hot.js:1:24");
}

TEST(PerfMapLineTest, AcceptsA0xPrefixUpperCaseAndACarriageReturn) {
  expect_line("0x7F0010 0x10 Interpreted Lua::f\r", 0x7f0010, 0x10, "Interpreted Lua::f");
}

TEST(PerfMapLineTest, RefusesWhatIsNotStartSizeName) {
  EXPECT_FALSE(parse_perf_map_line("zz 10 f"));
  EXPECT_FALSE(parse_perf_map_line("1000 1g f"));
  EXPECT_FALSE(parse_perf_map_line("1000 10"));
  EXPECT_FALSE(parse_perf_map_line("1000 10   "));
  EXPECT_FALSE(parse_perf_map_line("1000"));
  EXPECT_FALSE(parse_perf_map_line("0x 10 f"));
  EXPECT_FALSE(parse_perf_map_line("11112222333344445 10 f"));  // 17 digits
  EXPECT_FALSE(parse_perf_map_line("ffffffffffffffff 10 f"));   // wraps around
  auto bad = parse_perf_map_line("1000 xyz f");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("size 'xyz'"), std::string::npos) << bad.error().message;
}

TEST(PerfMapSymbolsTest, LooksUpByAddressWithinEachEntry) {
  PerfMapSymbols symbols;
  symbols.add(0x1000, 0x100, "a");
  symbols.add(0x2000, 0x10, "b");
  EXPECT_EQ(name_at(symbols, 0xfff), "<none>");
  EXPECT_EQ(name_at(symbols, 0x1000), "a");
  EXPECT_EQ(name_at(symbols, 0x10ff), "a");
  EXPECT_EQ(name_at(symbols, 0x1100), "<none>");
  EXPECT_EQ(name_at(symbols, 0x200f), "b");
  EXPECT_EQ(name_at(symbols, 0x2010), "<none>");
  EXPECT_EQ(symbols.entries(), 2u);
}

// The name at each address, as `expected` says ("<none>": no entry).
void expect_names(const PerfMapSymbols& symbols, const std::vector<std::pair<uint64_t, std::string>>& expected) {
  for (const auto& [address, name] : expected) EXPECT_EQ(name_at(symbols, address), name) << std::hex << address;
}

TEST(PerfMapSymbolsTest, ALaterEntryWinsWhereItOverlapsEarlierOnes) {
  PerfMapSymbols symbols;
  symbols.add(0x1000, 0x100, "old");  // [0x1000, 0x1100)
  symbols.add(0x1040, 0x40, "mid");   // inside it: splits it
  expect_names(symbols, {{0x103f, "old"}, {0x1040, "mid"}, {0x107f, "mid"}, {0x1080, "old"}});
  // Covers the tail of "old" and "mid" whole, and reaches past them.
  symbols.add(0x1020, 0x200, "new");
  expect_names(symbols, {{0x101f, "old"}, {0x1020, "new"}, {0x1050, "new"}, {0x10f0, "new"}, {0x121f, "new"},
                         {0x1220, "<none>"}});
  // The same code range compiled again (tier-up): the new name everywhere.
  symbols.add(0x1000, 0x220, "again");
  expect_names(symbols, {{0x1000, "again"}, {0x121f, "again"}});
  // An empty entry names nothing and cuts nothing.
  symbols.add(0x1010, 0, "empty");
  expect_names(symbols, {{0x1010, "again"}});
}

// A perf map file in a directory of its own, removed at the end.
class PerfMapReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/omniprof-perfmap-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/perf-1234.map";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void append(const std::string& text) {
    std::ofstream out(path_, std::ios::app | std::ios::binary);
    out << text;
  }
  void rewrite(const std::string& text) {
    std::ofstream out(path_, std::ios::trunc | std::ios::binary);
    out << text;
  }

  std::string dir_, path_;
};

TEST_F(PerfMapReaderTest, ReadsWhatIsAppendedAndWaitsForAnUnfinishedLine) {
  append("1000 10 first\n2000 10 sec");
  PerfMapReader reader(path_);
  auto update = reader.refresh();
  ASSERT_TRUE(update) << update.error().message;
  EXPECT_EQ(update->lines, 1u);
  EXPECT_EQ(name_at(reader.symbols(), 0x1005), "first");
  EXPECT_EQ(name_at(reader.symbols(), 0x2005), "<none>");  // its line is not finished
  EXPECT_EQ(reader.offset(), std::string("1000 10 first\n").size());

  append("ond\n3000 10 third\n");
  update = reader.refresh();
  ASSERT_TRUE(update) << update.error().message;
  EXPECT_EQ(update->lines, 2u);  // only the new lines
  EXPECT_FALSE(update->reread);
  EXPECT_EQ(name_at(reader.symbols(), 0x1005), "first");
  EXPECT_EQ(name_at(reader.symbols(), 0x2005), "second");
  EXPECT_EQ(name_at(reader.symbols(), 0x3005), "third");

  update = reader.refresh();  // nothing new
  ASSERT_TRUE(update);
  EXPECT_EQ(update->lines, 0u);
  EXPECT_EQ(reader.symbols().entries(), 3u);
}

TEST_F(PerfMapReaderTest, ATruncatedFileIsReadAgainFromTheStart) {
  append("1000 10 a\n2000 10 b\n3000 10 c\n");
  PerfMapReader reader(path_);
  ASSERT_TRUE(reader.refresh());
  rewrite("4000 10 d\n");  // shorter than what was read
  auto update = reader.refresh();
  ASSERT_TRUE(update) << update.error().message;
  EXPECT_TRUE(update->reread);
  EXPECT_EQ(name_at(reader.symbols(), 0x1005), "<none>");  // the old entries are gone
  EXPECT_EQ(name_at(reader.symbols(), 0x4005), "d");
}

TEST_F(PerfMapReaderTest, ATruncatedAndRegrownFileIsReadAgainFromTheStart) {
  append("1000 10 a\n");
  PerfMapReader reader(path_);
  ASSERT_TRUE(reader.refresh());
  // Same inode, longer than before: only the byte before the old offset
  // (no longer the '\n' it was) tells.
  rewrite("5000 10 rewritten-entry\n6000 10 f\n");
  auto update = reader.refresh();
  ASSERT_TRUE(update) << update.error().message;
  EXPECT_TRUE(update->reread);
  EXPECT_EQ(name_at(reader.symbols(), 0x1005), "<none>");
  EXPECT_EQ(name_at(reader.symbols(), 0x5005), "rewritten-entry");
  EXPECT_EQ(name_at(reader.symbols(), 0x6005), "f");
}

TEST_F(PerfMapReaderTest, AReplacedFileIsReadWhole) {
  append("1000 10 a\n");
  PerfMapReader reader(path_);
  ASSERT_TRUE(reader.refresh());
  // A new file renamed over the old one (another inode), longer than it.
  const std::string fresh = dir_ + "/fresh";
  {
    std::ofstream out(fresh);
    out << "1000 10 replaced\n7000 10 g\n";
  }
  std::filesystem::rename(fresh, path_);
  auto update = reader.refresh();
  ASSERT_TRUE(update) << update.error().message;
  EXPECT_TRUE(update->reread);
  EXPECT_EQ(update->lines, 2u);
  EXPECT_EQ(name_at(reader.symbols(), 0x1005), "replaced");
  EXPECT_EQ(name_at(reader.symbols(), 0x7005), "g");
}

TEST_F(PerfMapReaderTest, MalformedLinesAreCountedSkippedAndTheFirstNamed) {
  append("1000 10 a\nnot a line\n\n2000 10 b\n3000 zz c\n4000 10 d\n");
  PerfMapReader reader(path_);
  auto update = reader.refresh();
  ASSERT_TRUE(update) << update.error().message;
  EXPECT_EQ(update->malformed, 2u);
  ASSERT_TRUE(update->first_malformed);
  // file:line of the first one; a blank line is not malformed.
  EXPECT_EQ(update->first_malformed->rfind(path_ + ":2: ", 0), 0u) << *update->first_malformed;
  EXPECT_EQ(name_at(reader.symbols(), 0x1005), "a");
  EXPECT_EQ(name_at(reader.symbols(), 0x2005), "b");
  EXPECT_EQ(name_at(reader.symbols(), 0x3005), "<none>");
  EXPECT_EQ(name_at(reader.symbols(), 0x4005), "d");

  append("bad again\n5000 10 e\n");
  update = reader.refresh();
  ASSERT_TRUE(update);
  EXPECT_EQ(update->malformed, 1u);
  EXPECT_FALSE(update->first_malformed);  // named once per file
  EXPECT_EQ(reader.malformed_lines(), 3u);
  EXPECT_EQ(name_at(reader.symbols(), 0x5005), "e");
}

TEST_F(PerfMapReaderTest, AMissingFileOrADirectoryIsAnErrorNamingIt) {
  PerfMapReader missing(path_);
  auto update = missing.refresh();
  ASSERT_FALSE(update);
  EXPECT_NE(update.error().message.find(path_), std::string::npos) << update.error().message;
  std::filesystem::create_directory(path_);
  PerfMapReader directory(path_);
  update = directory.refresh();
  ASSERT_FALSE(update);
  EXPECT_NE(update.error().message.find("directory"), std::string::npos) << update.error().message;
}

}  // namespace
}  // namespace omniprof::perfmap
