#include "process/process_records.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace omniprof {

namespace {

// The sample_id trailer every record carries with sample_id_all and
// sample_type TID | TIME: pid, tid, time.
struct SampleId {
  uint32_t pid, tid;
  uint64_t time;
};

struct TaskBody {  // PERF_RECORD_FORK and PERF_RECORD_EXIT
  uint32_t pid, ppid, tid, ptid;
  uint64_t time;
};

struct Mmap2Body {
  uint32_t pid, tid;
  uint64_t addr, len, pgoff;
  uint32_t maj, min;
  uint64_t ino, ino_generation;
  uint32_t prot, flags;
  // then the file name, NUL-padded to 8 bytes
};

struct CommBody {
  uint32_t pid, tid;
  // then the name, NUL-padded to 8 bytes
};

// A NUL-terminated string within [begin, end); false if it runs past.
bool read_string(const char* begin, const char* end, std::string& out) {
  const void* nul = std::memchr(begin, '\0', static_cast<size_t>(end - begin));
  if (!nul) return false;
  out.assign(begin, static_cast<const char*>(nul));
  return true;
}

}  // namespace

bool parse_process_record(const perf_event_header* header, size_t size, ProcessRecord& out, bool& malformed) {
  malformed = false;
  if (size < sizeof(perf_event_header) || header->size > size) {
    malformed = true;
    return false;
  }
  const char* record = reinterpret_cast<const char*>(header);
  const char* body = record + sizeof(perf_event_header);
  const size_t body_size = header->size - sizeof(perf_event_header);
  auto fail = [&] {
    malformed = true;
    return false;
  };
  // COMM and MMAP2 take their time from the sample_id trailer.
  auto start = [&](ProcessRecord::Kind kind, uint32_t pid) {
    SampleId id;
    std::memcpy(&id, record + header->size - sizeof(id), sizeof(id));
    out = ProcessRecord{};
    out.kind = kind;
    out.pid = static_cast<int32_t>(pid);
    out.time_ns = id.time;
  };
  switch (header->type) {
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT: {
      if (body_size < sizeof(TaskBody)) return fail();
      TaskBody task;
      std::memcpy(&task, body, sizeof(task));
      if (task.pid != task.tid) return false;  // a thread, not a process
      out = ProcessRecord{};
      out.kind = header->type == PERF_RECORD_FORK ? ProcessRecord::Kind::kFork : ProcessRecord::Kind::kExit;
      out.pid = static_cast<int32_t>(task.pid);
      out.parent_pid = static_cast<int32_t>(task.ppid);
      out.time_ns = task.time;
      return true;
    }
    case PERF_RECORD_COMM: {
      if (!(header->misc & PERF_RECORD_MISC_COMM_EXEC)) return false;  // a rename (prctl), not an exec
      if (body_size < sizeof(CommBody) + sizeof(SampleId)) return fail();
      CommBody comm;
      std::memcpy(&comm, body, sizeof(comm));
      start(ProcessRecord::Kind::kExec, comm.pid);
      if (!read_string(body + sizeof(comm), record + header->size - sizeof(SampleId), out.comm)) return fail();
      return true;
    }
    case PERF_RECORD_MMAP2: {
      if (body_size < sizeof(Mmap2Body) + sizeof(SampleId)) return fail();
      Mmap2Body mmap;
      std::memcpy(&mmap, body, sizeof(mmap));
      if (!(mmap.prot & PROT_EXEC)) return false;
      // With build ids asked for, maj/min/ino would be a build id: we never ask.
      if (header->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) return fail();
      start(ProcessRecord::Kind::kMmap, mmap.pid);
      ProcMapping& m = out.mapping;
      if (!read_string(body + sizeof(mmap), record + header->size - sizeof(SampleId), m.path)) return fail();
      m.start = mmap.addr;
      m.end = mmap.addr + mmap.len;
      m.offset = mmap.pgoff;
      m.dev_major = mmap.maj;
      m.dev_minor = mmap.min;
      m.inode = mmap.ino;
      m.perms = fmt::format("{}{}x{}", (mmap.prot & PROT_READ) ? 'r' : '-', (mmap.prot & PROT_WRITE) ? 'w' : '-',
                            (mmap.flags & MAP_SHARED) ? 's' : 'p');
      // The kernel names an unlinked file "PATH (deleted)", as maps does.
      constexpr std::string_view kDeleted = " (deleted)";
      if (m.path.size() > kDeleted.size() && m.path.compare(m.path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
        m.path.resize(m.path.size() - kDeleted.size());
        m.deleted = true;
      }
      // Anonymous executable memory is "//anon"; maps shows it without a name.
      if (m.path == "//anon") m.path.clear();
      return true;
    }
    default:
      return false;
  }
}

namespace {

// One dummy software event per CPU giving the records `attr` asks for, into
// a PERF_EVENT_ARRAY of its own; `what` names them in an error.
Result<perf_buffer*> open_record_buffer(UniqueFd& map_fd, perf_event_attr attr, size_t pages,
                                        perf_buffer_event_fn on_record, void* ctx, const char* what) {
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return make_error(fmt::format("cannot count the CPUs: {}", strerror(-cpus)));
  int map = bpf_map_create(BPF_MAP_TYPE_PERF_EVENT_ARRAY, "omniprof_procs", sizeof(int), sizeof(int),
                           static_cast<uint32_t>(cpus), nullptr);
  if (map < 0) return make_error(fmt::format("cannot create the process records' event array: {}", strerror(errno)));
  map_fd.reset(map);
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.sample_id_all = 1;
  // Times on CLOCK_MONOTONIC: the two rings' records are put in one order
  // by them, and the host measures how long after the kernel's record it
  // published the process (ProcessTracker's record delay).
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  // wakeup_events counts samples only: records such as these wake the
  // reader at the watermark (half the ring unless set).
  attr.watermark = 1;
  perf_buffer* buffer = perf_buffer__new_raw(map_fd.get(), pages, &attr, on_record, ctx, nullptr);
  if (!buffer) return make_error(fmt::format("perf_event_open(dummy, {}) on every CPU: {}", what, strerror(errno)));
  return buffer;
}

}  // namespace

Result<std::unique_ptr<ProcessRecordStream>> ProcessRecordStream::open(size_t pages) {
  std::unique_ptr<ProcessRecordStream> stream(new ProcessRecordStream());
  // Executable mappings wake the reader at once (a watermark of one byte):
  // an exec's image, the libraries ld.so maps next, a dlopen are walked
  // only once the host has written them to process_info. The kernel sends
  // an event that asks for mappings its forks and exits too
  // (perf_event_task_match): they come here, in the same order.
  perf_event_attr mappings{};
  mappings.mmap = 1;   // executable mappings (not mmap_data)
  mappings.mmap2 = 1;  // ... with device, inode and protection
  mappings.task = 1;   // FORK and EXIT (sent regardless, asked for to say so)
  mappings.wakeup_watermark = 1;
  auto eager = open_record_buffer(stream->mappings_map_fd_, mappings, pages, &ProcessRecordStream::on_record,
                                  stream.get(), "mmap2, task");
  if (!eager) return eager.error();
  stream->mappings_ = *eager;
  // An exec's new name wakes nobody (a quarter of the ring, so that a
  // burst of renames is read before it fills): it waits for the image's
  // mappings, which follow it within the exec and are read with it, on
  // every wake-up, in one time order: one wake-up fewer per exec. The
  // kernel sends this event forks and exits as well (perf_event_task_match
  // again): read from the other ring, they are skipped here.
  perf_event_attr names{};
  names.comm = 1;
  names.comm_exec = 1;  // exec flagged in COMM's misc
  names.wakeup_watermark = static_cast<uint32_t>(pages * static_cast<size_t>(getpagesize()) / 4);
  auto lazy = open_record_buffer(stream->names_map_fd_, names, pages, &ProcessRecordStream::on_name_record,
                                 stream.get(), "comm");
  if (!lazy) return lazy.error();
  stream->names_ = *lazy;
  return stream;
}

ProcessRecordStream::~ProcessRecordStream() {
  if (mappings_) perf_buffer__free(mappings_);
  if (names_) perf_buffer__free(names_);
}

int ProcessRecordStream::mappings_epoll_fd() const { return perf_buffer__epoll_fd(mappings_); }

int ProcessRecordStream::names_epoll_fd() const { return perf_buffer__epoll_fd(names_); }

bpf_perf_event_ret ProcessRecordStream::on_record(void* ctx, int /*cpu*/, perf_event_header* header) {
  auto* stream = static_cast<ProcessRecordStream*>(ctx);
  if (header->type == PERF_RECORD_LOST) {
    struct {
      uint64_t id, lost;
    } lost;
    if (header->size >= sizeof(*header) + sizeof(lost)) {
      std::memcpy(&lost, reinterpret_cast<const char*>(header) + sizeof(*header), sizeof(lost));
      stream->lost_ += lost.lost;
    }
    return LIBBPF_PERF_EVENT_CONT;
  }
  ProcessRecord record;
  bool malformed = false;
  if (parse_process_record(header, header->size, record, malformed)) {
    stream->records_++;
    stream->pending_->push_back(std::move(record));
  } else if (malformed) {
    stream->malformed_++;
  }
  return LIBBPF_PERF_EVENT_CONT;
}

bpf_perf_event_ret ProcessRecordStream::on_name_record(void* ctx, int cpu, perf_event_header* header) {
  if (header->type == PERF_RECORD_FORK || header->type == PERF_RECORD_EXIT) return LIBBPF_PERF_EVENT_CONT;
  return on_record(ctx, cpu, header);
}

void ProcessRecordStream::drain(std::vector<ProcessRecord>& records) {
  // The mappings first: every exec's name that came before one of them is
  // in its ring by the time that ring is read after them, so the sort by
  // time sees them all; read the other way round, an image could come
  // without its exec.
  records.clear();
  pending_ = &records;
  perf_buffer__consume(mappings_);
  perf_buffer__consume(names_);
  pending_ = nullptr;
  // Each CPU's ring is in time order: most wake-ups bring one CPU's few
  // records, already sorted.
  auto earlier = [](const ProcessRecord& a, const ProcessRecord& b) { return a.time_ns < b.time_ns; };
  if (!std::is_sorted(records.begin(), records.end(), earlier)) {
    std::stable_sort(records.begin(), records.end(), earlier);
  }
}

}  // namespace omniprof
