// How the host puts interpreter frames (stored after the native ones,
// OMNIPROF_FRAME_SPLICED with `after` = their mark) back among the native
// frames they ran in.
#include <gtest/gtest.h>

#include "agent/round_samples.h"

namespace omniprof {
namespace {

omniprof_frame native(uint64_t address) { return omniprof_frame{address, 0, OMNIPROF_FRAME_NATIVE, 0, 0}; }
omniprof_frame python(uint64_t address, uint16_t after) {
  return omniprof_frame{address, 7, OMNIPROF_FRAME_PYTHON, OMNIPROF_FRAME_SPLICED, after};
}

// A frame of a third-party plugin (slot 4) that names the JIT code of its
// mark in place of the native frame (the perf-map plugin).
omniprof_frame jit(uint64_t address, uint16_t after) {
  return omniprof_frame{address, 1, OMNIPROF_SLOT_THIRD_PARTY_FIRST,
                        OMNIPROF_FRAME_SPLICED | OMNIPROF_FRAME_REPLACES_MARK, after};
}

std::vector<uint64_t> addresses(const std::vector<omniprof_frame>& frames) {
  std::vector<uint64_t> out;
  for (const auto& f : frames) out.push_back(f.address);
  return out;
}

TEST(StackSpliceTest, WithoutInterpreterFramesTheStackIsUnchanged) {
  std::vector<omniprof_frame> stored{native(1), native(2), native(3)};
  EXPECT_EQ(addresses(splice_interpreter_frames(stored)), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(StackSpliceTest, EachInterpreterFrameFollowsTheNativeFrameThatRanIt) {
  // Natives: 1 (leaf, in eval), 2, 3 (eval), 4 (main). Marks after 1 and 3.
  // 3.11-style: two Python frames (100, 101) ran in the first eval call.
  std::vector<omniprof_frame> stored{native(1), native(2), native(3), native(4),
                                     python(100, 1), python(101, 1), python(200, 3)};
  auto spliced = splice_interpreter_frames(stored);
  EXPECT_EQ(addresses(spliced), (std::vector<uint64_t>{1, 100, 101, 2, 3, 200, 4}));
  // The flags that only mattered in storage are gone; the detail stays.
  EXPECT_EQ(spliced[1].flags, 0);
  EXPECT_EQ(spliced[1].after, 0);
  EXPECT_EQ(spliced[1].detail, 7u);
  EXPECT_EQ(spliced[1].kind, OMNIPROF_FRAME_PYTHON);
}

TEST(StackSpliceTest, FramesPastTheLastMarkGoAfterTheNativeStack) {
  // The native walk stopped after 2 frames; the interpreter had more frames.
  std::vector<omniprof_frame> stored{native(1), native(2), python(100, 1), python(101, 2), python(102, 2)};
  EXPECT_EQ(addresses(splice_interpreter_frames(stored)), (std::vector<uint64_t>{1, 100, 2, 101, 102}));
}

TEST(StackSpliceTest, AnAfterBeyondTheNativeFramesIsKeptAtTheEnd) {
  std::vector<omniprof_frame> stored{native(1), python(100, 9)};
  EXPECT_EQ(addresses(splice_interpreter_frames(stored)), (std::vector<uint64_t>{1, 100}));
}

TEST(StackSpliceTest, AReplacingFrameTakesItsMarksPlace) {
  // Natives: 1 (leaf, JIT), 2 (native), 3 (JIT), 4 (main). The JIT frames are
  // replaced by their names (101, 103), not followed by them.
  std::vector<omniprof_frame> stored{native(1), native(2), native(3), native(4), jit(101, 1), jit(103, 3)};
  auto spliced = splice_interpreter_frames(stored);
  EXPECT_EQ(addresses(spliced), (std::vector<uint64_t>{101, 2, 103, 4}));
  EXPECT_EQ(spliced[0].kind, OMNIPROF_SLOT_THIRD_PARTY_FIRST);
  EXPECT_EQ(spliced[0].flags, 0);
  EXPECT_EQ(spliced[0].after, 0);
  EXPECT_EQ(spliced[0].detail, 1u);
  EXPECT_EQ(spliced[1].kind, OMNIPROF_FRAME_NATIVE);
}

TEST(StackSpliceTest, ReplacingAndFollowingFramesMix) {
  // Two frames replace native 2 (both kept, in order); a plain spliced frame
  // follows native 3, which stays.
  std::vector<omniprof_frame> stored{native(1), native(2), native(3), jit(201, 2), jit(202, 2), python(300, 3)};
  EXPECT_EQ(addresses(splice_interpreter_frames(stored)), (std::vector<uint64_t>{1, 201, 202, 3, 300}));
}

TEST(StackSpliceTest, AReplacingFrameWithoutAMarkReplacesNothing) {
  // after = 0 (no native frame to replace) or past the native frames (a
  // corrupt mark): every native frame stays and the frame is kept.
  std::vector<omniprof_frame> stored{native(1), native(2), jit(100, 0), jit(200, 9)};
  EXPECT_EQ(addresses(splice_interpreter_frames(stored)), (std::vector<uint64_t>{100, 1, 2, 200}));
}

}  // namespace
}  // namespace omniprof
