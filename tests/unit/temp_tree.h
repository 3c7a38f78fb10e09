// A temporary directory tree for tests of path trust and config files:
// created by mkdtemp under /tmp (root-owned and sticky, which path trust
// accepts), mode 0755, removed with everything in it at scope exit.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace omniprof::testing_support {

class TempTree {
 public:
  explicit TempTree(const std::string& prefix) {
    std::string pattern = "/tmp/omniprof-" + prefix + "-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    root_ = pattern;
    ::chmod(root_.c_str(), 0755);
  }
  ~TempTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::string& root() const { return root_; }
  std::string path(const std::string& relative) const { return root_ + "/" + relative; }

  // A directory (and its parents) under the root, with `mode` set exactly
  // (not masked by the umask).
  std::string dir(const std::string& relative, mode_t mode = 0755) const {
    std::string p = path(relative);
    std::filesystem::create_directories(p);
    ::chmod(p.c_str(), mode);
    return p;
  }
  // A file under the root holding `contents`, with `mode` set exactly.
  std::string file(const std::string& relative, const std::string& contents, mode_t mode = 0644) const {
    std::string p = path(relative);
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p) << contents;
    ::chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::string root_;
};

}  // namespace omniprof::testing_support
