// ProcessTracker: what the host knows of each sampled process (comm, exe,
// executable mappings, the runtime a plugin recognised), read from /proc when
// BPF first samples the process, refreshed on exec, and forgotten one round
// after exit so the samples taken before the exit are still named.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "omniprof/bpf/abi.h"
#include "process/proc_maps.h"

namespace omniprof {

class BpfMaps;
class PluginHost;

struct ProcessSnapshot {
  int32_t pid = 0;
  std::string comm;
  std::string exe;
  std::vector<ProcMapping> mappings;  // executable mappings, sorted by start
  std::string runtime;                // plugin that recognised the process, if any
  std::string runtime_version;
  bool exited = false;

  const ProcMapping* mapping_for(uint64_t address) const;
  // A path the host can open for a mapping's file: through /proc/PID/root
  // while the process lives (it may sit in another mount namespace), the
  // plain path after.
  std::string host_path(const ProcMapping& mapping) const;
};

struct ProcessTrackerStats {
  uint64_t described = 0;         // processes read from /proc
  uint64_t gone_before_read = 0;  // exited before the host could read them
  uint64_t process_info_errors = 0;  // process_info map full or write failed
  uint64_t maps_refreshes = 0;    // re-reads for addresses outside known mappings (dlopen)
};

class ProcessTracker {
 public:
  ProcessTracker(BpfMaps* maps, PluginHost* plugins) : maps_(maps), plugins_(plugins) {}

  // Describes every running process, or only `pids` when not empty.
  void scan(const std::vector<int32_t>& pids);
  // A notification from BPF (ring buffer). Safe from any thread.
  void handle_event(const omniprof_event& event);
  // The known process, described now if it is not known yet; null if it is
  // gone and was never described.
  std::shared_ptr<const ProcessSnapshot> get(int32_t pid);
  // Re-reads a process's mappings when a sampled address lies outside them (a
  // library loaded with dlopen after the process was described). At most once
  // per round per process.
  std::shared_ptr<const ProcessSnapshot> refresh_for_unknown_address(int32_t pid);
  // Called after a round's profile is built: forgets processes that exited.
  void end_round();

  ProcessTrackerStats stats() const;
  size_t size() const;

 private:
  std::shared_ptr<ProcessSnapshot> describe(int32_t pid);
  void publish(const ProcessSnapshot& snapshot);
  void forget_in_plugins(int32_t pid);

  BpfMaps* maps_;
  PluginHost* plugins_;
  mutable std::mutex mutex_;
  std::unordered_map<int32_t, std::shared_ptr<ProcessSnapshot>> processes_;
  std::unordered_map<int32_t, bool> refreshed_this_round_;
  // Processes found gone this round: not looked for again until the next.
  std::unordered_map<int32_t, bool> gone_this_round_;
  ProcessTrackerStats stats_;
};

}  // namespace omniprof
