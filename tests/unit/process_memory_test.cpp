// ProcessMemory (omniprof/support/process_memory.h): reads of another
// process, short reads at the end of a mapping, errors naming pid and
// address, and the /proc/PID/mem fallback where process_vm_readv is refused.
#include "omniprof/support/process_memory.h"

#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "plugins/plugin_host.h"

namespace omniprof {
namespace {

// Two pages, the second unmapped: reads that start in the first run into
// memory nothing maps.
struct PageThenHole {
  PageThenHole() {
    page_size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* area = ::mmap(nullptr, 2 * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) std::abort();
    page = static_cast<char*>(area);
    ::munmap(page + page_size, page_size);
    std::memset(page, 'a', page_size);
  }
  ~PageThenHole() { ::munmap(page, page_size); }
  uint64_t address(size_t offset) const { return reinterpret_cast<uint64_t>(page + offset); }

  size_t page_size = 0;
  char* page = nullptr;
};

// A child that writes `text` into `buffer` (its copy, after fork) and then
// waits to be killed. The parent reads the child's copy at the same address.
class ChildWriting {
 public:
  ChildWriting(char* buffer, const char* text) {
    int ready[2];
    if (::pipe(ready) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      std::strcpy(buffer, text);
      char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    if (::read(ready[0], &byte, 1) != 1) std::abort();
    ::close(ready[0]);
  }
  ~ChildWriting() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

TEST(ProcessMemory, ReadsAnotherProcessAtAnAddress) {
  static char buffer[32] = "parent";
  ChildWriting child(buffer, "child's own copy");
  ProcessMemory memory(child.pid());
  char out[32] = {};
  auto n = memory.read(reinterpret_cast<uint64_t>(buffer), out, sizeof(out));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, sizeof(out));
  EXPECT_STREQ(out, "child's own copy");
  EXPECT_STREQ(buffer, "parent");  // the parent's copy: not what was read
}

TEST(ProcessMemory, ShortReadWhereTheMappingEnds) {
  PageThenHole area;
  ProcessMemory memory(::getpid());
  std::string out(64, '\0');
  auto n = memory.read(area.address(area.page_size - 16), out.data(), out.size());
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 16u);
  EXPECT_EQ(out.substr(0, 16), std::string(16, 'a'));

  auto exact = memory.read_exact(area.address(area.page_size - 16), out.data(), out.size());
  ASSERT_FALSE(exact);
  EXPECT_NE(exact.error().message.find("only 16 are mapped"), std::string::npos) << exact.error().message;
}

TEST(ProcessMemory, UnmappedAddressIsAnErrorNamingPidAndAddress) {
  PageThenHole area;
  ProcessMemory memory(::getpid());
  char out[8];
  const uint64_t hole = area.address(area.page_size);
  auto n = memory.read(hole, out, sizeof(out));
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().message, fmt::format("pid {}: reading 8 bytes at {:#x}: nothing mapped there", ::getpid(), hole));
  EXPECT_EQ(memory.read_or_errno(hole, out, sizeof(out)), -EFAULT);
}

TEST(ProcessMemory, ExitedProcessIsAnError) {
  static char buffer[16] = "x";
  ChildWriting child(buffer, "gone soon");
  const pid_t pid = child.pid();
  child.stop();  // killed and reaped: the pid names nothing (until reused)
  ProcessMemory memory(pid);
  char out[16];
  auto n = memory.read(reinterpret_cast<uint64_t>(buffer), out, sizeof(out));
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message.find(fmt::format("pid {}: reading 16 bytes at {:#x}: ", pid,
                                               reinterpret_cast<uint64_t>(buffer))),
            std::string::npos)
      << n.error().message;
  EXPECT_EQ(memory.read_or_errno(reinterpret_cast<uint64_t>(buffer), out, sizeof(out)), -ESRCH);
}

// In a child (a death test): a seccomp filter makes process_vm_readv fail
// with ENOSYS, as on a kernel without CONFIG_CROSS_MEMORY_ATTACH; reads must
// then come from /proc/PID/mem, with the same short reads and errors.
void read_with_process_vm_readv_refused() {
  PageThenHole area;
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::fprintf(stderr, "cannot install the seccomp filter: %s\n", std::strerror(errno));
    std::exit(2);
  }
  char probe = 0;
  iovec local{&probe, 1};
  iovec remote{area.page, 1};
  if (::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) != -1 || errno != ENOSYS) {
    std::fprintf(stderr, "process_vm_readv is not refused\n");
    std::exit(3);
  }
  ProcessMemory memory(::getpid());
  std::string out(64, '\0');
  auto n = memory.read(area.address(area.page_size - 16), out.data(), out.size());
  if (!n || *n != 16 || out.substr(0, 16) != std::string(16, 'a')) {
    std::fprintf(stderr, "short read through /proc/PID/mem: %s\n", n ? std::to_string(*n).c_str() : n.error().message.c_str());
    std::exit(4);
  }
  char byte = 0;
  if (memory.read_or_errno(area.address(area.page_size), &byte, 1) != -EFAULT) {
    std::fprintf(stderr, "an unmapped address through /proc/PID/mem is not EFAULT\n");
    std::exit(5);
  }
  std::exit(0);
}

TEST(ProcessMemoryDeathTest, FallsBackToProcPidMemWhenProcessVmReadvIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(read_with_process_vm_readv_refused(), ::testing::ExitedWithCode(0), "");
}

// What plugins call: the host API's read_process_memory is ProcessMemory,
// bytes read or a negative errno.
TEST(ProcessMemory, HostApiReadsThroughIt) {
  static char buffer[16] = "before fork";
  ChildWriting child(buffer, "in the child");
  PluginHost host(nullptr, nullptr);
  const omniprof_host_api* api = host.host_api();
  char out[16] = {};
  EXPECT_EQ(api->read_process_memory(api->host, child.pid(), reinterpret_cast<uint64_t>(buffer), out, sizeof(out)),
            static_cast<int64_t>(sizeof(out)));
  EXPECT_STREQ(out, "in the child");
  PageThenHole area;
  EXPECT_EQ(api->read_process_memory(api->host, ::getpid(), area.address(area.page_size - 4), out, sizeof(out)), 4);
  EXPECT_EQ(api->read_process_memory(api->host, ::getpid(), area.address(area.page_size), out, sizeof(out)), -EFAULT);
}

}  // namespace
}  // namespace omniprof
