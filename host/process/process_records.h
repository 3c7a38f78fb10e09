// ProcessRecordStream: what the kernel tells perf about processes as it
// happens (PERF_RECORD_FORK, COMM on exec, MMAP2 of executable mappings,
// EXIT), read from two software dummy events per CPU (the mappings, forks
// and exits, which wake the host at once, and the execs' names, which wait
// for their images' mappings). The host describes a
// process from these records the moment it execs and maps its files, not
// from /proc after its first sample, when a short process is already gone.
//
// Why these records and not BPF on the kernel's mmap path (fexit on
// perf_event_mmap, which would write process_info in the kernel itself):
// the records are there on every kernel we support (MMAP2 since 3.16,
// comm_exec since 3.16), need no BTF, no trampolines and no kprobes; hosts
// that refuse tracing programs (lockdown, Firecracker's 6.x guests) give
// them all the same; and they reach the host also for processes that are
// gone by the time it reads them. The price is the time between the mmap
// and the host's write of process_info (one wake-up of the event thread,
// measured in bench/process_churn): samples in that window are counted in
// host.samples_of_unknown_processes as before.
#pragma once

#include <bpf/libbpf.h>
#include <linux/perf_event.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "omniprof/support/proc_maps.h"
#include "omniprof/support/result.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {

struct ProcessRecord {
  enum class Kind { kFork, kExec, kMmap, kExit };
  Kind kind = Kind::kMmap;
  int32_t pid = 0;         // the process (tgid)
  int32_t parent_pid = 0;  // kFork: the parent process
  uint64_t time_ns = 0;    // CLOCK_MONOTONIC; orders records across CPUs
  std::string comm;        // kExec: the new image's name
  ProcMapping mapping;     // kMmap: an executable mapping
};

// One record as the kernel wrote it (header included, `size` bytes), with
// the sample_id trailer of ProcessRecordStream's events (pid, tid, time).
// Nothing for a record that is not about processes, a thread's fork or exit,
// a non-exec COMM, a non-executable or malformed one (`malformed` says which
// of those).
bool parse_process_record(const perf_event_header* header, size_t size, ProcessRecord& out, bool& malformed);

struct ProcessRecordStats {
  uint64_t records = 0;    // process records read
  uint64_t lost = 0;       // records the kernel dropped, its ring full (PERF_RECORD_LOST)
  uint64_t malformed = 0;  // records that could not be parsed
};

class ProcessRecordStream {
 public:
  // Opens the per-CPU events (`pages` per CPU ring, a power of two). An
  // error names what the kernel refused; the caller keeps the /proc path.
  // Not movable: libbpf calls back with the stream's address.
  static Result<std::unique_ptr<ProcessRecordStream>> open(size_t pages);
  ProcessRecordStream(const ProcessRecordStream&) = delete;
  ProcessRecordStream& operator=(const ProcessRecordStream&) = delete;
  ~ProcessRecordStream();

  // Readable when some CPU's ring of executable mappings, forks and exits
  // has a record (a wake-up on each: the host answers within one wake-up of
  // the mmap).
  int mappings_epoll_fd() const;
  // Readable when some CPU's ring of exec names is a quarter full (they
  // need no answer of their own; see open()).
  int names_epoll_fd() const;
  // Every record in the rings now, ordered by time (one process's records
  // may come from several CPUs), into `records` (cleared first; its
  // capacity is kept from one wake-up to the next).
  void drain(std::vector<ProcessRecord>& records);
  ProcessRecordStats stats() const { return {records_.load(), lost_.load(), malformed_.load()}; }

 private:
  ProcessRecordStream() = default;
  static bpf_perf_event_ret on_record(void* ctx, int cpu, perf_event_header* header);
  // The names ring's: its forks and exits are the other ring's copies.
  static bpf_perf_event_ret on_name_record(void* ctx, int cpu, perf_event_header* header);
  UniqueFd mappings_map_fd_;   // the PERF_EVENT_ARRAYs libbpf keeps the events in
  UniqueFd names_map_fd_;
  perf_buffer* mappings_ = nullptr;
  perf_buffer* names_ = nullptr;
  std::vector<ProcessRecord>* pending_ = nullptr;  // drain()'s, while it consumes the rings
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> lost_{0};
  std::atomic<uint64_t> malformed_{0};
};

}  // namespace omniprof
