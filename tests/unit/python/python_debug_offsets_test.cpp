// _Py_DebugOffsets (3.13+), read from a live process of each build that has
// it (pyenv's 3.13, Debian's 3.13, 3.14 and 3.15) with the YAML's debug_*
// positions, against the shipped YAML (itself checked against the headers by
// python_offsets_yaml_test).
#include "python_debug_offsets.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "omniprof/support/elf_file.h"
#include "python_offsets_table.h"
#include "python_test_support.h"

namespace omniprof::python::test {
namespace {

// Where `path` is mapped at file offset 0 in `pid`, from /proc/PID/maps.
std::optional<uint64_t> load_address(pid_t pid, const std::string& path) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() < path.size() ||
        line.compare(line.size() - path.size(), path.size(), path) != 0)
      continue;
    unsigned long long start = 0, end = 0, offset = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %*s %llx", &start, &end, &offset) == 3 && offset == 0)
      return start;
  }
  return std::nullopt;
}

// The build's ELF file holding _PyRuntime: pyenv's libpython, or Debian's
// static python3.X executable.
std::string runtime_file(const PythonBuild& build) {
  return build.debian.empty() ? build.libpython() : build.root() + "/usr/bin/python" + build.minor;
}

const PythonOffsetsTable& shipped_table() {
  static const PythonOffsetsTable table = PythonOffsetsTable::load_file(OMNIPROF_PYTHON_YAML);
  return table;
}

// A _Py_DebugOffsets image of `layout`'s size: the cookie, then `words`
// (byte position -> value).
std::vector<uint8_t> image_of(const PythonVersionOffsets& layout,
                              std::initializer_list<std::pair<std::size_t, uint64_t>> words) {
  std::vector<uint8_t> image(static_cast<std::size_t>(layout.reader.debug_offsets_size), 0);
  std::memcpy(image.data(), "xdebugpy", 8);
  for (auto [at, value] : words) std::memcpy(image.data() + at, &value, 8);
  return image;
}

// The builds that publish _Py_DebugOffsets: 3.13 and later.
std::vector<PythonBuild> builds_with_debug_offsets() {
  std::vector<PythonBuild> out;
  for (const PythonBuild& build : python_builds()) {
    if (build.major() == 3 && build.minor_number() >= 13) out.push_back(build);
  }
  return out;
}

class PythonDebugOffsets : public ::testing::TestWithParam<PythonBuild> {};

TEST_P(PythonDebugOffsets, LiveProcessAgreesWithTheYaml) {
  const PythonBuild& version = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(version);
  const PythonVersionOffsets* yaml = shipped_table().find(version.major(), version.minor_number());
  ASSERT_NE(yaml, nullptr) << "python.yaml has no " << version.minor;
  const std::string file = runtime_file(version);
  auto elf = omniprof::ElfFile::open(file);
  ASSERT_TRUE(elf) << elf.error().message;
  auto found = elf->find_symbol("_PyRuntime");
  ASSERT_TRUE(found) << found.error().message;
  const std::optional<ElfSymbol>& runtime = *found;
  ASSERT_TRUE(runtime) << "no _PyRuntime in " << file;
  ASSERT_GE(runtime->size, static_cast<uint64_t>(yaml->reader.debug_offsets_size));

  std::string error;
  auto child =
      ChildProcess::start({version.python(), "-c",
                           "import sys, time; print('READY'); sys.stdout.flush(); time.sleep(30)"},
                          error);
  ASSERT_TRUE(child) << error;
  ASSERT_EQ(child->read_line(), "READY");
  // The maps name the file the loader opened: the .so.1.0 behind the symlink.
  auto base = load_address(child->pid(), file);
  ASSERT_TRUE(base) << file << " is not mapped in " << child->pid();
  std::vector<uint8_t> image(static_cast<std::size_t>(yaml->reader.debug_offsets_size));
  ReadMemory read = proc_mem_reader(child->pid());
  // The mapping at file offset 0 is where the file's vaddr of offset 0 went:
  // 0 for pyenv's libpython, 0x400000 for Debian's non-PIE executable.
  const std::optional<uint64_t> first_vaddr = elf->file_offset_to_vaddr(0);
  ASSERT_TRUE(first_vaddr) << file << " maps no PT_LOAD at file offset 0";
  const uint64_t bias = *base - (*first_vaddr & ~uint64_t{0xfff});
  ASSERT_TRUE(read(bias + runtime->value, image.data(), image.size()))
      << "cannot read _PyRuntime of " << child->pid() << " at " << std::hex << bias + runtime->value;

  auto debug = parse_py_debug_offsets(image, *yaml);
  ASSERT_TRUE(debug) << debug.error().message;
  EXPECT_EQ(debug->version >> 16, yaml->bpf.version_hex >> 16);

  PythonVersionOffsets from_process = *yaml;
  // Start from nothing known, so every field the debug offsets cover is set
  // by apply_py_debug_offsets and compared.
  std::size_t covered = 0;
  for (std::string_view key : kPythonOffsetSchema.keys()) {
    if (key == "version_hex" || key == "frame_model" || key == "gil_model") continue;
    ASSERT_TRUE(kPythonOffsetSchema.set(from_process, key, -1));
  }
  ASSERT_TRUE(apply_py_debug_offsets(*debug, from_process));
  for (std::string_view key : kPythonOffsetSchema.keys()) {
    int64_t live = kPythonOffsetSchema.value(from_process, key);
    if (live == -1 && kPythonOffsetSchema.value(*yaml, key) != -1) continue;  // not in _Py_DebugOffsets
    EXPECT_EQ(live, kPythonOffsetSchema.value(*yaml, key))
        << version.minor << " key " << key << ": the process says " << live;
    if (live != -1) ++covered;
  }
  EXPECT_GE(covered, 20u);
}

INSTANTIATE_TEST_SUITE_P(Builds, PythonDebugOffsets, ::testing::ValuesIn(builds_with_debug_offsets()),
                         python_build_test_name);

TEST(PythonDebugOffsetsParser, RejectsWhatItCannotRead) {
  const PythonVersionOffsets* layout = shipped_table().find(3, 13);
  ASSERT_NE(layout, nullptr);
  std::vector<uint8_t> good = image_of(*layout, {{kPyDebugOffsetsVersionAt, 0x030d00f0}});
  EXPECT_TRUE(parse_py_debug_offsets(good, *layout));
  std::vector<uint8_t> cookie = good;
  cookie[0] = 'y';
  EXPECT_NE(parse_py_debug_offsets(cookie, *layout).error().message.find("xdebugpy"), std::string::npos);
  EXPECT_NE(parse_py_debug_offsets(image_of(*layout, {{kPyDebugOffsetsVersionAt, 0x030e00a0}}), *layout)
                .error()
                .message.find("is not 3.13"),
            std::string::npos);
  EXPECT_NE(parse_py_debug_offsets(
                image_of(*layout, {{kPyDebugOffsetsVersionAt, 0x030d00f0}, {kPyDebugOffsetsFreeThreadedAt, 1}}),
                *layout)
                .error()
                .message.find("free-threaded"),
            std::string::npos);
  // An offset that does not fit the BPF map's u16 (thread_state.next).
  const auto next_at = static_cast<std::size_t>(layout->reader.debug_tstate_next);
  EXPECT_FALSE(parse_py_debug_offsets(
      image_of(*layout, {{kPyDebugOffsetsVersionAt, 0x030d00f0}, {next_at, 0x10000}}), *layout));
  EXPECT_FALSE(parse_py_debug_offsets(std::span<const uint8_t>(good.data(), 100), *layout));
  // A layout without debug offsets (3.12), or one missing a position.
  const PythonVersionOffsets* old = shipped_table().find(3, 12);
  ASSERT_NE(old, nullptr);
  EXPECT_NE(parse_py_debug_offsets(good, *old).error().message.find("has none"), std::string::npos);
  PythonVersionOffsets holed = *layout;
  holed.reader.debug_frame_owner = -1;
  EXPECT_NE(parse_py_debug_offsets(good, holed).error().message.find("debug_frame_owner"), std::string::npos);
}

}  // namespace
}  // namespace omniprof::python::test
