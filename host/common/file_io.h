// Reading the first bytes of a file whose absence means "nothing to say"
// (read_to_end itself is the SDK's: plugins read /proc files too).
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "omniprof/support/regular_file.h"

namespace omniprof {

// The first `limit` bytes of the file at `path`; empty if it cannot be
// opened or read (for files whose absence means "nothing to say": a
// process's /proc entries, a container runtime's state).
inline std::string read_file_prefix(const std::string& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  const int err = read_to_end(fd, text);
  ::close(fd);
  if (err != 0) return {};
  if (text.size() > limit) text.resize(limit);
  return text;
}

}  // namespace omniprof
