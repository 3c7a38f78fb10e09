// ProfileAssembler: turns a round's samples into pprof profiles. Native
// frames are named from ELF symbol tables, kernel frames from kallsyms,
// interpreter frames by the plugin whose slot produced them. A native frame
// that no symbol names is named after the function around it, found from the
// file's unwind information by the native plugin (module+0xSTART of that
// function, so that all its samples are one row); one that no FDE covers
// either stays module+0xoffset; an interpreter frame that cannot be named
// is "[unknown RUNTIME]".
//
// Two steps: every distinct frame of the round is named once (a NamedFrame,
// with its role for folding), then each profile asked for is built from the
// named frames, with the interpreter's own native frames folded
// (agent/stack_folding.h) or kept. One round can so give both views.
//
// A round is named from what was known of its processes when it closed
// (KnownProcesses), never calling back for more: what it lacked, it says
// (NamingRequests), for the agent to hand on.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>
#include <unordered_map>
#include <unordered_set>

#include "agent/round_samples.h"
#include "agent/stack_folding.h"
#include "process/process_snapshot.h"
#include "profile/profile_builder.h"
#include "symbolize/function_start_cache.h"
#include "symbolize/symbol_cache.h"

namespace omniprof {

class ElfSymbolizer;
class KernelSymbols;
class PluginHost;

// What naming a round learnt that others act on.
struct NamingRequests {
  // Processes with a native frame outside every mapping known (a library
  // loaded since they were read): to be read again for the next round.
  std::unordered_set<int32_t> stale_mappings;
  // Files that had a frame: still sampled, so not the first to make room.
  std::unordered_set<uint64_t> sampled_files;
};

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
  uint64_t folded_frames = 0;  // interpreter-internal native frames folded (the first folded view's)
};

class ProfileAssembler {
 public:
  ProfileAssembler(ElfSymbolizer& symbolizer, const KernelSymbols* kernel, PluginHost* plugins)
      : kernel_(kernel), plugins_(plugins), symbols_(symbolizer) {}
  // The kernel's symbols once read (null: kernel frames are not named);
  // between namings only.
  void set_kernel_symbols(const KernelSymbols* kernel) { kernel_ = kernel; }

  // One profile per entry of `fold` (true: the interpreter's own native
  // frames folded into the interpreter frames they run; false: every frame),
  // all from one naming of the round's frames, by what `processes` holds.
  std::vector<ProfileBuilder> assemble(const RoundSamples& round, const KnownProcesses& processes,
                                       int64_t period_ns, int64_t start_unix_ns, int64_t duration_ns,
                                       const std::vector<bool>& fold);
  ProfileBuilder assemble(const RoundSamples& round, const KnownProcesses& processes, int64_t period_ns,
                          int64_t start_unix_ns, int64_t duration_ns, bool fold = true) {
    return std::move(
        assemble(round, processes, period_ns, start_unix_ns, duration_ns, std::vector<bool>{fold}).front());
  }
  // What the last assemble() learnt (NamingRequests).
  const NamingRequests& requests() const { return requests_; }
  const AssemblerStats& stats() const { return stats_; }
  // The comment each profile carries to say which view it is.
  static const char* const kFoldedComment;
  static const char* const kKeptComment;
  // Names of native frames by (FileID, address), kept across rounds.
  const SymbolCache& symbol_cache() const { return symbols_; }
  // Functions around unnamed addresses by FileID, kept across rounds.
  const FunctionStartCache& function_start_cache() const { return function_starts_; }

 private:
  // A frame as named, before it is put in a profile.
  struct NamedFrame {
    uint32_t mapping = 0;  // 1 + index into mappings_, 0 = none
    uint64_t address = 0;
    ProfileLine line;
    FrameRole role = FrameRole::kNative;
  };
  using FrameIndex = uint32_t;  // into frames_

  // `process`: null when not known.
  FrameIndex native_frame(const ProcessSnapshot* process, int32_t pid, uint64_t address, bool leaf);
  FrameIndex kernel_frame(uint64_t address);
  FrameIndex plugin_frame(int32_t pid, const omniprof_frame& frame);
  FrameIndex marker_frame(const std::string& name, const std::string& type = "");
  FrameIndex add_frame(NamedFrame frame);
  uint32_t add_mapping(const ProfileMapping& mapping);
  // The start of the function around `elf_address` of file `file_id`, which
  // no symbol names, from the native plugin's function_bounds; nullopt when
  // no FDE covers it or it cannot be found.
  std::optional<uint64_t> unnamed_function_start(uint64_t file_id, const std::string& host_path,
                                                 uint64_t elf_address);

  const KernelSymbols* kernel_;
  PluginHost* plugins_;
  AssemblerStats stats_;
  NamingRequests requests_;
  SymbolCache symbols_;
  FunctionStartCache function_starts_;
  // Per assemble(): the round's named frames and mappings.
  std::vector<NamedFrame> frames_;
  std::vector<ProfileMapping> mappings_;
  std::map<ProfileMapping, uint32_t> mapping_index_;
  // Per assemble(): (pid, image named with, address, leaf) -> frame.
  std::map<std::tuple<int32_t, const ProcessSnapshot*, uint64_t, bool>, FrameIndex> native_cache_;
  std::unordered_map<uint64_t, FrameIndex> kernel_cache_;
  std::unordered_map<std::string, FrameIndex> marker_cache_;
  // Per assemble(): (pid, address, detail, kind) -> frame, so a plugin
  // names each distinct interpreter frame once per round.
  using PluginFrameKey = std::tuple<int32_t, uint64_t, uint32_t, uint8_t>;
  std::map<PluginFrameKey, FrameIndex> plugin_cache_;
};

}  // namespace omniprof
