// ProcessMemory: reading another process's memory (an interpreter's thread
// state, a runtime's version string), for the host API's
// read_process_memory and for plugins that read structures themselves.
//
// process_vm_readv first: one syscall, no descriptor. Where it is refused
// while /proc/PID/mem may still work (a kernel built without
// CONFIG_CROSS_MEMORY_ATTACH: ENOSYS; a seccomp filter that blocks the
// syscall: ENOSYS or EPERM) every read of that ProcessMemory goes through
// pread on /proc/PID/mem instead. Both need the same ptrace access, so a
// process we may not read fails either way; the error is then the one the
// fallback gave.
#pragma once

#include <cstddef>
#include <cstdint>

#include "omniprof/support/result.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {

// Keep one per process read many times (the /proc/PID/mem descriptor stays
// open). Not thread-safe: one per thread, or a lock around it.
class ProcessMemory {
 public:
  explicit ProcessMemory(int32_t pid) : pid_(pid) {}

  int32_t pid() const { return pid_; }

  // Reads up to `len` bytes at `address`. Returns how many were read: `len`,
  // or fewer where the range runs into memory the process has not mapped.
  // Errors (nothing mapped at `address`, the process gone, no permission)
  // name the pid, the address and the length: "pid 42: reading 16 bytes at
  // 0x7f0000001000: no such process (exited?)".
  Result<size_t> read(uint64_t address, void* buffer, size_t len);

  // All `len` bytes at `address`, or an error (a short read is one, and says
  // how many bytes could be read).
  Result<void> read_exact(uint64_t address, void* buffer, size_t len);

  // Same as read(), with errors as a negative errno: the shape of the C host
  // API (omniprof_host_api::read_process_memory).
  int64_t read_or_errno(uint64_t address, void* buffer, size_t len);

 private:
  int open_proc_mem();  // 0 or the errno of the open (ESRCH: the process is gone)
  int64_t read_proc_mem(uint64_t address, void* buffer, size_t len);

  int32_t pid_;
  bool use_proc_mem_ = false;  // process_vm_readv was refused: pread from now on
  UniqueFd proc_mem_;          // /proc/PID/mem, opened on first use
};

}  // namespace omniprof
