// What the interpreter tests (python_test.cpp, ruby_test.cpp) share beside
// the samples (profile_samples.h): the interpreters they run, the scripts
// they start, and waiting for a workload's result file.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace omniprof::e2e {

struct Interpreter {
  std::string name;  // cpython_3_12, debian_ruby_3_1
  std::string path;
};

// gtest prints the parameter of a failed test with this.
inline void PrintTo(const Interpreter& interpreter, std::ostream* out) { *out << interpreter.path; }

// "name=path,name=path" (tests/CMakeLists.txt: OMNIPROF_PYTHON_INTERPRETERS, ...).
inline std::vector<Interpreter> parse_interpreters(const std::string& text) {
  std::vector<Interpreter> list;
  std::istringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    auto eq = entry.find('=');
    if (eq != std::string::npos) list.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
  }
  return list;
}

// A workload script of the source tree (tests/workloads/NAME).
inline std::string script(const std::string& name) {
  return std::string(OMNIPROF_TEST_SOURCE_DIR) + "/workloads/" + name;
}

inline std::string slurp(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// Waits up to `limit` for a file the workload renames into place when whole.
inline bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace omniprof::e2e
