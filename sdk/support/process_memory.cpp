#include "omniprof/support/process_memory.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

#include <fmt/format.h>

namespace omniprof {
namespace {

std::string describe_errno(int error) {
  switch (error) {
    case EFAULT: return "nothing mapped there";
    case ESRCH: return "no such process (exited?)";
    default: return std::strerror(error);
  }
}

}  // namespace

int ProcessMemory::open_proc_mem() {
  if (proc_mem_.valid()) return 0;
  proc_mem_.reset(::open(fmt::format("/proc/{}/mem", pid_).c_str(), O_RDONLY | O_CLOEXEC));
  if (proc_mem_.valid()) return 0;
  return errno == ENOENT ? ESRCH : errno;
}

int64_t ProcessMemory::read_or_errno(uint64_t address, void* buffer, size_t len) {
  if (len == 0) return 0;
  if (!use_proc_mem_) {
    iovec local{buffer, len};
    iovec remote{reinterpret_cast<void*>(address), len};
    const ssize_t n = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n >= 0) return n;
    const int refused = errno;
    if (refused != ENOSYS && refused != EPERM) return -refused;
    // Refused as a syscall, not for this address: try /proc/PID/mem. If it
    // cannot even be opened, the refusal stands (EPERM: we may not read this
    // process at all), unless the process is gone.
    if (const int error = open_proc_mem(); error != 0) return error == ESRCH ? -ESRCH : -refused;
    use_proc_mem_ = true;
  }
  return read_proc_mem(address, buffer, len);
}

int64_t ProcessMemory::read_proc_mem(uint64_t address, void* buffer, size_t len) {
  if (const int error = open_proc_mem(); error != 0) return -error;
  // Offsets of /proc/PID/mem are addresses; pread refuses negative ones, and
  // no user-space address is that high.
  constexpr uint64_t kMaxOffset = static_cast<uint64_t>(std::numeric_limits<off_t>::max());
  if (len > kMaxOffset || address > kMaxOffset - len) return -EFAULT;
  auto* out = static_cast<char*>(buffer);
  size_t done = 0;
  while (done < len) {
    const ssize_t n = ::pread(proc_mem_.get(), out + done, len - done, static_cast<off_t>(address + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (done > 0) break;  // the rest is unmapped: a short read, like process_vm_readv's
      // /proc/PID/mem says EIO where process_vm_readv says EFAULT.
      return errno == EIO ? -EFAULT : -errno;
    }
    if (n == 0) {
      // The descriptor is bound to the memory of the process it was opened
      // for, and that is gone: the process exited.
      if (done == 0) return -ESRCH;
      break;
    }
    done += static_cast<size_t>(n);
  }
  return static_cast<int64_t>(done);
}

Result<size_t> ProcessMemory::read(uint64_t address, void* buffer, size_t len) {
  const int64_t n = read_or_errno(address, buffer, len);
  if (n < 0) {
    return make_error(fmt::format("pid {}: reading {} bytes at {:#x}: {}", pid_, len, address,
                                  describe_errno(static_cast<int>(-n))));
  }
  return static_cast<size_t>(n);
}

Result<void> ProcessMemory::read_exact(uint64_t address, void* buffer, size_t len) {
  auto n = read(address, buffer, len);
  if (!n) return n.error();
  if (*n != len) {
    return make_error(fmt::format("pid {}: reading {} bytes at {:#x}: only {} are mapped", pid_, len, address, *n));
  }
  return ok();
}

}  // namespace omniprof
