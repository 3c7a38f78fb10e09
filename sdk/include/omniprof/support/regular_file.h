// Opening a file whose path a process named: its mappings, their debug
// files, what /proc says it runs. Such a path may be a FIFO (open and read
// block), a device (reads never end or have side effects), a socket or a
// directory, or be swapped for one of those by a container user between a
// stat() and our open(). So every such open goes through here: it never
// blocks (O_NONBLOCK), never takes a controlling terminal (O_NOCTTY), and
// fstat()s the descriptor it got, refusing anything but a regular file
// before a single byte is read.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <string>

#include "omniprof/support/result.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {

struct RegularFile {
  UniqueFd fd;
  struct stat st {};  // of the descriptor, not of the path
};

// The flags of every open of a process-named path. O_NONBLOCK has no effect
// on reads of a regular file; it only keeps open() of a FIFO from waiting
// for a writer.
inline constexpr int kProcessNamedOpenFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

// "a FIFO", "a socket", "a character device", "a block device", "a
// directory", "a symbolic link", "a regular file", "an unknown file type".
const char* file_type_name(mode_t mode);

// Opens `path` read-only for reading a regular file. Errors name the path
// and, for anything else, what it is: "PATH: is a FIFO, not a regular file".
Result<RegularFile> open_regular_file(const std::string& path);

// Appends everything left to read on `fd` to `out`, retrying on EINTR (a
// /proc file or a small config file, whose size stat cannot tell in
// advance). Returns 0, or the errno of the read that failed; callers word
// the error, since each knows what the file is.
int read_to_end(int fd, std::string& out);

}  // namespace omniprof
