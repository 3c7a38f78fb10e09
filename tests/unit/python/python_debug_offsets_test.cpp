// 3.13's _Py_DebugOffsets, read from a live python3.13 process, against the
// shipped YAML (itself checked against the headers by python_offsets_yaml_test).
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

std::vector<uint8_t> image_of(std::initializer_list<std::pair<std::size_t, uint64_t>> words) {
  std::vector<uint8_t> image(kPyDebugOffsets313Size, 0);
  std::memcpy(image.data(), "xdebugpy", 8);
  for (auto [index, value] : words) std::memcpy(image.data() + 8 + index * 8, &value, 8);
  return image;
}

TEST(PythonDebugOffsets, LiveProcessAgreesWithTheYaml) {
  const PyenvVersion& version = pyenv_versions().back();
  ASSERT_EQ(version.minor, "3.13");
  OMNIPROF_REQUIRE_PYENV(version);
  auto elf = omniprof::ElfFile::open(version.libpython());
  ASSERT_TRUE(elf) << elf.error().message;
  auto found = elf->find_symbol("_PyRuntime");
  ASSERT_TRUE(found) << found.error().message;
  const std::optional<ElfSymbol>& runtime = *found;
  ASSERT_TRUE(runtime);
  ASSERT_GE(runtime->size, kPyDebugOffsets313Size);

  std::string error;
  auto child =
      ChildProcess::start({version.python(), "-c",
                           "import sys, time; print('READY'); sys.stdout.flush(); time.sleep(30)"},
                          error);
  ASSERT_TRUE(child) << error;
  ASSERT_EQ(child->read_line(), "READY");
  // The maps name the file the loader opened: the .so.1.0 behind the symlink.
  auto base = load_address(child->pid(), version.libpython());
  ASSERT_TRUE(base) << version.libpython() << " is not mapped in " << child->pid();
  std::vector<uint8_t> image(kPyDebugOffsets313Size);
  ReadMemory read = proc_mem_reader(child->pid());
  // A shared library's first PT_LOAD is at vaddr 0 (pyenv's libpython is).
  ASSERT_TRUE(read(*base + runtime->value, image.data(), image.size()));

  auto debug = parse_py_debug_offsets(image);
  ASSERT_TRUE(debug) << debug.error().message;
  EXPECT_EQ(debug->version >> 16, 0x030du);

  PythonOffsetsTable table = PythonOffsetsTable::load_file(OMNIPROF_PYTHON_YAML);
  const PythonVersionOffsets* yaml = table.find(3, 13);
  ASSERT_NE(yaml, nullptr);
  // The parser's layout is the size the 3.13 header gives the struct.
  EXPECT_EQ(yaml->reader.debug_offsets_size, static_cast<int64_t>(kPyDebugOffsets313Size));
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
        << "3.13 key " << key << ": the process says " << live;
    if (live != -1) ++covered;
  }
  EXPECT_GE(covered, 20u);
}

TEST(PythonDebugOffsets, RejectsWhatItCannotRead) {
  std::vector<uint8_t> good = image_of({{0, 0x030d00f0}});
  EXPECT_TRUE(parse_py_debug_offsets(good));
  std::vector<uint8_t> cookie = good;
  cookie[0] = 'y';
  EXPECT_NE(parse_py_debug_offsets(cookie).error().message.find("xdebugpy"), std::string::npos);
  EXPECT_NE(parse_py_debug_offsets(image_of({{0, 0x030e00a0}})).error().message.find("3.13"),
            std::string::npos);
  EXPECT_NE(parse_py_debug_offsets(image_of({{0, 0x030d00f0}, {1, 1}}))
                .error()
                .message.find("free-threaded"),
            std::string::npos);
  // An offset that does not fit the BPF map's u16 (thread_state.next, word 20).
  EXPECT_FALSE(parse_py_debug_offsets(image_of({{0, 0x030d00f0}, {20, 0x10000}})));
  EXPECT_FALSE(parse_py_debug_offsets(std::span<const uint8_t>(good.data(), 100)));
}

}  // namespace
}  // namespace omniprof::python::test
