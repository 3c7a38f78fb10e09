// ProfileAssembler: turns a round's samples into a pprof profile. Native
// frames are named from ELF symbol tables, kernel frames from kallsyms,
// interpreter frames by the plugin whose slot produced them. A native frame
// that no symbol names is named after the function around it, found from the
// file's unwind information by the native plugin (module+0xSTART of that
// function, so that all its samples are one row); one that no FDE covers
// either stays module+0xoffset; an interpreter frame that cannot be named
// is "[unknown RUNTIME]".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "agent/round_samples.h"
#include "profile/profile_builder.h"
#include "symbolize/function_start_cache.h"
#include "symbolize/symbol_cache.h"

namespace omniprof {

class ProcessTracker;
class ElfSymbolizer;
class KernelSymbols;
class PluginHost;
class ExecutableInfoManager;
struct ProcessSnapshot;
struct ProcMapping;

struct AssemblerStats {
  uint64_t frames = 0;
  uint64_t unnamed_frames = 0;     // kept as module+0xoffset
  // Frames no symbol names, named module+0xSTART after the function (FDE)
  // around them (not in unnamed_frames).
  uint64_t frames_named_by_function_start = 0;
  uint64_t unknown_processes = 0;  // samples of a process gone before it was read
  uint64_t symbolizer_errors = 0;  // unreadable or malformed ELF files
  uint64_t native_symbolize_ns = 0;  // time spent naming native frames (file reads, lookups, demangling)
  uint64_t unreadable_interpreter_frames = 0;  // shown as "[unknown RUNTIME]"
};

class ProfileAssembler {
 public:
  // executables (optional) learns which executables are still sampled, so
  // that the ones nobody samples are the first to make room.
  ProfileAssembler(ProcessTracker& processes, ElfSymbolizer& symbolizer,
                   const KernelSymbols* kernel, PluginHost* plugins,
                   ExecutableInfoManager* executables = nullptr)
      : processes_(processes), symbolizer_(symbolizer), kernel_(kernel), plugins_(plugins),
        executables_(executables), symbols_(symbolizer) {}

  ProfileBuilder assemble(const RoundSamples& round, int64_t period_ns, int64_t start_unix_ns,
                          int64_t duration_ns);
  const AssemblerStats& stats() const { return stats_; }
  // Names of native frames by (FileID, address), kept across rounds.
  const SymbolCache& symbol_cache() const { return symbols_; }
  // Functions around unnamed addresses by FileID, kept across rounds.
  const FunctionStartCache& function_start_cache() const { return function_starts_; }

 private:
  uint64_t native_location(ProfileBuilder& builder, int32_t pid, uint64_t address, bool leaf);
  uint64_t kernel_location(ProfileBuilder& builder, uint64_t address);
  uint64_t plugin_location(ProfileBuilder& builder, int32_t pid, const omniprof_frame& frame);
  uint64_t marker_location(ProfileBuilder& builder, const std::string& name);
  // The start of the function around `elf_address` of file `file_id`, which
  // no symbol names, from the native plugin's function_bounds; nullopt when
  // no FDE covers it or it cannot be found.
  std::optional<uint64_t> unnamed_function_start(uint64_t file_id, const std::string& host_path,
                                                 uint64_t elf_address);

  ProcessTracker& processes_;
  ElfSymbolizer& symbolizer_;
  const KernelSymbols* kernel_;
  PluginHost* plugins_;
  ExecutableInfoManager* executables_;
  AssemblerStats stats_;
  SymbolCache symbols_;
  FunctionStartCache function_starts_;
  // Per assemble(): (pid, address, leaf) -> location id.
  std::map<std::tuple<int32_t, uint64_t, bool>, uint64_t> native_cache_;
  std::unordered_map<uint64_t, uint64_t> kernel_cache_;
  // Per assemble(): (pid, address, detail, kind) -> location id, so a plugin
  // names each distinct interpreter frame once per round.
  using PluginFrameKey = std::tuple<int32_t, uint64_t, uint32_t, uint8_t>;
  std::map<PluginFrameKey, uint64_t> plugin_cache_;
};

}  // namespace omniprof
