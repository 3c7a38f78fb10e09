// Where the perfmap plugin looks for JIT code (/proc/PID/maps) and for the
// perf map (the namespace pid), as sdk/examples/perfmap/jit_code.h says.
#include <gtest/gtest.h>

#include "jit_code.h"

namespace omniprof::perfmap {
namespace {

std::vector<ProcMapping> maps_of(const std::string& text) {
  auto maps = parse_proc_maps(text);
  EXPECT_TRUE(maps) << maps.error().message;
  return maps ? *maps : std::vector<ProcMapping>{};
}

// Node 20's maps, cut down: V8's code range is a reservation (---p) with
// an rwx part; the node binary and libc are file-backed code.
const char* const kNodeMaps =
    "00400000-00c00000 r-xp 00000000 08:01 1234    /usr/bin/node\n"
    "3fd53000-40018000 rw-p 00000000 00:00 0       [heap]\n"
    "13b7ca700000-13b7ca740000 rw-p 00000000 00:00 0\n"
    "7fcc5efc0000-7fcc5efc2000 rw-p 00000000 00:00 0\n"
    "7fcc5efc2000-7fcc5efc3000 ---p 00000000 00:00 0\n"
    "7fcc5efc3000-7fcc5efff000 rwxp 00000000 00:00 0\n"
    "7fcc5efff000-7fcc7ee00000 ---p 00000000 00:00 0\n"
    "7fcc80000000-7fcc80021000 rw-p 00000000 00:00 0\n"
    "7fcc86000000-7fcc86200000 r-xp 00028000 08:01 99      /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7fcc863b1000-7fcc863b3000 r-xp 00000000 00:00 0       [vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0   [vsyscall]\n";

// The parser is the SDK's (tests/unit/proc_maps_test.cpp); what is anonymous
// memory is the plugin's.
TEST(JitCodeTest, AnonymousMemoryIsUnnamedOrNamedAnon) {
  auto maps = maps_of(kNodeMaps);
  ASSERT_EQ(maps.size(), 11u);
  EXPECT_FALSE(anonymous(maps[0]));  // /usr/bin/node
  EXPECT_TRUE(anonymous(maps[2]));
  EXPECT_FALSE(anonymous(maps[1]));  // [heap]
  EXPECT_FALSE(anonymous(maps[9]));  // [vdso]
  auto named = maps_of("1000-2000 r-xp 00000000 00:00 0   [anon:dalvik-jit-code-cache]\n");
  ASSERT_EQ(named.size(), 1u);
  EXPECT_TRUE(anonymous(named[0]));
}

TEST(JitCodeRangesTest, TheWholeReservationAroundExecutableAnonymousMemory) {
  size_t left_out = 9;
  auto ranges = jit_code_ranges(maps_of(kNodeMaps), 4, &left_out);
  // The anonymous run holding the rwx pages, whole: code made executable
  // later inside the reservation is covered too. Nothing file-backed.
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0], (CodeRange{0x7fcc5efc0000, 0x7fcc7ee00000}));
  EXPECT_EQ(left_out, 0u);
}

TEST(JitCodeRangesTest, NoExecutableAnonymousMemoryGivesNoRange) {
  auto ranges = jit_code_ranges(maps_of("00400000-00c00000 r-xp 00000000 08:01 1234 /usr/bin/node\n"
                                        "7f0000000000-7f0000010000 rw-p 00000000 00:00 0\n"),
                                4, nullptr);
  EXPECT_TRUE(ranges.empty());
}

TEST(JitCodeRangesTest, MoreThanFitAreMergedClosestFirstNeverOverFileCode) {
  // Six JIT areas (LuaJIT allocates its machine code in small pieces).
  // Between the 2nd and 3rd lies a library's code: never covered.
  const char* text =
      "10000-11000 r-xp 00000000 00:00 0\n"
      "12000-13000 r-xp 00000000 00:00 0\n"
      "20000-30000 r-xp 00000000 08:01 7 /usr/lib/libluajit-5.1.so.2\n"
      "40000-41000 r-xp 00000000 00:00 0\n"
      "41100-41200 r-xp 00000000 00:00 0\n"
      "50000-51000 r-xp 00000000 00:00 0\n"
      "90000-91000 r-xp 00000000 00:00 0\n";
  size_t left_out = 9;
  auto ranges = jit_code_ranges(maps_of(text), 4, &left_out);
  EXPECT_EQ(ranges, (std::vector<CodeRange>{{0x10000, 0x13000}, {0x40000, 0x41200}, {0x50000, 0x51000},
                                            {0x90000, 0x91000}}));
  EXPECT_EQ(left_out, 0u);
  // Two ranges only: 0x40000-0x91000 merge, the library keeps the first
  // two apart, so one area (the smallest) cannot be kept.
  ranges = jit_code_ranges(maps_of(text), 2, &left_out);
  EXPECT_EQ(ranges, (std::vector<CodeRange>{{0x10000, 0x13000}, {0x40000, 0x91000}}));
  EXPECT_EQ(left_out, 0u);
  ranges = jit_code_ranges(maps_of(text), 1, &left_out);
  EXPECT_EQ(ranges, (std::vector<CodeRange>{{0x40000, 0x91000}}));
  EXPECT_EQ(left_out, 1u);
}

TEST(NamespacePidTest, TheLastNSpidFieldElseThePid) {
  EXPECT_EQ(namespace_pid("Name:\tnode\nPid:\t4242\nNSpid:\t4242\t17\nNSpgid:\t4242\t17\n", 4242), 17);
  EXPECT_EQ(namespace_pid("Name:\tnode\nPid:\t4242\nNSpid:\t4242\n", 4242), 4242);
  EXPECT_EQ(namespace_pid("Name:\tnode\nPid:\t4242\n", 4242), 4242);  // before 4.1
  EXPECT_EQ(namespace_pid("Name:\tnode\nNSpid:\tgarbage\n", 4242), 4242);
}

TEST(PerfMapCandidatesTest, TheProcessesOwnTmpFirst) {
  EXPECT_EQ(perf_map_candidates(4242, 17),
            (std::vector<std::string>{"/proc/4242/root/tmp/perf-17.map", "/tmp/perf-4242.map"}));
}

}  // namespace
}  // namespace omniprof::perfmap
