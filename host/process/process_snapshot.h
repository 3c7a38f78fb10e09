// What the host knows of one process (ProcessSnapshot), and of them all when
// a round closes (KnownProcesses): immutable values the ProcessTracker
// makes, which a round is named from without calling back into it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "process/proc_maps.h"
#include "process/process_identity.h"

namespace omniprof {

struct OpenExecutable;

// What the native unwinder needs of a mapping: which executable it is and
// how to turn a process address into that file's ELF virtual address; and
// where the host reads that file, the one the process maps.
struct ExecutableRef {
  uint64_t file_id = 0;  // 0: not identified (anonymous, unreadable, not tracking executables)
  uint64_t load_bias = 0;
  // The mapped file as opened (open_mapped_file): /proc/self/fd/N of `file`
  // when kept, else the map_files (or /proc/PID/root) path it was opened
  // from, which lasts only as long as the process; the [vdso] copy.
  std::string path;
  std::shared_ptr<const OpenExecutable> file;  // keeps `path` open; may be null
};

struct ProcessSnapshot {
  int32_t pid = 0;
  std::string comm;
  std::string exe;
  std::vector<ProcMapping> mappings;  // executable mappings, sorted by start
  std::vector<ExecutableRef> executables;  // parallel to mappings
  std::string runtime;                // plugin that recognised the process, if any
  std::string runtime_version;
  // The files whose native code is that interpreter's own (its plugin's
  // omniprof_process_attach.interpreter_file_ids): their frames fold into
  // the interpreter frames they serve (agent/stack_folding.h).
  std::vector<uint64_t> interpreter_file_ids;
  bool exited = false;
  // CLOCK_MONOTONIC since which BPF's process_info holds these mappings:
  // written by the host, or copied from the parent's at the fork by the
  // kernel (bpf/entry.bpf.c, omniprof_fork). 0: not known to.
  uint64_t in_process_info_since_ns = 0;
  std::string vdso_path;  // a copy of the process's [vdso] image, if read
  // Who the process is (service.name, container.id, systemd.unit, host.*:
  // process_identity.h), read when it was described; never null once
  // described.
  std::shared_ptr<const ResourceAttributes> resource;
  // What `resource` was computed from (a fork's child, or an exec in it,
  // starts from its parent's). Null in snapshots made by hand (tests).
  std::shared_ptr<const ProcessFacts> facts;

  const ProcMapping* mapping_for(uint64_t address) const;
  // The entry of `executables` for one of `mappings`, or null.
  const ExecutableRef* executable_for(const ProcMapping& mapping) const;
  // A path the host can open for a mapping's file, which is the file the
  // process maps (deleted or replaced on disk, a memfd, in another mount
  // namespace alike): the descriptor kept for it, after the process exited
  // too; else its map_files path while the process lives. The copy of the
  // image for [vdso]; "" for anonymous memory and files that could not be
  // opened as mapped.
  std::string host_path(const ProcMapping& mapping) const;
};

// Every process the tracker knew when a round closed
// (ProcessTracker::snapshot), exited ones of the round included.
struct KnownProcesses {
  std::unordered_map<int32_t, std::shared_ptr<const ProcessSnapshot>> by_pid;
  // Images an exec replaced while samples taken in them may still be in
  // BPF, oldest first (a forked child's is its parent's snapshot): filled
  // by ProcessTracker::recent_images only, for the drain to choose each
  // new sample's image (RoundSamples::pin_images).
  std::unordered_map<int32_t, std::vector<std::shared_ptr<const ProcessSnapshot>>> earlier_by_pid;

  const ProcessSnapshot* find(int32_t pid) const;
  // The image a sample of `pid` was taken in: of its current one and the
  // earlier ones newest first, the first that maps every one of `pcs` (the
  // sample's native code addresses) and whose name is the sample's thread
  // name (a thread keeps its process's name until it renames itself, and
  // an exec names it anew); else the first that maps them all; else the
  // current one (find()).
  std::shared_ptr<const ProcessSnapshot> image_for(int32_t pid, std::string_view thread_name,
                                                   const std::vector<uint64_t>& pcs) const;
};

}  // namespace omniprof
