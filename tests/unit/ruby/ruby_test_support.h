// What the ruby plugin's tests share: Debian's ruby 3.1 (skipped where it is
// not installed, a failure under CI=true), a ruby process running a script,
// and a walk of its main thread's control frames the way rbperf's BPF walk
// records them (rbperf.h), so the reader can be tested on live frames.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "omniprof/support/elf_file.h"
#include "ruby_frame_reader.h"

namespace omniprof::ruby::test {

inline constexpr const char* kRuby = "/usr/bin/ruby";
inline constexpr const char* kLibruby = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1.2";

// Empty if Debian's ruby 3.1 is installed; else the reason, after failing
// the current test under CI=true (GTEST_SKIP is the caller's: see the macro).
std::string missing_ruby();
#define OMNIPROF_REQUIRE_RUBY()                                     \
  do {                                                              \
    std::string missing = ::omniprof::ruby::test::missing_ruby();   \
    if (!missing.empty()) GTEST_SKIP() << missing;                  \
  } while (0)

// The shipped offsets file's entry for `major.minor.patch`.
const RubyVersionOffsets& shipped_offsets(int major, int minor, int patch);

// `ruby SCRIPT` with its stdout on a pipe; killed and reaped on destruction.
class RubyProcess {
 public:
  // Starts it and collects its stdout lines up to and including "ready";
  // nullopt (and `error`) if it exits first.
  static std::optional<RubyProcess> start(const std::string& script, std::string& error);
  // The same with a whole command line (another ruby build, run by its own
  // dynamic loader).
  static std::optional<RubyProcess> start(const std::vector<std::string>& command, std::string& error);
  RubyProcess(RubyProcess&& other) noexcept;
  RubyProcess& operator=(RubyProcess&&) = delete;
  ~RubyProcess();

  pid_t pid() const { return pid_; }
  const std::vector<std::string>& lines() const { return lines_; }
  // SIGKILL and reap now.
  void kill_and_wait();

 private:
  RubyProcess(pid_t pid, std::FILE* out) : pid_(pid), stdout_(out) {}
  pid_t pid_ = -1;
  std::FILE* stdout_ = nullptr;
  std::vector<std::string> lines_;
};

// Reads `pid`'s memory (process_vm_readv, /proc/PID/mem as fallback).
ReadMemory process_reader(pid_t pid);

// The load bias of `path` in `pid` (its offset-0 mapping's start minus the
// first PT_LOAD's page), nullopt if it is not mapped.
std::optional<uint64_t> load_bias(pid_t pid, const ElfFile& elf);

// The frames of the main thread of a ruby 3.1 process, innermost first, as
// rbperf records them: iseq frames (address = iseq, detail = the pc's VALUE index mod 2^29,
// method_entry = the local env's ep[-2]) and C function frames (address =
// detail's method entry). Reaches the EC through ruby_current_vm_ptr ->
// vm->ractor.main_thread -> thread->ec (offsets of 3.1 only, kept here).
Result<std::vector<RubyFrameRecord>> walk_main_thread(const ReadMemory& read, const ElfFile& libruby, uint64_t bias,
                                                     const RubyVersionOffsets& offsets);

// The frames of the thread whose execution context is at `ec`, as above.
Result<std::vector<RubyFrameRecord>> walk_ec(const ReadMemory& read, uint64_t ec, const RubyVersionOffsets& offsets);

std::vector<std::string> split(const std::string& text, char separator);

// A frame a workload printed about its own stack: "frame LABEL|PATH|LINE".
struct PrintedFrame {
  std::string label;  // spin.rb: CRuby's label up to 3.3 ("block in bar", "times"); sleep.rb: the name itself
  std::string path;
  int line = 0;
};
// The "frame " lines of a workload's output, in order; a malformed one
// fails the test.
std::vector<PrintedFrame> printed_frames(const std::vector<std::string>& lines);

// spin.rb's frames: the label caller_locations prints up to 3.3 -> the name
// the reader gives (as CRuby 3.4's backtraces name them).
inline const std::map<std::string, std::string> kSpinRbNames = {
    {"spin", "Foo#spin"}, {"block in bar", "block in Foo#bar"}, {"times", "Integer#times"},
    {"bar", "Foo#bar"},   {"baz", "Foo.baz"},                   {"<main>", "<main>"},
};

}  // namespace omniprof::ruby::test
