// find_tls_variable (omniprof/support/tls_variable.h), checked against a live
// process: tests/fixtures/tls/tls_variables prints where its copy of each
// thread-local variable is; what the ELF files say, finished with what the
// loader wrote into the process, must lead to the same addresses.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "omniprof/support/elf_file.h"
#include "omniprof/support/process_memory.h"
#include "omniprof/support/tls_variable.h"

namespace omniprof {
namespace {

const std::string kDir = std::string(OMNIPROF_TEST_FIXTURES_DIR) + "/tls";

// tls_variables, running until destroyed; `printed` holds its lines.
class TlsProcess {
 public:
  TlsProcess() {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[1]);
      ::close(out[0]);
      const std::string exe = kDir + "/tls_variables";
      ::execl(exe.c_str(), exe.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    FILE* from = ::fdopen(out[0], "r");
    char line[256];
    while (printed.size() < 4 && std::fgets(line, sizeof(line), from)) {
      std::istringstream fields(line);
      std::string name, address;
      fields >> name >> address;
      printed[name] = std::stoull(address, nullptr, 16);
    }
    std::fclose(from);
  }
  ~TlsProcess() {
    ::close(stdin_);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  // Load bias of the mapped file whose path ends with `name`: its first
  // mapping's start (the fixtures' first PT_LOAD is at vaddr 0).
  uint64_t bias_of(const std::string& name) const {
    std::ifstream maps("/proc/" + std::to_string(pid_) + "/maps");
    for (std::string line; std::getline(maps, line);) {
      if (line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0) {
        return std::stoull(line.substr(0, line.find('-')), nullptr, 16);
      }
    }
    return 0;
  }
  std::map<std::string, uint64_t> printed;

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
};

uint64_t read_u64(ProcessMemory& memory, uint64_t address) {
  uint64_t value = 0;
  EXPECT_TRUE(memory.read_exact(address, &value, sizeof(value))) << std::hex << address;
  return value;
}

TEST(TlsVariable, LibraryGeneralDynamicIsReachedThroughTheModuleIdTheLoaderWrote) {
  TlsProcess process;
  ASSERT_EQ(process.printed.size(), 4u);
  auto elf = ElfFile::open(kDir + "/libtls_dynamic.so");
  ASSERT_TRUE(elf) << elf.error().message;
  auto access = find_tls_variable(*elf, "tls_dynamic_value", false);
  ASSERT_TRUE(access) << access.error().message;
  ASSERT_EQ(access->kind, TlsAccessKind::kModuleSlot);
  ProcessMemory memory(process.pid());
  uint64_t module = read_u64(memory, process.bias_of("/libtls_dynamic.so") + access->slot_vaddr);
  ASSERT_GT(module, 0u);
  // glibc x86-64: the DTV pointer after the TCB pointer, 16-byte entries.
  uint64_t dtv = read_u64(memory, process.printed["thread_pointer"] + 8);
  uint64_t block = read_u64(memory, dtv + module * 16);
  EXPECT_EQ(block + access->offset_in_block, process.printed["tls_dynamic_value"]);
}

TEST(TlsVariable, LibraryInitialExecIsAtTheOffsetTheLoaderWrote) {
  TlsProcess process;
  ASSERT_EQ(process.printed.size(), 4u);
  auto elf = ElfFile::open(kDir + "/libtls_initial_exec.so");
  ASSERT_TRUE(elf) << elf.error().message;
  auto access = find_tls_variable(*elf, "tls_initial_exec_value", false);
  ASSERT_TRUE(access) << access.error().message;
  ASSERT_EQ(access->kind, TlsAccessKind::kTpOffsetSlot);
  ProcessMemory memory(process.pid());
  uint64_t offset = read_u64(memory, process.bias_of("/libtls_initial_exec.so") + access->slot_vaddr);
  EXPECT_EQ(process.printed["thread_pointer"] + offset, process.printed["tls_initial_exec_value"]);
}

TEST(TlsVariable, ExecutablesOwnVariableIsBelowTheThreadPointer) {
  TlsProcess process;
  ASSERT_EQ(process.printed.size(), 4u);
  auto elf = ElfFile::open(kDir + "/tls_variables");
  ASSERT_TRUE(elf) << elf.error().message;
  auto access = find_tls_variable(*elf, "tls_executable_value", true);
  ASSERT_TRUE(access) << access.error().message;
  ASSERT_EQ(access->kind, TlsAccessKind::kTpOffset);
  EXPECT_EQ(process.printed["thread_pointer"] + access->tp_offset, process.printed["tls_executable_value"]);
}

TEST(TlsVariable, LibraryVariableWithoutRelocationOrNameIsAnErrorNamingFileAndVariable) {
  auto elf = ElfFile::open(kDir + "/libtls_dynamic.so");
  ASSERT_TRUE(elf) << elf.error().message;
  auto missing = find_tls_variable(*elf, "no_such_variable", false);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("libtls_dynamic.so"), std::string::npos) << missing.error().message;
  EXPECT_NE(missing.error().message.find("no_such_variable"), std::string::npos) << missing.error().message;
  // A library's variable is never taken for an executable's own block.
  auto executable = ElfFile::open(kDir + "/tls_variables");
  ASSERT_TRUE(executable);
  EXPECT_FALSE(find_tls_variable(*executable, "tls_executable_value", false));
}

// Debian's libruby-3.1 (the Ruby plugin's e2e target) reaches ruby_current_ec
// through its module id: R_X86_64_DTPMOD64 against the symbol.
TEST(TlsVariable, DebianLibrubyCurrentEcIsGeneralDynamic) {
  const std::string path = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1";
  if (::access(path.c_str(), R_OK) != 0) {
    if (std::getenv("CI") && std::string(std::getenv("CI")) == "true") FAIL() << path << " missing in CI";
    GTEST_SKIP() << path << " not installed";
  }
  auto elf = ElfFile::open(path);
  ASSERT_TRUE(elf) << elf.error().message;
  auto access = find_tls_variable(*elf, "ruby_current_ec", false);
  ASSERT_TRUE(access) << access.error().message;
  EXPECT_EQ(access->kind, TlsAccessKind::kModuleSlot);
  auto symbol = elf->find_symbol("ruby_current_ec");
  ASSERT_TRUE(symbol && *symbol);
  EXPECT_EQ(access->offset_in_block, (*symbol)->value);
}

}  // namespace
}  // namespace omniprof
