// A CPython newer than the newest python.yaml knows (3.16 and on): profiled
// only when its _Py_DebugOffsets declare a layout the plugin reads, and then
// said to be trusted; else refused by name in one log line, its native
// frames still walked. No 3.16 exists yet: Debian's python3.15 executable,
// copied, says 3.16.0 through its Py_Version constant (what the plugin reads
// as the file's version), and for the refusal also through the version field
// of the _Py_DebugOffsets that _PyRuntime starts with. The interpreter
// itself runs as 3.15 either way: nothing of it reads either field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "e2e_support.h"
#include "omniprof/support/elf_file.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

const std::string kRoot = std::string(OMNIPROF_TEST_PYTHONS) + "/python3.15";
constexpr uint64_t kVersion316 = 0x031000f0;  // PY_VERSION_HEX of 3.16.0 final
constexpr const char* kHot = "newer_version_hot";

// Overwrites the 8 bytes at link-time address `vaddr` of `path`.
::testing::AssertionResult patch_word(const std::string& path, uint64_t vaddr, uint64_t value) {
  auto elf = ElfFile::open(path);
  if (!elf) return ::testing::AssertionFailure() << elf.error().message;
  for (const LoadSegment& segment : elf->load_segments()) {
    if (vaddr < segment.vaddr || vaddr + 8 > segment.vaddr + segment.filesz) continue;
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(vaddr - segment.vaddr + segment.offset));
    file.write(reinterpret_cast<const char*>(&value), sizeof value);
    if (!file) return ::testing::AssertionFailure() << "cannot write " << path;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << std::hex << "0x" << vaddr << " is in no file-backed PT_LOAD of " << path;
}

::testing::AssertionResult symbol_address(const std::string& path, const std::string& name, uint64_t& out) {
  auto elf = ElfFile::open(path);
  if (!elf) return ::testing::AssertionFailure() << elf.error().message;
  auto found = elf->find_symbol(name);
  if (!found || !*found) return ::testing::AssertionFailure() << "no " << name << " in " << path;
  out = (*found)->value;
  return ::testing::AssertionSuccess();
}

struct NewerRun {
  std::string log;
  pid_t pid = 0;
  int64_t samples = 0, with_hot = 0;
};

// Copies python3.15 to DIR/python3.16 (Py_Version 3.16.0; with
// `declare_316`, its _Py_DebugOffsets too), runs a hot loop on it and
// records it.
void record_newer(const std::string& dir, bool declare_316, NewerRun& run) {
  const std::string original = kRoot + "/usr/bin/python3.15";
  if (!fs::exists(original)) {
    if (in_ci()) FAIL() << original << " missing in CI (scripts/fetch-test-pythons.sh)";
    GTEST_SKIP() << original << " missing (scripts/fetch-test-pythons.sh)";
  }
  const std::string copy = dir + "/python3.16";
  fs::copy_file(original, copy, fs::copy_options::overwrite_existing);
  uint64_t py_version = 0, runtime = 0;
  ASSERT_TRUE(symbol_address(copy, "Py_Version", py_version));
  ASSERT_TRUE(symbol_address(copy, "_PyRuntime", runtime));
  ASSERT_TRUE(patch_word(copy, py_version, kVersion316));
  if (declare_316) ASSERT_TRUE(patch_word(copy, runtime + 8, kVersion316));

  // Lives 120 s, killed when the test ends: record takes seconds to start
  // in an emulated guest (the 8 s this loop once ran had ended before record
  // recorded, in the 6.1 and 5.10 guests on 2026-12-06: 0 samples of it).
  const std::string script = std::string("import time\n") + "def " + kHot +
                             "():\n    end = time.time() + 120\n    n = 0\n    while time.time() < end:\n"
                             "        n += 1\n" + kHot + "()\n";
  BackgroundProcess python({"/usr/bin/env", "PYTHONHOME=" + kRoot + "/usr",
                            kRoot + "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "--library-path",
                            kRoot + "/usr/lib/x86_64-linux-gnu", copy, "-c", script});
  run.pid = python.pid();
  const std::string out = dir + "/profile.pb.gz";
  auto result = run_command({OMNIPROF_BINARY, "record", "-d", "4", "-F", "99", "-p", std::to_string(run.pid), "-o", out});
  run.log = result.out + result.err;
  ASSERT_EQ(result.exit_code, 0) << run.log;
  std::string error;
  auto traces = traces_of_pid(read_traces_with_go(out, &error), run.pid);
  ASSERT_FALSE(traces.empty()) << error << "\n" << run.log;
  for (const auto& t : traces) {
    run.samples += t.count;
    if (std::find(t.frames.begin(), t.frames.end(), kHot) != t.frames.end()) run.with_hot += t.count;
  }
}

std::vector<std::string> lines_with(const std::string& log, const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(text) != std::string::npos) out.push_back(line);
  }
  return out;
}

TEST(PythonNewerVersionTest, DebugOffsetsOfAKnownLayoutAreTrustedAndItsFramesNamed) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  NewerRun run;
  record_newer(temp_dir("python-newer-trusted"), false, run);
  if (HasFatalFailure() || IsSkipped()) return;
  const auto trusted = lines_with(run.log, "trusted as");
  ASSERT_EQ(trusted.size(), 1u) << run.log;
  std::cerr << trusted[0] << "\n";
  EXPECT_NE(trusted[0].find("CPython 3.16.0 is newer than the newest this plugin knows (3.15)"), std::string::npos)
      << trusted[0];
  EXPECT_NE(trusted[0].find("trusted as 3.15's layout"), std::string::npos) << trusted[0];
  EXPECT_NE(trusted[0].find("pid " + std::to_string(run.pid) + " "), std::string::npos) << trusted[0];
  EXPECT_TRUE(lines_with(run.log, "not supported").empty()) << run.log;
  ASSERT_GE(run.samples, 100) << "too few samples to judge\n" << run.log;
  EXPECT_GE(run.with_hot * 100, run.samples * 90)
      << run.with_hot << " of " << run.samples << " samples show " << kHot << "\n" << run.log;
}

TEST(PythonNewerVersionTest, DebugOffsetsDeclaringANewerLayoutAreRefusedByNameOnce) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  NewerRun run;
  record_newer(temp_dir("python-newer-refused"), true, run);
  if (HasFatalFailure() || IsSkipped()) return;
  const auto refused = lines_with(run.log, "not supported");
  ASSERT_EQ(refused.size(), 1u) << run.log;
  std::cerr << refused[0] << "\n";
  EXPECT_NE(refused[0].find("CPython 3.16.0 is not supported (newer than 3.15, and its _Py_DebugOffsets declare "
                            "version 3.16 (0x031000f0), not a layout this plugin reads)"),
            std::string::npos)
      << refused[0];
  EXPECT_NE(refused[0].find("pid " + std::to_string(run.pid) + " "), std::string::npos) << refused[0];
  EXPECT_TRUE(lines_with(run.log, "trusted as").empty()) << run.log;
  ASSERT_GE(run.samples, 100) << "too few samples to judge\n" << run.log;
  EXPECT_EQ(run.with_hot, 0) << "Python frames of a version the plugin refused?\n" << run.log;
}

}  // namespace
}  // namespace omniprof::e2e
