// Symbolization across rounds: how long ProfileAssembler takes to name the
// native frames of one realistic round, the first time and the second time.
//
// The round: kProcesses processes (forks of this one, so each maps the same
// libc and libstdc++ at the same addresses, as after a fork or with ASLR
// off; each has its own pid, its own /proc/PID/map_files paths), each with
// kStacksPerProcess stacks of kFramesPerStack frames drawn from a pool of
// distinct function addresses in libc and libstdc++ (a few thousand).
//
// Figures:
//   FileID-keyed (this code): the tracker identified every file (FileID,
//     load bias) when it read the processes; names are cached by (FileID,
//     address) across rounds and processes. Round 1 looks every address up
//     in the parsed files and demangles it, round 2 finds them cached.
//   Baseline, same run: the symbolizer without the symbol cache. The
//     processes are read the same way (files identified and parsed once,
//     under their FileID), then the bench itself names each frame straight
//     through ElfSymbolizer's FileID overloads, as the assembler would
//     without SymbolCache: every frame of every process looks its name up
//     in the parsed file and demangles it again, every round. The
//     difference is what the symbol cache adds.
// Each figure is the median of kRuns runs, from scratch each time.
//
//   build/bench/symbolization_rounds
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/profile_assembler.h"
#include "agent/round_samples.h"
#include "executables/file_id.h"
#include "executables/open_executables.h"
#include "process/proc_maps.h"
#include "process/process_tracker.h"
#include "omniprof/bpf/code_address.h"
#include "omniprof/support/elf_file.h"
#include "symbolize/elf_symbolizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace omniprof;

constexpr int kProcesses = 50;
constexpr int kStacksPerProcess = 40;
constexpr int kFramesPerStack = 12;
constexpr size_t kAddressesPerLibrary = 2000;
constexpr int kRuns = 5;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Function addresses, as this process maps them, of the executable mapping
// whose path contains `name`.
std::vector<uint64_t> function_addresses(const std::vector<ProcMapping>& maps, const std::string& name) {
  const ProcMapping* text = nullptr;
  for (const ProcMapping& m : maps) {
    if (m.executable() && m.path.find(name) != std::string::npos) text = &m;
  }
  if (text == nullptr) return {};
  ElfSymbolizer symbolizer;
  auto vaddr = symbolizer.runtime_to_elf_vaddr(1, text->path, text->start, text->start, text->offset);
  auto file = ElfFile::open(text->path);
  if (!vaddr || !file) return {};
  const uint64_t bias = text->start - *vaddr;
  auto symbols = file->symbols();
  if (!symbols) return {};
  std::vector<uint64_t> addresses;
  for (const ElfSymbol& s : *symbols) {
    const uint64_t runtime = s.value + bias + s.size / 2;
    if (s.size > 0 && text->contains(runtime)) addresses.push_back(runtime);
  }
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  // An even spread over the library, not its first functions only.
  std::vector<uint64_t> picked;
  const size_t step = std::max<size_t>(1, addresses.size() / kAddressesPerLibrary);
  for (size_t i = 0; i < addresses.size() && picked.size() < kAddressesPerLibrary; i += step) {
    picked.push_back(addresses[i]);
  }
  return picked;
}

RoundSamples make_round(const std::vector<pid_t>& pids, int stacks_per_process, const std::vector<uint64_t>& pool) {
  RoundSamples round;
  std::mt19937_64 random(42);
  uint64_t stack_id = 1;
  for (pid_t pid : pids) {
    for (int s = 0; s < stacks_per_process; ++s) {
      StackFrames stack;
      for (int f = 0; f < kFramesPerStack; ++f) {
        omniprof_frame frame{};
        frame.address = pool[random() % pool.size()];
        frame.kind = OMNIPROF_FRAME_NATIVE;
        stack.frames.push_back(frame);
      }
      omniprof_stack_key key{};
      key.pid = static_cast<uint32_t>(pid);
      key.tid = static_cast<uint32_t>(pid);
      key.user_stack_id = stack_id;
      key.kernel_stack_id = OMNIPROF_STACK_ID_NONE;
      round.stacks[stack_id++] = std::move(stack);
      round.counts[key] = 1;
    }
  }
  return round;
}

struct Rounds {
  double scan = 0;  // reading the processes (identifying their files)
  double first = 0;   // naming the native frames of round 1 (AssemblerStats::native_symbolize_ns)
  double second = 0;
  double first_assemble = 0;  // the whole assemble(), profile building included (this code)
  double second_assemble = 0;
  uint64_t frames = 0;
  uint64_t unnamed = 0;
};

// The baseline's naming of one round: each distinct (pid, address) frame
// named and its build ID read through the symbolizer, by the FileID and
// load bias the tracker found. Timed as the assembler times its native
// naming (native_symbolize_ns: the naming of each frame, not the walk over
// the stacks); returns the frames left unnamed.
uint64_t name_without_cache(ElfSymbolizer& symbolizer, const KnownProcesses& known, const RoundSamples& round,
                            double* naming_ms) {
  std::set<std::tuple<uint32_t, uint64_t, bool>> seen;
  uint64_t unnamed = 0;
  Clock::duration naming{};
  for (const auto& [key, count] : round.counts) {
    const ProcessSnapshot* process = known.find(static_cast<int32_t>(key.pid));
    const auto& frames = round.stacks.at(key.user_stack_id).frames;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (!seen.emplace(key.pid, frames[i].address, i == 0).second) continue;
      const uint64_t pc = omniprof_code_address(frames[i].address, i != 0);
      const ProcMapping* mapping = process ? process->mapping_for(pc) : nullptr;
      const ExecutableRef* executable = mapping ? process->executable_for(*mapping) : nullptr;
      bool named = false;
      if (executable && executable->file_id != 0) {
        const auto start = Clock::now();
        const std::string path = process->host_path(*mapping);
        auto symbol = symbolizer.symbolize(executable->file_id, path, pc - executable->load_bias);
        named = symbol && *symbol;
        (void)symbolizer.build_id(executable->file_id, path);
        naming += Clock::now() - start;
      }
      if (!named) unnamed++;
    }
  }
  *naming_ms = std::chrono::duration<double, std::milli>(naming).count();
  return unnamed;
}

// A fresh tracker, symbolizer and assembler; the processes read first (as
// the event thread does during a round), then two rounds named.
Rounds two_rounds(const std::vector<pid_t>& pids, const RoundSamples& round, bool symbol_cache) {
  ElfSymbolizer symbolizer;
  FileIdCache ids;
  OpenExecutables files(ids);
  ProcessTracker processes(nullptr, nullptr);
  processes.track_executables(nullptr, &files, &symbolizer);
  Rounds result;
  auto start = Clock::now();
  processes.scan(std::vector<int32_t>(pids.begin(), pids.end()));
  result.scan = elapsed_ms(start);
  const auto known = processes.snapshot();
  if (!symbol_cache) {
    result.unnamed = name_without_cache(symbolizer, *known, round, &result.first);
    result.unnamed += name_without_cache(symbolizer, *known, round, &result.second);
    return result;
  }
  ProfileAssembler assembler(symbolizer, nullptr, nullptr);
  start = Clock::now();
  ProfileBuilder first = assembler.assemble(round, *known, 10000000, 0, 1000000000);
  result.first_assemble = elapsed_ms(start);
  const uint64_t first_ns = assembler.stats().native_symbolize_ns;
  result.first = first_ns / 1e6;
  start = Clock::now();
  ProfileBuilder second = assembler.assemble(round, *known, 10000000, 0, 1000000000);
  result.second_assemble = elapsed_ms(start);
  result.second = (assembler.stats().native_symbolize_ns - first_ns) / 1e6;
  result.frames = assembler.stats().frames;
  result.unnamed = assembler.stats().unnamed_frames;
  return result;
}

// Measures and prints one scenario.
void scenario(const std::vector<pid_t>& pids, const RoundSamples& round, int stacks_per_process, size_t pool_size) {

  std::vector<double> new_scan, new_first, new_second, old_scan, old_first, old_second;
  std::vector<double> new_first_all, new_second_all;
  Rounds last_new, last_old;
  for (int run = 0; run < kRuns; ++run) {
    last_new = two_rounds(pids, round, true);
    last_old = two_rounds(pids, round, false);
    new_scan.push_back(last_new.scan);
    old_scan.push_back(last_old.scan);
    new_first_all.push_back(last_new.first_assemble);
    new_second_all.push_back(last_new.second_assemble);
    new_first.push_back(last_new.first);
    new_second.push_back(last_new.second);
    old_first.push_back(last_old.first);
    old_second.push_back(last_old.second);
  }

  std::printf("\none round: %zu processes x %d stacks x %d frames, drawn from %zu distinct addresses "
              "(libc + libstdc++), median of %d runs\n",
              pids.size(), stacks_per_process, kFramesPerStack, pool_size, kRuns);
  std::printf("  symbolization (naming native frames):\n");
  std::printf("  %-40s %14s %10s %10s %7s\n", "", "read processes", "round 1", "round 2", "1/2");
  std::printf("  %-40s %11.2f ms %7.2f ms %7.2f ms %6.1fx\n", "FileID-keyed symbol cache (this code)",
              median(new_scan), median(new_first), median(new_second), median(new_first) / median(new_second));
  std::printf("  %-40s %11.2f ms %7.2f ms %7.2f ms %6.1fx\n", "baseline: symbolizer, no symbol cache",
              median(old_scan), median(old_first), median(old_second), median(old_first) / median(old_second));
  std::printf("  (\"read processes\" is ProcessTracker reading them: in both, it opens each mapped file and\n"
              "   parses it once, under its FileID, there)\n");
  std::printf("  whole assemble() (profile building included): this code %.2f / %.2f ms\n", median(new_first_all),
              median(new_second_all));
  std::printf("  round 2 symbolization, baseline / this code: %.1fx\n", median(old_second) / median(new_second));
  std::printf("  distinct (pid, address) frames per round: %lu; unnamed: %lu (this code), %lu (baseline)\n",
              static_cast<unsigned long>(last_new.frames / 2), static_cast<unsigned long>(last_new.unnamed / 2),
              static_cast<unsigned long>(last_old.unnamed / 2));
}

}  // namespace

int main() {
  auto maps = read_proc_maps(::getpid());
  if (!maps) {
    std::fprintf(stderr, "%s\n", maps.error().message.c_str());
    return 1;
  }
  std::vector<uint64_t> pool = function_addresses(*maps, "libc.so");
  std::vector<uint64_t> cxx = function_addresses(*maps, "libstdc++.so");
  pool.insert(pool.end(), cxx.begin(), cxx.end());
  if (pool.size() < 1000) {
    std::fprintf(stderr, "found only %zu function addresses in libc and libstdc++\n", pool.size());
    return 1;
  }

  std::vector<pid_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    pid_t child = ::fork();
    if (child == 0) {
      ::pause();
      ::_exit(0);
    }
    if (child > 0) pids.push_back(child);
  }
  // Many processes sharing their libraries (the common case), then one
  // process with as many stacks (every address new to round 1).
  scenario(pids, make_round(pids, kStacksPerProcess, pool), kStacksPerProcess, pool.size());
  const std::vector<pid_t> one{pids.front()};
  scenario(one, make_round(one, kStacksPerProcess * kProcesses, pool), kStacksPerProcess * kProcesses, pool.size());
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
  return 0;
}
