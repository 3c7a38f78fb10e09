#include "omniprof/support/regular_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace omniprof {

const char* file_type_name(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symbolic link";
    default: return "an unknown file type";
  }
}

Result<RegularFile> open_regular_file(const std::string& path) {
  RegularFile file;
  file.fd.reset(::open(path.c_str(), kProcessNamedOpenFlags));
  if (!file.fd.valid()) {
    const int error = errno;
    // open() of a socket fails (ENXIO) and of a directory may succeed or
    // fail (EISDIR): say what the path is rather than a bare errno.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      return make_error(fmt::format("{}: is {}, not a regular file", path, file_type_name(st.st_mode)));
    }
    return make_error(fmt::format("{}: {}", path, std::strerror(error)));
  }
  if (::fstat(file.fd.get(), &file.st) != 0) {
    return make_error(fmt::format("{}: fstat: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(file.st.st_mode)) {
    return make_error(fmt::format("{}: is {}, not a regular file", path, file_type_name(file.st.st_mode)));
  }
  return file;
}

int read_to_end(int fd, std::string& out) {
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace omniprof
