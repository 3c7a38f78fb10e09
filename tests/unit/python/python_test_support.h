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

struct PyenvVersion {
  std::string minor;  // "3.11"
  std::string full;   // "3.11.7"
  std::string root() const { return "/root/.pyenv/versions/" + full; }
  std::string python() const;       // bin/pythonX.Y
  std::string libpython() const;    // lib/libpythonX.Y[m].so.1.0
  std::string include_dir() const;  // include/pythonX.Y[m]
  int major() const;
  int minor_number() const;
};
// gtest prints parameters with this.
void PrintTo(const PyenvVersion& version, std::ostream* out);
// The parameterized tests' name suffix: "Python311".
std::string pyenv_test_name(const ::testing::TestParamInfo<PyenvVersion>& info);

// The pyenv builds the plugin supports, 2.7 to 3.13.
const std::vector<PyenvVersion>& pyenv_versions();

// Empty if `version` is installed; else the reason, after failing the
// current test under CI=true (GTEST_SKIP is the caller's: see the macro).
std::string missing_pyenv(const PyenvVersion& version);
#define OMNIPROF_REQUIRE_PYENV(version)                                     \
  do {                                                                      \
    std::string missing = ::omniprof::python::test::missing_pyenv(version); \
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
