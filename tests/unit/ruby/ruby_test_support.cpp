#include "ruby_test_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "omniprof/support/process_memory.h"
#include "rbperf.h"
#include "ruby_offsets.h"

namespace omniprof::ruby::test {

std::string missing_ruby() {
  for (const char* path : {kRuby, kLibruby}) {
    if (access(path, R_OK) == 0) continue;
    std::string reason = std::string(path) + " is missing: apt-get install ruby (Debian's 3.1)";
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") ADD_FAILURE() << reason << " (required under CI=true)";
    return reason;
  }
  return "";
}

const RubyVersionOffsets& shipped_offsets(int major, int minor, int patch) {
  static const RubyOffsetsTable table = RubyOffsetsTable::load_file(OMNIPROF_RUBY_YAML);
  const RubyVersionOffsets* offsets = table.find(major, minor, patch);
  if (!offsets) throw std::runtime_error("ruby.yaml has no entry for " + std::to_string(major) + "." +
                                         std::to_string(minor) + "." + std::to_string(patch));
  return *offsets;
}

std::optional<RubyProcess> RubyProcess::start(const std::string& script, std::string& error) {
  return start(std::vector<std::string>{kRuby, script}, error);
}

std::optional<RubyProcess> RubyProcess::start(const std::vector<std::string>& command, std::string& error) {
  std::vector<char*> argv;
  for (const std::string& argument : command) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    error = "pipe2 failed";
    return std::nullopt;
  }
  pid_t pid = fork();
  if (pid < 0) {
    error = "fork failed";
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  RubyProcess process(pid, fdopen(fds[0], "r"));
  char line[4096];
  while (std::fgets(line, sizeof(line), process.stdout_)) {
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    process.lines_.push_back(text);
    if (text == "ready") return process;
  }
  error = command.front() + " " + command.back() + " exited before printing ready";
  return std::nullopt;
}

RubyProcess::RubyProcess(RubyProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), stdout_(std::exchange(other.stdout_, nullptr)), lines_(std::move(other.lines_)) {}

void RubyProcess::kill_and_wait() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

RubyProcess::~RubyProcess() {
  kill_and_wait();
  if (stdout_) std::fclose(stdout_);
}

ReadMemory process_reader(pid_t pid) {
  auto memory = std::make_shared<ProcessMemory>(pid);
  return [memory](uint64_t address, void* buffer, std::size_t length) {
    return memory->read_exact(address, buffer, length).ok();
  };
}

std::optional<uint64_t> load_bias(pid_t pid, const ElfFile& elf) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  uint64_t first_vaddr = elf.load_segments().empty() ? 0 : elf.load_segments().front().vaddr & ~uint64_t{0xfff};
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode, path;
    fields >> range >> perms >> offset >> device >> inode >> path;
    if (path != elf.path() || std::stoull(offset, nullptr, 16) != 0) continue;
    return std::stoull(range.substr(0, range.find('-')), nullptr, 16) - first_vaddr;
  }
  return std::nullopt;
}

namespace {

// Ruby 3.1 (rbspy's ruby_3_1_2.rs, LP64): rb_vm_t.ractor.main_thread,
// rb_thread_t.ec.
constexpr uint64_t kVmMainThread = 40;
constexpr uint64_t kThreadEc = 40;
constexpr std::size_t kMaxFrames = 4096;

}  // namespace

Result<std::vector<RubyFrameRecord>> walk_main_thread(const ReadMemory& read, const ElfFile& libruby, uint64_t bias,
                                                     const RubyVersionOffsets& offsets) {
  auto u64 = [&](uint64_t address, const char* what) -> Result<uint64_t> {
    uint64_t value;
    if (!read(address, &value, 8)) return make_error(std::string(what) + " unreadable at " + std::to_string(address));
    return value;
  };
  auto vm_symbol = libruby.find_symbol("ruby_current_vm_ptr");
  if (!vm_symbol || !*vm_symbol) return make_error("no ruby_current_vm_ptr in " + libruby.path());
  auto vm = u64(bias + (*vm_symbol)->value, "ruby_current_vm_ptr");
  if (!vm) return vm.error();
  auto thread = u64(*vm + kVmMainThread, "vm->ractor.main_thread");
  if (!thread) return thread.error();
  auto ec = u64(*thread + kThreadEc, "thread->ec");
  if (!ec) return ec.error();
  return walk_ec(read, *ec, offsets);
}

Result<std::vector<RubyFrameRecord>> walk_ec(const ReadMemory& read, uint64_t ec_address, const RubyVersionOffsets& offsets) {
  auto u64 = [&](uint64_t address, const char* what) -> Result<uint64_t> {
    uint64_t value;
    if (!read(address, &value, 8)) return make_error(std::string(what) + " unreadable at " + std::to_string(address));
    return value;
  };
  const uint64_t* ec = &ec_address;
  const ruby_offsets& o = offsets.bpf;
  auto stack = u64(*ec + o.ec_vm_stack, "ec->vm_stack");
  auto stack_size = u64(*ec + o.ec_vm_stack_size, "ec->vm_stack_size");
  auto cfp = u64(*ec + o.ec_cfp, "ec->cfp");
  if (!stack || !stack_size || !cfp) return make_error("EC unreadable");
  uint64_t end = *stack + *stack_size * 8;  // the first control frame sits at the stack's end
  std::vector<RubyFrameRecord> frames;
  for (uint64_t frame = *cfp; frame < end && frames.size() < kMaxFrames; frame += o.control_frame_size) {
    auto pc = u64(frame + o.cfp_pc, "cfp->pc");
    auto iseq = u64(frame + o.cfp_iseq, "cfp->iseq");
    auto ep = u64(frame + o.cfp_ep, "cfp->ep");
    if (!pc || !iseq || !ep) return make_error("control frame unreadable");
    auto env_flags = u64(*ep, "ep[0]");
    if (!env_flags) return env_flags.error();
    if ((*env_flags & RUBY_VM_FRAME_MAGIC_MASK) == RUBY_VM_FRAME_MAGIC_CFUNC) {
      auto entry = u64(*ep + 8 * RUBY_VM_ENV_INDEX_ME_CREF, "ep[-2]");
      if (!entry) return entry.error();
      frames.push_back({*entry, RBPERF_DETAIL_CFUNC, *entry});
      continue;
    }
    if (*iseq == 0 || *pc == 0) continue;
    // The local env: follow ep[-1] (tagged) until VM_ENV_FLAG_LOCAL.
    uint64_t local = *ep;
    for (int depth = 0; depth < 64; ++depth) {
      auto flags = u64(local, "env flags");
      if (!flags) return flags.error();
      if (*flags & RUBY_VM_ENV_FLAG_LOCAL) break;
      auto previous = u64(local + 8 * RUBY_VM_ENV_INDEX_SPECVAL, "ep[-1]");
      if (!previous) return previous.error();
      local = *previous & ~uint64_t{3};
    }
    auto entry = u64(local + 8 * RUBY_VM_ENV_INDEX_ME_CREF, "local ep[-2]");
    if (!entry) return entry.error();
    frames.push_back({*iseq, static_cast<uint32_t>(*pc >> 3) & RBPERF_DETAIL_PC_MASK, *entry});
  }
  return frames;
}

std::vector<PrintedFrame> printed_frames(const std::vector<std::string>& lines) {
  std::vector<PrintedFrame> frames;
  for (const std::string& line : lines) {
    if (!line.starts_with("frame ")) continue;
    std::vector<std::string> parts = split(line.substr(6), '|');
    if (parts.size() != 3) {
      ADD_FAILURE() << "not LABEL|PATH|LINE: " << line;
      continue;
    }
    frames.push_back({parts[0], parts[1], std::stoi(parts[2])});
  }
  return frames;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

}  // namespace omniprof::ruby::test
