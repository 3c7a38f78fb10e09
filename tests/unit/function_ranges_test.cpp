// The extents of functions from unwind information (the native plugin's
// function_bounds): FunctionRanges on a real stripped binary of the test
// build, checked against the symbols of its unstripped original;
// FunctionRangesCache (the plugin's per-file cache) and FunctionStartCache
// (the host's per-function one); the native plugin's hook itself, through
// PluginHost, without BPF.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "function_ranges_cache.h"
#include "omniprof/support/elf_file.h"
#include "plugins/plugin_host.h"
#include "symbolize/function_start_cache.h"
#include "omniprof/support/cfi/function_ranges.h"

namespace omniprof {
namespace {

using unwind::FunctionRange;
using unwind::FunctionRanges;

const std::string kSymbols = std::string(OMNIPROF_TEST_FIXTURES_DIR) + "/symbols";

// The fixture's functions compiled from C and C++ (known_functions.h), which
// have CFI; the ones it defines in assembly have none.
bool fixture_function(const ElfSymbol& symbol) {
  static const std::set<std::string> kCompiled = {
      "omniprof_fixture_alpha", "omniprof_fixture_beta", "omniprof_fixture_static_helper",
      "_ZN16omniprof_fixture5scaleEi", "_ZN16omniprof_fixture5twiceEl", "_ZN16omniprof_fixture11Accumulator3addEl",
      "main"};
  return symbol.size > 0 && kCompiled.count(symbol.name) > 0;
}

TEST(FunctionRangesTest, StrippedBinaryGivesEachFunctionItsSymbolsStartAndEnd) {
  const std::string stripped = kSymbols + "/symbols_pie_stripped";
  auto stripped_elf = ElfFile::open(stripped);
  ASSERT_TRUE(stripped_elf) << stripped_elf.error().message;
  ASSERT_FALSE(stripped_elf->has_symtab());
  auto original = ElfFile::open(kSymbols + "/symbols_pie");
  ASSERT_TRUE(original) << original.error().message;
  auto symbols = original->symbols();
  ASSERT_TRUE(symbols) << symbols.error().message;

  // No debug file: the stripped file's own .eh_frame alone.
  unwind::CfiReadOptions options;
  options.use_debug_file = false;
  auto ranges = FunctionRanges::read(stripped, options);
  ASSERT_TRUE(ranges) << ranges.error().message;
  size_t checked = 0;
  for (const ElfSymbol& symbol : *symbols) {
    if (!fixture_function(symbol)) continue;
    ++checked;
    for (uint64_t address : {symbol.value, symbol.value + symbol.size / 2, symbol.value + symbol.size - 1}) {
      auto found = ranges->find(address);
      ASSERT_TRUE(found) << symbol.name << " at +" << address - symbol.value << ": no FDE";
      EXPECT_EQ(found->start, symbol.value) << symbol.name;
      // The FDE may end past the symbol's size (alignment padding), never before.
      EXPECT_GE(found->end, symbol.value + symbol.size) << symbol.name;
    }
  }
  EXPECT_EQ(checked, 7u) << "too few fixture functions found in symbols_pie";
  // Before the first function and far past the code, nothing.
  EXPECT_FALSE(ranges->find(0));
  EXPECT_FALSE(ranges->find(uint64_t{1} << 60));
}

TEST(NativePluginFunctionBoundsTest, TheNativePluginGivesTheExtentOfAStrippedFunction) {
  PluginHostOptions options;
  options.data_root = "/nonexistent";
  options.runtime_enabled = [](const std::string&) { return true; };
  options.create_without_bpf = true;  // as for `omniprof debug`: an instance, no maps
  PluginHost host(nullptr, nullptr);
  host.load_file(OMNIPROF_NATIVE_PLUGIN, options);
  ASSERT_EQ(host.plugins().size(), 1u);
  Plugin& native = *host.plugins().front();
  ASSERT_EQ(native.state, PluginState::kChecked) << native.reason;
  ASSERT_NE(native.hooks.function_bounds, nullptr) << "the native plugin does not set function_bounds";

  auto original = ElfFile::open(kSymbols + "/symbols_pie");
  ASSERT_TRUE(original) << original.error().message;
  auto alpha = original->find_symbol("omniprof_fixture_alpha");
  ASSERT_TRUE(alpha && *alpha);
  const std::string stripped = kSymbols + "/symbols_pie_stripped";
  auto bounds = PluginHost::function_bounds(native, 42, stripped, (*alpha)->value + (*alpha)->size / 2);
  ASSERT_TRUE(bounds) << bounds.error().message;
  ASSERT_TRUE(*bounds);
  EXPECT_EQ((*bounds)->start, (*alpha)->value);
  EXPECT_GE((*bounds)->end, (*alpha)->value + (*alpha)->size);
  // No FDE at address 0: nothing, not an error.
  auto none = PluginHost::function_bounds(native, 42, stripped, 0);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(*none);
  // A file that cannot be read: an error naming it.
  auto unreadable = PluginHost::function_bounds(native, 43, "/nonexistent/omniprof-file", 0x1000);
  ASSERT_FALSE(unreadable);
  EXPECT_NE(unreadable.error().message.find("/nonexistent/omniprof-file"), std::string::npos)
      << unreadable.error().message;
}

TEST(FunctionRangesTest, UnreadableFileIsAnErrorNamingIt) {
  auto ranges = FunctionRanges::read("/nonexistent/omniprof-file");
  ASSERT_FALSE(ranges);
  EXPECT_NE(ranges.error().message.find("/nonexistent/omniprof-file"), std::string::npos) << ranges.error().message;
}

// A fake reader for the plugin's cache: `ranges_per_file` ranges of 0x100
// bytes from 0x1000 for each path, or an error for paths starting "bad".
struct FakeReader {
  size_t ranges_per_file = 2;
  std::vector<std::string> reads;
  native::FunctionRangesCache::Reader reader() {
    return [this](const std::string& path) -> Result<FunctionRanges> {
      reads.push_back(path);
      if (path.rfind("bad", 0) == 0) return make_error(path + ": unreadable");
      return ranges_of(ranges_per_file);
    };
  }
  static FunctionRanges ranges_of(size_t count);
};

FunctionRanges FakeReader::ranges_of(size_t count) {
  // Through the real parser: a crafted .debug_frame, parsed and dropped
  // (the ranges are copied out of it).
  std::vector<uint8_t> section;
  auto le = [&](uint64_t value, int size) {
    for (int i = 0; i < size; ++i) section.push_back(static_cast<uint8_t>(value >> (8 * i)));
  };
  // One .debug_frame CIE (version 1, no augmentation, code align 1, data
  // align -8, return address register 16, no instructions), then FDEs with
  // absolute 8-byte addresses.
  le(12, 4);
  le(0xffffffff, 4);
  section.insert(section.end(), {1, 0, 1, 0x78, 16, 0, 0, 0});
  for (size_t i = 0; i < count; ++i) {
    le(20, 4);
    le(0, 4);  // CIE at offset 0
    le(0x1000 + 0x100 * i, 8);
    le(0x100, 8);
  }
  unwind::CfiSectionView view;
  view.format = unwind::CfiFormat::kDebugFrame;
  view.bytes = section;
  return FunctionRanges::from_sections(std::span<const unwind::CfiSectionView>(&view, 1));
}

TEST(FunctionRangesCacheTest, ReadsAFileOnceUntilForgotten) {
  FakeReader fake;
  native::FunctionRangesCache cache(100, fake.reader());
  auto first = cache.find(7, "/proc/self/fd/3", 0x1010);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_TRUE(*first);
  EXPECT_EQ(**first, (FunctionRange{0x1000, 0x1100}));
  auto second = cache.find(7, "/proc/self/fd/3", 0x11ff);
  ASSERT_TRUE(second && *second);
  EXPECT_EQ(**second, (FunctionRange{0x1100, 0x1200}));
  auto outside = cache.find(7, "/proc/self/fd/3", 0x1200);
  ASSERT_TRUE(outside);
  EXPECT_FALSE(*outside);
  EXPECT_EQ(fake.reads.size(), 1u);
  EXPECT_EQ(cache.stats().ranges, 2u);

  cache.forget(7);
  EXPECT_EQ(cache.stats().ranges, 0u);
  ASSERT_TRUE(cache.find(7, "/proc/self/fd/3", 0x1010));
  EXPECT_EQ(fake.reads.size(), 2u);
}

TEST(FunctionRangesCacheTest, KeepsAnErrorForItsPathAndTriesAnotherPath) {
  FakeReader fake;
  native::FunctionRangesCache cache(100, fake.reader());
  auto failed = cache.find(9, "bad-path", 0x1010);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("bad-path"), std::string::npos);
  EXPECT_FALSE(cache.find(9, "bad-path", 0x1020));
  EXPECT_EQ(fake.reads.size(), 1u) << "the error was not kept";
  auto other = cache.find(9, "/proc/self/fd/4", 0x1010);
  ASSERT_TRUE(other && *other);
  EXPECT_EQ(fake.reads.size(), 2u);
}

TEST(FunctionRangesCacheTest, DropsTheLeastRecentlyAskedFilesPastItsBound) {
  FakeReader fake;
  fake.ranges_per_file = 4;
  native::FunctionRangesCache cache(10, fake.reader());  // room for two files of 4
  ASSERT_TRUE(cache.find(1, "one", 0x1000));
  ASSERT_TRUE(cache.find(2, "two", 0x1000));
  ASSERT_TRUE(cache.find(1, "one", 0x1000));  // 1 is now the most recent
  ASSERT_TRUE(cache.find(3, "three", 0x1000));  // 2 goes
  EXPECT_EQ(cache.stats().files_evicted, 1u);
  EXPECT_EQ(cache.stats().ranges, 8u);
  EXPECT_EQ(fake.reads.size(), 3u);
  ASSERT_TRUE(cache.find(1, "one", 0x1000));
  EXPECT_EQ(fake.reads.size(), 3u) << "file 1 was dropped instead of file 2";
  ASSERT_TRUE(cache.find(2, "two", 0x1000));
  EXPECT_EQ(fake.reads.size(), 4u);
}

TEST(FunctionStartCacheTest, AsksOncePerFunctionAndOncePerUncoveredAddress) {
  FunctionStartCache cache;
  int asked = 0;
  auto ask = [&](uint64_t address) -> Result<std::optional<FunctionBounds>> {
    ++asked;
    if (address >= 0x2000) return std::optional<FunctionBounds>();
    const uint64_t start = address & ~uint64_t{0xff};
    return std::optional<FunctionBounds>(FunctionBounds{start, start + 0x100});
  };
  for (uint64_t address : {0x1010, 0x1020, 0x10ff, 0x1000}) {
    auto found = cache.lookup(5, address, ask);
    ASSERT_TRUE(found && *found);
    EXPECT_EQ((*found)->start, 0x1000u);
  }
  EXPECT_EQ(asked, 1);
  auto next = cache.lookup(5, 0x1100, ask);
  ASSERT_TRUE(next && *next);
  EXPECT_EQ((*next)->start, 0x1100u);
  EXPECT_EQ(asked, 2);
  // Another file: its own question.
  ASSERT_TRUE(cache.lookup(6, 0x1010, ask));
  EXPECT_EQ(asked, 3);
  // No FDE: remembered per address.
  for (int i = 0; i < 3; ++i) {
    auto none = cache.lookup(5, 0x2010, ask);
    ASSERT_TRUE(none);
    EXPECT_FALSE(*none);
  }
  EXPECT_EQ(asked, 4);
  EXPECT_EQ(cache.stats().asked, 4u);
}

TEST(FunctionStartCacheTest, ErrorsAreNotKeptAndTheBoundClearsEverything) {
  FunctionStartCache cache(2);
  int asked = 0;
  bool fail = true;
  auto ask = [&](uint64_t address) -> Result<std::optional<FunctionBounds>> {
    ++asked;
    if (fail) return make_error("unreadable");
    return std::optional<FunctionBounds>(FunctionBounds{address, address + 0x10});
  };
  EXPECT_FALSE(cache.lookup(1, 0x100, ask));
  EXPECT_FALSE(cache.lookup(1, 0x100, ask));
  EXPECT_EQ(asked, 2);
  fail = false;
  ASSERT_TRUE(cache.lookup(1, 0x100, ask));
  ASSERT_TRUE(cache.lookup(1, 0x200, ask));
  EXPECT_EQ(asked, 4);
  ASSERT_TRUE(cache.lookup(1, 0x300, ask));  // a third entry: the bound of 2 clears first
  EXPECT_EQ(cache.stats().cleared, 1u);
  ASSERT_TRUE(cache.lookup(1, 0x100, ask));
  EXPECT_EQ(asked, 6);
}

}  // namespace
}  // namespace omniprof
