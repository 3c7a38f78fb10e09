// Reading a whole file descriptor: /proc files and small config files, whose
// size stat cannot tell in advance.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace omniprof {

// Appends everything left to read on `fd` to `out`, retrying on EINTR.
// Returns 0, or the errno of the read that failed; callers word the error,
// since each knows what the file is.
inline int read_to_end(int fd, std::string& out) {
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out.append(buffer, static_cast<size_t>(n));
  }
}

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
