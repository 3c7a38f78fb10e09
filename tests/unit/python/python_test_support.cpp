#include "python_test_support.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace omniprof::python::test {

namespace {
std::string test_pythons_dir() {
  const char* dir = std::getenv("OMNIPROF_TEST_PYTHONS");
  return dir && *dir ? dir : "/opt/omniprof/test-pythons";
}
}  // namespace

std::string PythonBuild::root() const {
  return debian.empty() ? "/root/.pyenv/versions/" + full : test_pythons_dir() + "/" + debian;
}

std::string PythonBuild::python() const {
  return debian.empty() ? root() + "/bin/python" + minor : test_pythons_dir() + "/bin/" + debian;
}

std::string PythonBuild::libpython() const {
  if (!debian.empty()) return root() + "/usr/lib/x86_64-linux-gnu/libpython" + minor + ".so.1.0";
  std::string abi = (minor == "3.6" || minor == "3.7") ? "m" : "";
  return root() + "/lib/libpython" + minor + abi + ".so.1.0";
}

std::string PythonBuild::include_dir() const {
  if (!debian.empty()) return root() + "/usr/include/python" + minor;
  std::string abi = (minor == "3.6" || minor == "3.7") ? "m" : "";
  return root() + "/include/python" + minor + abi;
}

std::string PythonBuild::extra_include_dir() const { return debian.empty() ? "" : root() + "/usr/include"; }

int PythonBuild::major() const { return std::atoi(minor.c_str()); }
int PythonBuild::minor_number() const { return std::atoi(minor.c_str() + minor.find('.') + 1); }

void PrintTo(const PythonBuild& version, std::ostream* out) { *out << "CPython " << version.full; }

std::string python_build_test_name(const ::testing::TestParamInfo<PythonBuild>& info) {
  std::string name = info.param.debian.empty() ? "Python" + info.param.minor : "Debian_" + info.param.debian;
  std::replace(name.begin(), name.end(), '-', '_');
  name.erase(std::remove(name.begin(), name.end(), '.'), name.end());
  return name;
}

const std::vector<PythonBuild>& pyenv_builds() {
  static const std::vector<PythonBuild> versions = {
      {"2.7", "2.7.18"},  {"3.6", "3.6.15"},  {"3.7", "3.7.16"},
      {"3.8", "3.8.18"},  {"3.9", "3.9.18"},  {"3.10", "3.10.13"},
      {"3.11", "3.11.7"}, {"3.12", "3.12.1"}, {"3.13", "3.13.0"},
  };
  return versions;
}

const std::vector<PythonBuild>& debian_builds() {
  static const std::vector<PythonBuild> builds = {
      {"3.13", "python3.13-debian13", "python3.13-debian13"},
      {"3.14", "python3.14", "python3.14"},
      {"3.15", "python3.15", "python3.15"},
  };
  return builds;
}

const std::vector<PythonBuild>& python_builds() {
  static const std::vector<PythonBuild> builds = [] {
    std::vector<PythonBuild> all = pyenv_builds();
    all.insert(all.end(), debian_builds().begin(), debian_builds().end());
    return all;
  }();
  return builds;
}

std::string missing_python_build(const PythonBuild& version) {
  struct stat st {};
  if (stat(version.python().c_str(), &st) == 0 && stat(version.libpython().c_str(), &st) == 0)
    return "";
  std::string reason = version.debian.empty()
                           ? "pyenv CPython " + version.full + " is not installed (" + version.root() + ")"
                           : "Debian's " + version.debian + " is not unpacked (" + version.root() +
                                 ": run scripts/fetch-test-pythons.sh)";
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true") ADD_FAILURE() << reason << ": required under CI=true";
  return reason;
}

std::optional<ChildProcess> ChildProcess::start(const std::vector<std::string>& argv,
                                                std::string& error) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    error = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  return ChildProcess(pid, fds[0]);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), stdout_fd_(other.stdout_fd_), buffer_(std::move(other.buffer_)) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::optional<std::string> ChildProcess::read_line(int timeout_ms) {
  for (;;) {
    std::size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    pollfd pfd{stdout_fd_, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return std::nullopt;
    char chunk[4096];
    ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string ChildProcess::read_all(int timeout_ms) {
  std::string all;
  while (auto line = read_line(timeout_ms)) all += *line + "\n";
  all += buffer_;
  buffer_.clear();
  return all;
}

int ChildProcess::wait() {
  int status = 0;
  if (pid_ <= 0 || waitpid(pid_, &status, 0) != pid_) return -1;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

ReadMemory proc_mem_reader(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/mem";
  auto fd = std::shared_ptr<int>(new int(open(path.c_str(), O_RDONLY | O_CLOEXEC)), [](int* p) {
    if (*p >= 0) close(*p);
    delete p;
  });
  return [fd](uint64_t addr, void* buf, std::size_t len) {
    if (*fd < 0) return false;
    return pread(*fd, buf, len, static_cast<off_t>(addr)) == static_cast<ssize_t>(len);
  };
}

std::string run_command(const std::string& command, int& status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    status = -1;
    return output;
  }
  char chunk[4096];
  std::size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, pipe)) > 0) output.append(chunk, n);
  int raw = pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return output;
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

}  // namespace omniprof::python::test
