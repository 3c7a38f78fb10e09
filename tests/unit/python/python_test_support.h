// What the python plugin's tests share: finding the pyenv builds, running a
// python with a pipe on its stdout, reading its memory.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "python_code_reader.h"

namespace omniprof::python::test {

// A CPython build the tests run: pyenv's (under /root/.pyenv/versions) or
// one of Debian's, unpacked by scripts/fetch-test-pythons.sh under
// /opt/omniprof/test-pythons (or $OMNIPROF_TEST_PYTHONS) with its own C
// library, started through its launcher there.
struct PythonBuild {
  std::string minor;   // "3.11"
  std::string full;    // pyenv: "3.11.7"; Debian: the build's name ("python3.14": the suite's patch level of the day)
  std::string debian;  // Debian's build: its name under test-pythons; empty for pyenv's
  std::string root() const;         // the pyenv version's directory, or Debian's unpacked tree
  std::string python() const;       // bin/pythonX.Y, or Debian's launcher
  std::string libpython() const;    // lib/libpythonX.Y[m].so.1.0 (Debian: usr/lib/x86_64-linux-gnu/)
  std::string include_dir() const;  // include/pythonX.Y[m] (Debian: usr/include/pythonX.Y)
  // Where else the headers look (Debian: usr/include, for the multiarch
  // x86_64-linux-gnu/pythonX.Y/pyconfig.h); empty for pyenv's.
  std::string extra_include_dir() const;
  int major() const;
  int minor_number() const;
};
// gtest prints parameters with this.
void PrintTo(const PythonBuild& version, std::ostream* out);
// The parameterized tests' name suffix: "Python311".
std::string python_build_test_name(const ::testing::TestParamInfo<PythonBuild>& info);

// The pyenv builds the plugin supports, 2.7 to 3.13.
const std::vector<PythonBuild>& pyenv_builds();
// Debian's builds (python3.14 and python3.15 from sid, python3.13 from
// trixie), then every build: pyenv's and Debian's.
const std::vector<PythonBuild>& debian_builds();
const std::vector<PythonBuild>& python_builds();

// Empty if `version` is installed; else the reason, after failing the
// current test under CI=true (GTEST_SKIP is the caller's: see the macro).
std::string missing_python_build(const PythonBuild& version);
#define OMNIPROF_REQUIRE_PYTHON_BUILD(version)                                     \
  do {                                                                      \
    std::string missing = ::omniprof::python::test::missing_python_build(version); \
    if (!missing.empty()) GTEST_SKIP() << missing;                          \
  } while (0)

// A child process with its stdout on a pipe; killed and reaped on destruction.
class ChildProcess {
 public:
  // argv[0] is the program's path.
  static std::optional<ChildProcess> start(const std::vector<std::string>& argv,
                                           std::string& error);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // The next line of its stdout without the newline; nullopt at EOF or after
  // `timeout_ms`.
  std::optional<std::string> read_line(int timeout_ms = 20000);
  // Everything until EOF (the process exits).
  std::string read_all(int timeout_ms = 20000);
  // Waits for the exit; the exit status or -1.
  int wait();

 private:
  ChildProcess(pid_t pid, int fd) : pid_(pid), stdout_fd_(fd) {}
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
};

// Reads the memory of `pid` through /proc/PID/mem.
ReadMemory proc_mem_reader(pid_t pid);

// Runs `command` through the shell; its stdout, and its exit status in `status`.
std::string run_command(const std::string& command, int& status);

std::vector<uint8_t> from_hex(const std::string& hex);
std::vector<std::string> split(const std::string& text, char separator);

}  // namespace omniprof::python::test
