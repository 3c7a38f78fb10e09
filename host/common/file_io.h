// Reading a whole file descriptor: /proc files and small config files, whose
// size stat cannot tell in advance.
#pragma once

#include <errno.h>
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

}  // namespace omniprof
