// Folding the interpreter's own native frames into the interpreter frames
// they run (agent/stack_folding.h), and the frame types profiles carry
// (profile/frame_type.h).
#include <gtest/gtest.h>

#include <vector>

#include "agent/stack_folding.h"
#include "profile/frame_type.h"

namespace omniprof {
namespace {

constexpr FrameRole K = FrameRole::kKernel;
constexpr FrameRole N = FrameRole::kNative;
constexpr FrameRole I = FrameRole::kInterpreterNative;
constexpr FrameRole P = FrameRole::kInterpreter;

std::vector<uint32_t> kept(const std::vector<FrameRole>& roles) {
  std::vector<uint32_t> keep;
  fold_interpreter_frames(roles, keep);
  return keep;
}

TEST(StackFolding, InterpreterCodeLeafwardBecomesTheInnermostInterpreterFramesSelfTime) {
  // PyObject_Free, long_add, _PyEval_EvalFrameDefault (mark), burn, <module>,
  // PyEval_EvalCode, Py_RunMain, main (all the interpreter's), __libc_start_main.
  EXPECT_EQ(kept({I, I, I, P, P, I, I, I, N}), (std::vector<uint32_t>{3, 4, 5, 6, 7, 8}));
}

TEST(StackFolding, EvaluationLoopAndCallMachineryBetweenInterpreterFramesGo) {
  // 3.10: eval(mark), inner, _PyFunction_Vectorcall, eval(mark), outer, main.
  EXPECT_EQ(kept({I, P, I, I, P, I}), (std::vector<uint32_t>{1, 4, 5}));
}

TEST(StackFolding, OtherFilesAndTheKernelStayInPlace) {
  // kernel, libcrypto, _hashlib.so, the interpreter's call machinery, eval,
  // digest_work, C extension calling back, interpreter glue, eval, caller.
  EXPECT_EQ(kept({K, N, N, I, I, P, N, I, I, P, I}), (std::vector<uint32_t>{0, 1, 2, 5, 6, 9, 10}));
  // Interpreter code called by another file's code is folded too: its time
  // is the C extension's self time (libc's malloc would stay).
  EXPECT_EQ(kept({I, N, I, P}), (std::vector<uint32_t>{1, 3}));
}

TEST(StackFolding, StackWithoutInterpreterFramesIsLeftAlone) {
  EXPECT_EQ(kept({I, I, N, I}), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(kept({}), (std::vector<uint32_t>{}));
}

TEST(FrameType, PluginFramesCarryTheirTypeInSystemName) {
  EXPECT_EQ(typed_system_name("python", "<module>"), "python:<module>");
  EXPECT_EQ(frame_type_of("<module>", "python:<module>", ""), "python");
  EXPECT_EQ(frame_type_of("block in <main>", "ruby:block in <main>", ""), "ruby");
  EXPECT_EQ(frame_type_of("JS:*hot /a.js:1:2", "jit:JS:*hot /a.js:1:2", ""), "jit");
}

TEST(FrameType, NativeAndKernelFramesAreToldByTheirMapping) {
  EXPECT_EQ(frame_type_of("do_syscall_64", "do_syscall_64", "[kernel.kallsyms]"), "kernel");
  EXPECT_EQ(frame_type_of("main", "main", "/usr/bin/python3.11"), "native");
  // A C++ linker name is no type prefix, nor is a prefix of another name.
  EXPECT_EQ(frame_type_of("ns::f(int)", "_ZN2ns1fEi", "/lib/libx.so"), "native");
  EXPECT_EQ(frame_type_of("f", "Bad Type:f", "/lib/libx.so"), "native");
  EXPECT_EQ(frame_type_of("f", "python:g", "/lib/libx.so"), "native");
}

TEST(FrameType, ARuntimeNameBecomesAValidType) {
  EXPECT_EQ(frame_type_from_name("perfmap"), "perfmap");
  EXPECT_EQ(frame_type_from_name("My-JIT.2"), "my_jit_2");
  EXPECT_EQ(frame_type_from_name(""), "other");
  EXPECT_TRUE(valid_frame_type(frame_type_from_name(std::string(40, 'x'))));
  EXPECT_FALSE(valid_frame_type("Python"));
  EXPECT_FALSE(valid_frame_type(""));
}

}  // namespace
}  // namespace omniprof
