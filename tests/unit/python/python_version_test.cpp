#include "python_version.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <fstream>

#include "python_test_support.h"

namespace omniprof::python::test {
namespace {

// What the interpreter itself says: "3.9.18".
std::string interpreter_version(const std::string& python) {
  int status = 0;
  std::string out = run_command(
      python + " -c \"import sys; sys.stdout.write('%d.%d.%d' % sys.version_info[:3])\"", status);
  EXPECT_EQ(status, 0) << python;
  return out;
}

class PythonVersionOfElf : public ::testing::TestWithParam<PythonBuild> {};

TEST_P(PythonVersionOfElf, LibpythonNamesItsExactVersion) {
  const PythonBuild& version = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(version);
  auto found = read_python_version(version.libpython());
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->to_string(), version.full);
  EXPECT_EQ(found->to_string(), interpreter_version(version.python()));
  EXPECT_EQ(found->source, version.minor_number() >= 11 ? "Py_Version" : "PY_VERSION string");
}

TEST_P(PythonVersionOfElf, RenamedLibpythonStillNamesItsVersion) {
  const PythonBuild& version = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(version);
  // No version in the name: the ABI symbols and the one PY_VERSION string decide.
  std::string copy = ::testing::TempDir() + "libpy_renamed_" + version.full + ".so";
  {
    std::ifstream in(version.libpython(), std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  auto found = read_python_version(copy);
  std::remove(copy.c_str());
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->to_string(), version.full);
}

TEST_P(PythonVersionOfElf, ExecutableLinkedToLibpythonIsAClearError) {
  const PythonBuild& version = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(version);
  // pyenv's bin/pythonX.Y only imports the C API from libpython.
  auto found = read_python_version(version.python());
  ASSERT_FALSE(found);
  EXPECT_NE(found.error().message.find(version.python()), std::string::npos)
      << found.error().message;
}

INSTANTIATE_TEST_SUITE_P(Pyenv, PythonVersionOfElf, ::testing::ValuesIn(pyenv_builds()),
                         python_build_test_name);

// Debian's python3 (python3.11 on Debian 12, which scripts/install-deps.sh
// installs): libpython linked into the executable, stripped (only .dynsym).
TEST(PythonVersion, DebianStrippedExecutable) {
  char resolved[PATH_MAX];
  if (!realpath("/usr/bin/python3", resolved)) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL() << "/usr/bin/python3 is missing under CI=true";
    GTEST_SKIP() << "/usr/bin/python3 is not installed";
  }
  const std::string path = resolved;
  auto found = read_python_version(path);
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->to_string(), interpreter_version(path));
  EXPECT_EQ(found->source, found->minor >= 11 ? "Py_Version" : "PY_VERSION string");
  RecordProperty("python", path + " " + found->to_string());
}

TEST(PythonVersion, NotPythonIsAClearError) {
  auto not_elf = read_python_version(OMNIPROF_PYTHON_TEST_DIR "/dump_code.py");
  ASSERT_FALSE(not_elf);
  EXPECT_NE(not_elf.error().message.find("dump_code.py"), std::string::npos);
  auto no_python = read_python_version("/bin/true");
  ASSERT_FALSE(no_python);
  EXPECT_NE(no_python.error().message.find("no Python C API symbols"), std::string::npos)
      << no_python.error().message;
  EXPECT_FALSE(read_python_version("/nonexistent/python3.9"));
}

}  // namespace
}  // namespace omniprof::python::test
