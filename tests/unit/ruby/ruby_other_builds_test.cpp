// The shipped offsets of a CRuby other than Debian 12's 3.1, checked on a
// live process: Debian 13 (trixie)'s ruby 3.3, a build of the public 3.3
// sources, unpacked with its own C library by scripts/fetch-test-rubies.sh
// and run through its own dynamic loader. Its control frames are walked as
// rbperf's BPF walk does and named by the reader with ruby.yaml's "3.3"
// entry; the names, paths and lines must be the ones the script's own
// caller_locations printed. (The plugin itself cannot hand off to this
// build: Debian 13 hides rb_vm_exec and ruby_current_ec, so only with its
// -dbgsym package would a process of it be profiled as Ruby.)
#include <elf.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "rbperf.h"
#include "ruby_frame_reader.h"
#include "ruby_test_support.h"
#include "ruby_version.h"

namespace omniprof::ruby {
namespace {

namespace fs = std::filesystem;

struct UnpackedRuby {
  std::string root;
  std::string libdir;   // root/usr/lib/x86_64-linux-gnu
  std::string libruby;  // the real file, as /proc/PID/maps names it

  std::vector<std::string> command(const std::string& script) const {
    return {libdir + "/ld-linux-x86-64.so.2", "--library-path", libdir, root + "/usr/bin/ruby3.3", "--disable-gems",
            "-I", root + "/usr/lib/ruby/3.3.0", "-I", libdir + "/ruby/3.3.0", script};
  }
};

// The unpacked ruby 3.3, or the reason it is not there (a failure under
// CI=true: scripts/install-deps.sh unpacks it).
std::optional<UnpackedRuby> trixie_ruby(std::string& missing) {
  const char* dir = std::getenv("OMNIPROF_TEST_RUBIES");
  UnpackedRuby ruby;
  ruby.root = std::string(dir ? dir : "/opt/omniprof/test-rubies") + "/ruby-3.3";
  ruby.libdir = ruby.root + "/usr/lib/x86_64-linux-gnu";
  std::error_code error;
  fs::path libruby = fs::canonical(ruby.libdir + "/libruby-3.3.so.3.3", error);
  if (error || access((ruby.root + "/usr/bin/ruby3.3").c_str(), X_OK) != 0) {
    missing = ruby.root + " holds no ruby 3.3: run scripts/fetch-test-rubies.sh";
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") ADD_FAILURE() << missing << " (required under CI=true)";
    return std::nullopt;
  }
  ruby.libruby = libruby.string();
  return ruby;
}

// The thread pointer (fs base) of `pid`'s main thread, read while ptrace
// holds it for a moment.
Result<uint64_t> thread_pointer(pid_t pid) {
  if (ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) != 0) return make_error("PTRACE_SEIZE failed");
  uint64_t fs_base = 0;
  bool read = false;
  if (ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr) == 0) {
    int status = 0;
    if (waitpid(pid, &status, __WALL) == pid) {
      user_regs_struct regs{};
      read = ptrace(PTRACE_GETREGS, pid, nullptr, &regs) == 0;
      fs_base = regs.fs_base;
    }
  }
  ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
  if (!read) return make_error("cannot read the registers of " + std::to_string(pid));
  return fs_base;
}

// The main thread's execution context. This build has no symbol for
// ruby_current_ec (local dynamic TLS: a DTPMOD64 slot against symbol 0),
// so each pointer of libruby's TLS block is tried: the EC is the one whose
// cfp lies inside its own vm_stack.
Result<uint64_t> main_thread_ec(const ReadMemory& read, const ElfFile& libruby, uint64_t bias, uint64_t tp,
                                const RubyVersionOffsets& offsets) {
  auto u64 = [&](uint64_t address) -> std::optional<uint64_t> {
    uint64_t value = 0;
    if (!read(address, &value, 8)) return std::nullopt;
    return value;
  };
  auto relocations = libruby.section_bytes(".rela.dyn");
  if (!relocations) return relocations.error();
  std::optional<uint64_t> slot;
  for (std::size_t at = 0; at + sizeof(Elf64_Rela) <= relocations->size(); at += sizeof(Elf64_Rela)) {
    Elf64_Rela rela;
    std::memcpy(&rela, relocations->data() + at, sizeof(rela));
    if (ELF64_R_TYPE(rela.r_info) == R_X86_64_DTPMOD64 && ELF64_R_SYM(rela.r_info) == 0) slot = rela.r_offset;
  }
  if (!slot || !libruby.tls_segment()) return make_error(libruby.path() + ": no local dynamic TLS");
  auto module = u64(bias + *slot);
  auto dtv = u64(tp + 8);  // glibc x86-64: tcbhead_t {tcb, dtv, ...}
  if (!module || !dtv) return make_error("module id or DTV unreadable");
  auto block = u64(*dtv + *module * 16);
  if (!block) return make_error("TLS block unreadable");
  std::optional<uint64_t> found;
  const ruby_offsets& o = offsets.bpf;
  for (uint64_t at = 0; at + 8 <= libruby.tls_segment()->memsz; at += 8) {
    auto ec = u64(*block + at);
    if (!ec || *ec == 0) continue;
    auto stack = u64(*ec + o.ec_vm_stack);
    auto size = u64(*ec + o.ec_vm_stack_size);
    auto cfp = u64(*ec + o.ec_cfp);
    if (!stack || !size || !cfp || *size < 1024 || *size > (1u << 24)) continue;
    if (*cfp < *stack || *cfp >= *stack + *size * 8) continue;
    if (found) return make_error("more than one pointer of libruby's TLS block looks like an EC");
    found = *ec;
  }
  if (!found) return make_error("no pointer of libruby's TLS block is an EC with these offsets");
  return *found;
}

class TrixieRuby : public ::testing::Test {
 protected:
  // Starts `script` and waits until the walk's innermost frame is
  // `innermost`; fills expected_ from what the script printed.
  void start(const std::string& script, const std::string& innermost) {
    std::string missing;
    auto ruby = trixie_ruby(missing);
    if (!ruby) GTEST_SKIP() << missing;
    std::string error;
    auto started = test::RubyProcess::start(ruby->command(std::string(OMNIPROF_RUBY_TEST_DIR) + "/" + script), error);
    ASSERT_TRUE(started) << error;
    process_.emplace(std::move(*started));
    expected_ = test::printed_frames(process_->lines());
    auto elf = ElfFile::open(ruby->libruby);
    ASSERT_TRUE(elf) << elf.error().message;
    libruby_.emplace(std::move(*elf));
    auto version = read_ruby_version(*libruby_);
    ASSERT_TRUE(version) << version.error().message;
    ASSERT_EQ(version->major * 10 + version->minor, 33) << version->to_string();
    offsets_ = &test::shipped_offsets(version->major, version->minor, version->patch);
    auto bias = test::load_bias(process_->pid(), *libruby_);
    ASSERT_TRUE(bias) << ruby->libruby << " not mapped in " << process_->pid();
    bias_ = *bias;
    // Stripped: the ID table is found by decoding rb_sym_immortal_count.
    auto symbols = find_global_symbols(*libruby_);
    ASSERT_TRUE(symbols) << symbols.error().message;
    addresses_.global_symbols = bias_ + *symbols;
    read_ = test::process_reader(process_->pid());
    RubyFrameCache cache;
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto tp = thread_pointer(process_->pid());
      ASSERT_TRUE(tp) << tp.error().message;
      auto ec = main_thread_ec(read_, *libruby_, bias_, *tp, *offsets_);
      ASSERT_TRUE(ec) << ec.error().message;
      auto frames = test::walk_ec(read_, *ec, *offsets_);
      ASSERT_TRUE(frames) << frames.error().message;
      if (!frames->empty()) {
        auto name = cache.name_frame(pid(), read_, *offsets_, addresses_, frames->front());
        if (name && name->function == innermost) {
          frames_ = std::move(*frames);
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the workload never reached " << innermost;
  }

  // Names every expected frame; `qualified` maps a printed label to the
  // reader's name (empty: the label is the name).
  void expect_names(const std::map<std::string, std::string>& qualified) {
    ASSERT_GE(frames_.size(), expected_.size());
    RubyFrameCache cache;
    for (std::size_t i = 0; i < expected_.size(); ++i) {
      SCOPED_TRACE("frame " + std::to_string(i) + " (" + expected_[i].label + ")");
      auto name = cache.name_frame(pid(), read_, *offsets_, addresses_, frames_[i]);
      ASSERT_TRUE(name) << name.error().message;
      EXPECT_EQ(name->function, qualified.empty() ? expected_[i].label : qualified.at(expected_[i].label));
      if (frames_[i].detail == RBPERF_DETAIL_CFUNC) {
        EXPECT_EQ(name->file, "");
        EXPECT_EQ(name->line, 0);
      } else {
        EXPECT_EQ(name->file, expected_[i].path);
        EXPECT_EQ(name->line, expected_[i].line);
      }
    }
  }

  uint32_t pid() const { return static_cast<uint32_t>(process_->pid()); }

  std::optional<test::RubyProcess> process_;
  std::vector<test::PrintedFrame> expected_;
  std::optional<ElfFile> libruby_;
  const RubyVersionOffsets* offsets_ = nullptr;
  uint64_t bias_ = 0;
  RubyProcessAddresses addresses_;
  ReadMemory read_;
  std::vector<RubyFrameRecord> frames_;
};

// Classes through 3.3's classext_classpath, singleton methods through its
// attached object, line tables, and Integer#times, which 3.3 defines in Ruby
// (<internal:numeric>): an iseq frame here, a C function in 3.1.
TEST_F(TrixieRuby, Ruby33FramesAreNamedAsCrubyReportsThem) {
  start("spin.rb", "Foo#spin");
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_EQ(expected_.size(), test::kSpinRbNames.size());
  expect_names(test::kSpinRbNames);
  EXPECT_NE(frames_[2].detail, RBPERF_DETAIL_CFUNC) << "3.3's Integer#times is Ruby code";
}

// Modules, a module's singleton method, a top-level method, and a C
// function of Kernel's singleton class (Kernel.sleep).
TEST_F(TrixieRuby, Ruby33ModulesAndTopLevelMethods) {
  start("sleep.rb", "Kernel.sleep");
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_EQ(expected_.size(), 4u);
  expect_names({});
}

}  // namespace
}  // namespace omniprof::ruby
