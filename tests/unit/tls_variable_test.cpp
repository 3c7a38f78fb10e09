// find_tls_variable (omniprof/support/tls_variable.h), checked against a live
// process: tests/fixtures/tls/tls_variables prints where its copy of each
// thread-local variable is; what the ELF files say, finished with what the
// loader wrote into the process, must lead to the same addresses.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "omniprof/support/elf_file.h"
#include "omniprof/support/process_memory.h"
#include "omniprof/support/tls_variable.h"

namespace omniprof {
namespace {

const std::string kDir = std::string(OMNIPROF_TEST_FIXTURES_DIR) + "/tls";
constexpr size_t kPrinted = 7;  // lines tls_variables prints

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
    while (printed.size() < kPrinted && std::fgets(line, sizeof(line), from)) {
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

// The variable's address in `process`, from `access` finished by
// locate_tls_variable with what the loader wrote there.
uint64_t located_address(const TlsProcess& process, const TlsVariableAccess& access, const std::string& library,
                         TlsVariableLocation::Base expected_base) {
  ProcessMemory memory(process.pid());
  auto location = locate_tls_variable(access, process.bias_of(library), [&](uint64_t address, void* buffer, size_t size) {
    return static_cast<bool>(memory.read_exact(address, buffer, size));
  });
  EXPECT_TRUE(location) << location.error().message;
  if (!location) return 0;
  EXPECT_EQ(location->base, expected_base);
  if (location->base == TlsVariableLocation::Base::kThreadPointer) {
    return process.printed.at("thread_pointer") + static_cast<uint64_t>(location->offset);
  }
  EXPECT_GT(location->module_id, 0u);
  // glibc x86-64: the DTV pointer after the TCB pointer, 16-byte entries.
  uint64_t dtv = read_u64(memory, process.printed.at("thread_pointer") + 8);
  uint64_t block = read_u64(memory, dtv + location->module_id * 16);
  return block + static_cast<uint64_t>(location->offset);
}

Result<TlsVariableAccess> find_in_fixture(const std::string& file, const std::string& variable) {
  auto elf = ElfFile::open(kDir + "/" + file);
  if (!elf) return elf.error();
  return find_tls_variable(*elf, variable, false);
}

TEST(TlsVariable, LibraryGeneralDynamicIsReachedThroughTheModuleIdTheLoaderWrote) {
  TlsProcess process;
  ASSERT_EQ(process.printed.size(), kPrinted);
  auto access = find_in_fixture("libtls_dynamic.so", "tls_dynamic_value");
  ASSERT_TRUE(access) << access.error().message;
  ASSERT_EQ(access->kind, TlsAccessKind::kModuleSlot);
  EXPECT_EQ(located_address(process, *access, "/libtls_dynamic.so", TlsVariableLocation::Base::kDtv),
            process.printed["tls_dynamic_value"]);
}

TEST(TlsVariable, LibraryInitialExecIsAtTheOffsetTheLoaderWrote) {
  TlsProcess process;
  ASSERT_EQ(process.printed.size(), kPrinted);
  auto access = find_in_fixture("libtls_initial_exec.so", "tls_initial_exec_value");
  ASSERT_TRUE(access) << access.error().message;
  ASSERT_EQ(access->kind, TlsAccessKind::kTpOffsetSlot);
  EXPECT_EQ(located_address(process, *access, "/libtls_initial_exec.so", TlsVariableLocation::Base::kThreadPointer),
            process.printed["tls_initial_exec_value"]);
}

// -mtls-dialect=gnu2, a library linked at start: the loader bound its
// descriptors to static TLS (the argument is the offset from the thread
// pointer), for an exported variable and for a hidden one (reached through
// symbol 0 and its offset as addend; found in .symtab).
TEST(TlsVariable, DescriptorInStaticTlsGivesTheOffsetFromTheThreadPointer) {
  TlsProcess process;
  ASSERT_EQ(process.printed.size(), kPrinted);
  for (const std::string variable : {"tls_descriptor_value", "tls_descriptor_hidden"}) {
    SCOPED_TRACE(variable);
    auto access = find_in_fixture("libtls_descriptor.so", variable);
    ASSERT_TRUE(access) << access.error().message;
    ASSERT_EQ(access->kind, TlsAccessKind::kDescriptor);
    EXPECT_EQ(located_address(process, *access, "/libtls_descriptor.so", TlsVariableLocation::Base::kThreadPointer),
              process.printed[variable]);
  }
}

// A dlopen()ed library whose block does not fit the static TLS surplus: its
// descriptor's argument points to {module id, offset}.
TEST(TlsVariable, DescriptorInDynamicTlsGivesTheModuleIdAndOffset) {
  TlsProcess process;
  ASSERT_EQ(process.printed.size(), kPrinted);
  auto access = find_in_fixture("libtls_descriptor_dynamic.so", "tls_descriptor_dynamic_value");
  ASSERT_TRUE(access) << access.error().message;
  ASSERT_EQ(access->kind, TlsAccessKind::kDescriptor);
  EXPECT_GT(access->offset_in_block, 0u) << "the fixture should put the variable after its padding";
  EXPECT_EQ(located_address(process, *access, "/libtls_descriptor_dynamic.so", TlsVariableLocation::Base::kDtv),
            process.printed["tls_descriptor_dynamic_value"]);
}

// What a process holds in a descriptor that the loader has not bound, or
// that points to something other than the variable's tls_index: an error
// naming the descriptor's address, never a wrong location.
TEST(TlsVariable, UnboundOrForeignDescriptorIsAnErrorNamingItsAddress) {
  auto access = find_in_fixture("libtls_descriptor_dynamic.so", "tls_descriptor_dynamic_value");
  ASSERT_TRUE(access) << access.error().message;
  const uint64_t bias = 0x7f0000000000;
  const uint64_t slot = bias + access->slot_vaddr;
  const uint64_t argument = 0x5500001000;
  std::map<uint64_t, std::vector<uint64_t>> memory;
  auto read = [&](uint64_t address, void* buffer, size_t size) {
    auto it = memory.find(address);
    if (it == memory.end() || it->second.size() * 8 < size) return false;
    std::memcpy(buffer, it->second.data(), size);
    return true;
  };
  auto expect_error = [&](const std::string& what) {
    auto location = locate_tls_variable(*access, bias, read);
    ASSERT_FALSE(location) << what;
    EXPECT_NE(location.error().message.find(fmt::format("{:#x}", slot)), std::string::npos)
        << what << ": " << location.error().message;
  };
  expect_error("unreadable");
  memory[slot] = {0, 0};
  expect_error("all zero");
  memory[slot] = {0x7f0000001234, bias + access->relocation_vaddr};
  expect_error("lazily bound: the argument is the relocation");
  memory[slot] = {0x7f0000001234, argument};
  expect_error("argument unreadable");
  memory[argument] = {1, access->offset_in_block + 8};
  expect_error("another variable's tls_index");
  memory[argument] = {1, access->offset_in_block};
  auto location = locate_tls_variable(*access, bias, read);
  ASSERT_TRUE(location) << location.error().message;
  EXPECT_EQ(location->module_id, 1u);
}

TEST(TlsVariable, ExecutablesOwnVariableIsBelowTheThreadPointer) {
  TlsProcess process;
  ASSERT_EQ(process.printed.size(), kPrinted);
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
