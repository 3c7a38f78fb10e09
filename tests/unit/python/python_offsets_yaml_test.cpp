// Proves every number of plugins/python/offsets/python.yaml against the
// CPython it describes: python_offsets_probe.c, compiled against each pyenv
// build's headers and Debian's (libpython3.X-dev, unpacked by
// scripts/fetch-test-pythons.sh), prints offsetof()/sizeof() for every key.
#include <gtest/gtest.h>

#include <map>
#include <omniprof/offsets.hpp>
#include <set>
#include <sstream>

#include "omniprof/support/elf_file.h"
#include "python_offsets_table.h"
#include "python_test_support.h"

namespace omniprof::python::test {
namespace {

// key -> value as the probe prints it for `version`; fails the test on a
// compile or run error.
std::map<std::string, int64_t> probe_offsets(const PythonBuild& version) {
  std::string binary = ::testing::TempDir() + "python_offsets_probe_" + version.full;
  std::string include = version.include_dir();
  std::string extra = version.extra_include_dir().empty() ? "" : " -I" + version.extra_include_dir();
  int status = 0;
  std::string compile = std::string(OMNIPROF_C_COMPILER) + " -std=gnu99 -DPy_BUILD_CORE -I" +
                        include + " -I" + include + "/internal" + extra + " -o " + binary +
                        " " OMNIPROF_PYTHON_TEST_DIR "/python_offsets_probe.c 2>&1";
  std::string output = run_command(compile, status);
  EXPECT_EQ(status, 0) << "compiling the probe for " << version.full << " failed:\n" << output;
  if (status != 0) return {};
  output = run_command(binary, status);
  EXPECT_EQ(status, 0) << "the probe for " << version.full << " failed";
  std::map<std::string, int64_t> values;
  std::istringstream lines(output);
  std::string key;
  int64_t value;
  while (lines >> key >> value) {
    EXPECT_TRUE(values.emplace(key, value).second) << "probe prints " << key << " twice";
  }
  return values;
}

class PythonOffsetsYaml : public ::testing::TestWithParam<PythonBuild> {};

TEST_P(PythonOffsetsYaml, EveryNumberMatchesTheHeaders) {
  const PythonBuild& version = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(version);
  sdk::OffsetTable raw = sdk::OffsetTable::load_file(OMNIPROF_PYTHON_YAML);
  // Debian's builds by their minor version (sid's patch level changes).
  auto parsed_version = sdk::RuntimeVersion::parse(version.debian.empty() ? version.full : version.minor);
  ASSERT_TRUE(parsed_version);
  const sdk::Offsets* entry = raw.find(*parsed_version);
  ASSERT_NE(entry, nullptr) << "python.yaml has no entry for " << version.full;
  ASSERT_EQ(entry->version(), version.minor)
      << "the entry for " << version.full << " is not per minor version";

  std::map<std::string, int64_t> real = probe_offsets(version);
  ASSERT_FALSE(real.empty()) << "the probe printed nothing for " << version.full;

  std::size_t checked = 0;
  for (const auto& [key, yaml_value] : entry->fields()) {
    auto it = real.find(key);
    if (it == real.end()) {
      ADD_FAILURE() << version.minor << ": YAML key " << key << " is not checked by the probe";
      continue;
    }
    EXPECT_EQ(yaml_value, it->second)
        << "python " << version.minor << ", key " << key << ": YAML says " << yaml_value << ", "
        << version.full << "'s headers say " << it->second;
    ++checked;
  }
  for (const auto& [key, value] : real) {
    EXPECT_TRUE(entry->find(key)) << version.minor << ": the probe's " << key
                                  << " is missing from the YAML";
  }
  // Every key the loader requires, so the check cannot pass on a short file.
  EXPECT_EQ(checked, kPythonOffsetSchema.keys().size()) << version.minor;
  EXPECT_GT(checked, 0u);

  // The loaded structs hold the same numbers as the file.
  PythonOffsetsTable table = PythonOffsetsTable::load_file(OMNIPROF_PYTHON_YAML);
  const PythonVersionOffsets* offsets = table.find(version.major(), version.minor_number());
  ASSERT_NE(offsets, nullptr);
  for (std::string_view key : kPythonOffsetSchema.keys()) {
    EXPECT_EQ(kPythonOffsetSchema.value(*offsets, key), real[std::string(key)])
        << version.minor << " " << key;
  }
}

// 3.6 has no _PyRuntime: the static GIL is two file-local variables, which
// the plugin finds by symbol (the YAML has -1 for the runtime offsets). Check
// they are there, of the types ceval_gil.h gives them.
TEST(PythonOffsetsYaml, Python36StaticGilSymbols) {
  const PythonBuild& version = pyenv_builds()[1];
  ASSERT_EQ(version.minor, "3.6");
  OMNIPROF_REQUIRE_PYTHON_BUILD(version);
  auto elf = omniprof::ElfFile::open(version.libpython());
  ASSERT_TRUE(elf) << elf.error().message;
  std::map<std::string, uint64_t> sizes;
  for (const char* name : {"gil_locked", "gil_last_holder", "interp_head", "_PyThreadState_Current"}) {
    auto symbol = elf->find_symbol(name);
    ASSERT_TRUE(symbol) << symbol.error().message;
    ASSERT_TRUE(symbol->has_value()) << name << " not in " << version.libpython();
    sizes[name] = (*symbol)->size;
  }
  EXPECT_EQ(sizes["gil_locked"], 4u);       // _Py_atomic_int
  EXPECT_EQ(sizes["gil_last_holder"], 8u);  // _Py_atomic_address
  EXPECT_EQ(sizes["interp_head"], 8u);
  EXPECT_EQ(sizes["_PyThreadState_Current"], 8u);
}

INSTANTIATE_TEST_SUITE_P(Builds, PythonOffsetsYaml, ::testing::ValuesIn(python_builds()),
                         python_build_test_name);

}  // namespace
}  // namespace omniprof::python::test
