// The kernel's process records (ProcessRecordStream) as the host reads them:
// parsing perf's FORK/COMM/MMAP2/EXIT records, and ProcessTracker describing
// processes from them alone, also processes that are gone by then. No
// kernel: the records are built here as the kernel lays them out.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "executables/executable_info_manager.h"
#include "executables/file_id.h"
#include "executables/open_executables.h"
#include "process/process_records.h"
#include "process/process_tracker.h"
#include "symbolize/elf_symbolizer.h"

namespace omniprof {
namespace {

// A record as the kernel writes it: header, body, then the sample_id
// trailer (pid, tid, time) of ProcessRecordStream's events.
class RecordBytes {
 public:
  RecordBytes(uint32_t type, uint16_t misc) {
    header_.type = type;
    header_.misc = misc;
  }
  template <typename T>
  RecordBytes& add(const T& value) {
    const char* p = reinterpret_cast<const char*>(&value);
    body_.insert(body_.end(), p, p + sizeof(value));
    return *this;
  }
  RecordBytes& add_string(const std::string& s) {
    body_.insert(body_.end(), s.begin(), s.end());
    do body_.push_back('\0');
    while (body_.size() % 8 != 0);
    return *this;
  }
  RecordBytes& add_sample_id(uint32_t pid, uint64_t time) {
    add(pid).add(pid).add(time);
    return *this;
  }
  std::vector<char> bytes() {
    header_.size = static_cast<uint16_t>(sizeof(header_) + body_.size());
    std::vector<char> out(reinterpret_cast<const char*>(&header_),
                          reinterpret_cast<const char*>(&header_) + sizeof(header_));
    out.insert(out.end(), body_.begin(), body_.end());
    return out;
  }

 private:
  perf_event_header header_{};
  std::vector<char> body_;
};

std::vector<char> mmap2_record(uint32_t pid, const ProcMapping& m, uint32_t prot, uint64_t time) {
  RecordBytes r(PERF_RECORD_MMAP2, 0);
  r.add(pid).add(pid).add<uint64_t>(m.start).add<uint64_t>(m.end - m.start).add<uint64_t>(m.offset);
  r.add<uint32_t>(m.dev_major).add<uint32_t>(m.dev_minor).add<uint64_t>(m.inode).add<uint64_t>(0);
  r.add<uint32_t>(prot).add<uint32_t>(MAP_PRIVATE).add_string(m.path + (m.deleted ? " (deleted)" : ""));
  return r.add_sample_id(pid, time).bytes();
}

std::vector<char> task_record(uint32_t type, uint32_t pid, uint32_t ppid, uint32_t tid, uint64_t time) {
  RecordBytes r(type, 0);
  r.add(pid).add(ppid).add(tid).add(ppid).add(time);
  return r.add_sample_id(pid, time).bytes();
}

std::vector<char> comm_record(uint32_t pid, const std::string& comm, bool exec, uint64_t time) {
  RecordBytes r(PERF_RECORD_COMM, exec ? PERF_RECORD_MISC_COMM_EXEC : 0);
  r.add(pid).add(pid).add_string(comm);
  return r.add_sample_id(pid, time).bytes();
}

bool parse(const std::vector<char>& bytes, ProcessRecord& out, bool& malformed) {
  return parse_process_record(reinterpret_cast<const perf_event_header*>(bytes.data()), bytes.size(), out,
                              malformed);
}

ProcessRecord parsed(const std::vector<char>& bytes) {
  ProcessRecord record;
  bool malformed = false;
  EXPECT_TRUE(parse(bytes, record, malformed));
  EXPECT_FALSE(malformed);
  return record;
}

ProcMapping mapping(uint64_t start, uint64_t end, uint64_t offset, const std::string& path) {
  ProcMapping m;
  m.start = start;
  m.end = end;
  m.offset = offset;
  m.path = path;
  m.perms = "r-xp";
  return m;
}

TEST(ProcessRecordTest, ParsesExecMmapForkAndExit) {
  ProcMapping libc = mapping(0x7f0000001000, 0x7f0000009000, 0x28000, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  libc.dev_major = 8;
  libc.dev_minor = 1;
  libc.inode = 4242;
  ProcessRecord mmap = parsed(mmap2_record(100, libc, PROT_READ | PROT_EXEC, 7));
  EXPECT_EQ(mmap.kind, ProcessRecord::Kind::kMmap);
  EXPECT_EQ(mmap.pid, 100);
  EXPECT_EQ(mmap.time_ns, 7u);
  EXPECT_EQ(mmap.mapping.start, libc.start);
  EXPECT_EQ(mmap.mapping.end, libc.end);
  EXPECT_EQ(mmap.mapping.offset, libc.offset);
  EXPECT_EQ(mmap.mapping.path, libc.path);
  EXPECT_EQ(mmap.mapping.inode, 4242u);
  EXPECT_EQ(mmap.mapping.dev_major, 8u);
  EXPECT_EQ(mmap.mapping.dev_minor, 1u);
  EXPECT_TRUE(mmap.mapping.executable());
  EXPECT_FALSE(mmap.mapping.deleted);

  ProcMapping replaced = libc;
  replaced.deleted = true;
  ProcessRecord deleted = parsed(mmap2_record(100, replaced, PROT_READ | PROT_EXEC, 8));
  EXPECT_EQ(deleted.mapping.path, libc.path);
  EXPECT_TRUE(deleted.mapping.deleted);

  ProcessRecord exec = parsed(comm_record(100, "sh", true, 5));
  EXPECT_EQ(exec.kind, ProcessRecord::Kind::kExec);
  EXPECT_EQ(exec.comm, "sh");
  EXPECT_EQ(exec.time_ns, 5u);

  ProcessRecord fork = parsed(task_record(PERF_RECORD_FORK, 101, 100, 101, 9));
  EXPECT_EQ(fork.kind, ProcessRecord::Kind::kFork);
  EXPECT_EQ(fork.pid, 101);
  EXPECT_EQ(fork.parent_pid, 100);
  ProcessRecord exit = parsed(task_record(PERF_RECORD_EXIT, 101, 100, 101, 10));
  EXPECT_EQ(exit.kind, ProcessRecord::Kind::kExit);
  EXPECT_EQ(exit.time_ns, 10u);
}

TEST(ProcessRecordTest, IgnoresThreadsRenamesAndDataAndFlagsTruncatedRecords) {
  ProcessRecord record;
  bool malformed = true;
  // A thread's birth and death (tid is not the process).
  EXPECT_FALSE(parse(task_record(PERF_RECORD_FORK, 100, 100, 105, 1), record, malformed));
  EXPECT_FALSE(malformed);
  EXPECT_FALSE(parse(task_record(PERF_RECORD_EXIT, 100, 100, 105, 1), record, malformed));
  // prctl(PR_SET_NAME), not an exec.
  EXPECT_FALSE(parse(comm_record(100, "worker", false, 1), record, malformed));
  EXPECT_FALSE(malformed);
  // A data mapping.
  EXPECT_FALSE(parse(mmap2_record(100, mapping(0x1000, 0x2000, 0, "/data"), PROT_READ, 1), record, malformed));
  EXPECT_FALSE(malformed);
  // Cut short: the name runs past the record.
  std::vector<char> cut = mmap2_record(100, mapping(0x1000, 0x2000, 0, "/usr/bin/dash"), PROT_EXEC, 1);
  auto* header = reinterpret_cast<perf_event_header*>(cut.data());
  header->size = sizeof(perf_event_header) + 48;
  EXPECT_FALSE(parse(cut, record, malformed));
  EXPECT_TRUE(malformed);
  // A header claiming more than was read.
  std::vector<char> whole = comm_record(100, "sh", true, 1);
  EXPECT_FALSE(parse_process_record(reinterpret_cast<const perf_event_header*>(whole.data()), whole.size() - 8,
                                    record, malformed));
  EXPECT_TRUE(malformed);
}

class CountingLoader : public ExecutableLoader {
 public:
  omniprof_status load(uint64_t id, const std::string&, std::string&) override {
    loaded.insert(id);
    return OMNIPROF_OK;
  }
  void unload(uint64_t id) override { loaded.erase(id); }
  std::set<uint64_t> loaded;
};

// A pid that existed and is gone now: what a short process is by the time
// the host reads its records.
int32_t exited_pid() {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

class ProcessTrackerRecordsTest : public ::testing::Test {
 protected:
  ProcessTrackerRecordsTest() : executables_(loader_) {
    tracker_.track_executables(&executables_, &open_files_, &symbolizer_);
  }
  // This test's own executable mappings, as the kernel would report them.
  static std::vector<ProcMapping> own_executable_mappings() {
    std::vector<ProcMapping> out;
    auto maps = read_proc_maps(getpid());
    EXPECT_TRUE(maps.ok());
    for (const auto& m : *maps) {
      if (m.executable() && m.is_file_backed()) out.push_back(m);
    }
    return out;
  }
  static ProcessRecord exec(int32_t pid, const std::string& comm, uint64_t time) {
    return parsed(comm_record(static_cast<uint32_t>(pid), comm, true, time));
  }
  static ProcessRecord mmap(int32_t pid, const ProcMapping& m, uint64_t time) {
    return parsed(mmap2_record(static_cast<uint32_t>(pid), m, PROT_READ | PROT_EXEC, time));
  }
  static ProcessRecord task(uint32_t type, int32_t pid, int32_t parent, uint64_t time) {
    return parsed(task_record(type, static_cast<uint32_t>(pid), static_cast<uint32_t>(parent),
                              static_cast<uint32_t>(pid), time));
  }
  std::shared_ptr<const ProcessSnapshot> known(int32_t pid) {
    auto all = tracker_.snapshot();
    auto it = all->by_pid.find(pid);
    return it == all->by_pid.end() ? nullptr : it->second;
  }

  CountingLoader loader_;
  FileIdCache file_ids_;
  OpenExecutables open_files_{file_ids_};
  ElfSymbolizer symbolizer_;
  ExecutableInfoManager executables_;
  ProcessTracker tracker_{nullptr, nullptr};
};

// The churn case: exec, mappings and exit all reported, the process gone
// before the host reads anything. It is described from the records, its
// files identified by path (device and inode checked), and named as exited.
TEST_F(ProcessTrackerRecordsTest, ProcessGoneBeforeTheHostReadsItIsDescribedFromItsRecords) {
  const int32_t pid = exited_pid();
  const auto own = own_executable_mappings();
  ASSERT_GE(own.size(), 2u);
  std::vector<ProcessRecord> records{exec(pid, "omniprof_short", 1)};
  for (size_t i = 0; i < own.size(); ++i) records.push_back(mmap(pid, own[i], 2 + i));
  records.push_back(task(PERF_RECORD_EXIT, pid, 1, 100));
  tracker_.apply_records(records);

  auto gone = known(pid);
  ASSERT_NE(gone, nullptr) << "a process that exited before it was read is not described";
  EXPECT_TRUE(gone->exited);
  EXPECT_EQ(gone->comm, "omniprof_short");
  EXPECT_EQ(gone->exe, own[0].path);
  ASSERT_EQ(gone->mappings.size(), own.size());
  auto self = tracker_.get(getpid());  // described from /proc, for comparison
  ASSERT_NE(self, nullptr);
  for (size_t i = 0; i < own.size(); ++i) {
    EXPECT_EQ(gone->mappings[i].start, own[i].start);
    EXPECT_NE(gone->executables[i].file_id, 0u) << own[i].path << " not identified";
    const ExecutableRef* same = self->executable_for(*self->mapping_for(own[i].start));
    ASSERT_NE(same, nullptr);
    EXPECT_EQ(gone->executables[i].file_id, same->file_id) << own[i].path;
    EXPECT_EQ(gone->executables[i].load_bias, same->load_bias) << own[i].path;
  }
  EXPECT_EQ(tracker_.stats().described_from_records, 1u);
  EXPECT_EQ(tracker_.stats().gone_before_read, 0u);
}

// Hundreds of short processes a second: one that exited unsampled is
// forgotten after the drain following its exit's (every sample it took is
// drained by then), not kept until the round ends; a sampled one is kept
// for naming.
TEST_F(ProcessTrackerRecordsTest, ExitedProcessWithoutSamplesIsForgottenAfterTheNextDrain) {
  const auto own = own_executable_mappings();
  const int32_t unsampled = exited_pid();
  const int32_t sampled = exited_pid();
  for (int32_t pid : {unsampled, sampled}) {
    tracker_.apply_records({exec(pid, "short", 1), mmap(pid, own[0], 2), task(PERF_RECORD_EXIT, pid, 1, 3)});
    ASSERT_NE(known(pid), nullptr);
  }
  tracker_.drained({sampled});  // began before the exits were noted, maybe
  EXPECT_NE(known(unsampled), nullptr) << "a sample taken before its exit may still be in BPF";
  tracker_.drained({sampled});
  EXPECT_EQ(known(unsampled), nullptr) << "kept for a round though nothing will be named after it";
  EXPECT_NE(known(sampled), nullptr) << "its samples are in the round: named at its close";
  tracker_.end_round();
  EXPECT_EQ(known(sampled), nullptr);
}

// A fork gives the child its parent's mappings (described from /proc here),
// without reading /proc again; its exec then starts it anew.
TEST_F(ProcessTrackerRecordsTest, ForkInheritsTheParentsMappingsAndExecReplacesThem) {
  auto parent = tracker_.get(getpid());
  ASSERT_NE(parent, nullptr);
  const int32_t child = exited_pid();
  tracker_.apply_records({task(PERF_RECORD_FORK, child, getpid(), 1)});
  auto forked = known(child);
  ASSERT_NE(forked, nullptr);
  ASSERT_EQ(forked->mappings.size(), parent->mappings.size());
  for (size_t i = 0; i < parent->mappings.size(); ++i) {
    EXPECT_EQ(forked->mappings[i].start, parent->mappings[i].start);
    EXPECT_EQ(forked->executables[i].file_id, parent->executables[i].file_id);
  }
  EXPECT_EQ(forked->resource, parent->resource) << "a fork is the same program: its identity is shared";

  // The exec alone publishes nothing (its mappings come next, maybe in
  // the next batch); the old image stays until then.
  const auto own = own_executable_mappings();
  tracker_.apply_records({exec(child, "newimage", 2)});
  EXPECT_EQ(known(child)->comm, forked->comm);
  tracker_.apply_records({mmap(child, own[0], 3)});
  auto exec_d = known(child);
  EXPECT_EQ(exec_d->comm, "newimage");
  ASSERT_EQ(exec_d->mappings.size(), 1u);
  EXPECT_EQ(exec_d->mappings[0].start, own[0].start);
  EXPECT_NE(exec_d->executables[0].file_id, 0u);
}

// An exec keeps the image it replaces (a forked child's: its parent's
// snapshot) for the drains that bring the samples taken in it: until the
// drain after the one following the exec, or the round's end.
TEST_F(ProcessTrackerRecordsTest, ExecKeepsTheReplacedImageUntilItsSamplesAreDrained) {
  auto parent = tracker_.get(getpid());
  ASSERT_NE(parent, nullptr);
  const auto own = own_executable_mappings();
  const int32_t child = exited_pid();
  tracker_.apply_records({task(PERF_RECORD_FORK, child, getpid(), 1), exec(child, "newimage", 2), mmap(child, own[0], 3)});
  ASSERT_NE(known(child), nullptr);
  EXPECT_EQ(known(child)->comm, "newimage");
  KnownProcesses recent = tracker_.recent_images();
  ASSERT_EQ(recent.earlier_by_pid[child].size(), 1u);
  EXPECT_EQ(recent.earlier_by_pid[child][0]->comm, parent->comm);
  EXPECT_EQ(recent.earlier_by_pid[child][0]->mappings.size(), parent->mappings.size());
  ASSERT_EQ(recent.by_pid.count(child), 1u);
  EXPECT_EQ(recent.by_pid[child]->comm, "newimage");
  EXPECT_EQ(tracker_.stats().earlier_images_kept, 1u);

  tracker_.drained({child});  // may have begun before the exec
  EXPECT_EQ(tracker_.recent_images().earlier_by_pid.count(child), 1u);
  tracker_.drained({child});
  EXPECT_EQ(tracker_.recent_images().earlier_by_pid.count(child), 0u) << "kept past the drain after the exec's";

  const int32_t late = exited_pid();
  tracker_.apply_records({task(PERF_RECORD_FORK, late, getpid(), 4), exec(late, "late", 5), mmap(late, own[0], 6)});
  tracker_.end_round();  // replaced after the last drain: its samples may come in the next round
  EXPECT_EQ(tracker_.recent_images().earlier_by_pid.count(late), 1u);
  tracker_.drained({});
  tracker_.end_round();
  EXPECT_EQ(tracker_.recent_images().earlier_by_pid.count(late), 0u);
}

// A later mapping over part of an earlier one (MAP_FIXED, a library loaded
// where another was unmapped: perf reports no munmap) replaces that part.
TEST_F(ProcessTrackerRecordsTest, MappingOverAnotherReplacesTheOverlap) {
  const int32_t pid = exited_pid();
  tracker_.apply_records({exec(pid, "x", 1), mmap(pid, mapping(0x10000, 0x20000, 0x1000, "/nonexistent/a"), 2),
                          mmap(pid, mapping(0x14000, 0x16000, 0, "/nonexistent/b"), 3)});
  auto p = known(pid);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->mappings.size(), 3u);
  EXPECT_EQ(p->mappings[0].start, 0x10000u);
  EXPECT_EQ(p->mappings[0].end, 0x14000u);
  EXPECT_EQ(p->mappings[0].offset, 0x1000u);
  EXPECT_EQ(p->mappings[1].path, "/nonexistent/b");
  EXPECT_EQ(p->mappings[2].start, 0x16000u);
  EXPECT_EQ(p->mappings[2].end, 0x20000u);
  EXPECT_EQ(p->mappings[2].offset, 0x7000u);
  EXPECT_EQ(p->mappings[2].path, "/nonexistent/a");
  EXPECT_GE(tracker_.stats().unidentified_files, 1u);  // counted, not fatal
}

// Records of a process the host never heard of (it was running before the
// agent and its exec was not seen) are counted, not guessed from.
TEST_F(ProcessTrackerRecordsTest, MmapOfAProcessKnownNeitherWayIsCounted) {
  const int32_t pid = exited_pid();
  tracker_.apply_records({mmap(pid, mapping(0x10000, 0x20000, 0, "/nonexistent/a"), 1),
                          task(PERF_RECORD_FORK, exited_pid(), pid, 2)});
  EXPECT_EQ(known(pid), nullptr);
  EXPECT_EQ(tracker_.stats().records_of_unknown, 2u);
}

// An exec maps its executable, ld.so and the [vdso] before execve returns:
// once an exec has shown its [vdso] record, a later exec's view is published
// once, at its [vdso], not at each mapping (nothing walks the image before).
TEST_F(ProcessTrackerRecordsTest, ExecIsPublishedOnceItsImageIsMapped) {
  // Long enough that no stall of a loaded machine between the records'
  // time and apply_records ends the wait this test looks at.
  tracker_.set_exec_mapping_wait(std::chrono::seconds(60));
  const auto own = own_executable_mappings();
  ASSERT_GE(own.size(), 2u);
  EXPECT_EQ(tracker_.ms_until_due(), -1) << "nothing held, nothing deferred: the event thread may sleep";
  const ProcMapping vdso = mapping(0x7ffff7fc1000, 0x7ffff7fc3000, 0, "[vdso]");

  // Before any exec showed a [vdso], nothing is held: each batch publishes.
  const int32_t first = exited_pid();
  uint64_t t = monotonic_ns();
  tracker_.apply_records({exec(first, "first", t), mmap(first, own[0], t + 1)});
  ASSERT_NE(known(first), nullptr);
  EXPECT_EQ(known(first)->comm, "first");
  tracker_.apply_records({mmap(first, vdso, t + 2)});  // learned: execs end with a [vdso]
  EXPECT_EQ(tracker_.stats().publishes_held_for_exec, 0u);
  const uint64_t described_before = tracker_.stats().described_from_records;

  const int32_t second = exited_pid();
  t = monotonic_ns();
  tracker_.apply_records({exec(second, "second", t)});
  tracker_.apply_records({mmap(second, own[0], t + 1)});
  EXPECT_EQ(known(second), nullptr) << "published before its image was whole";
  tracker_.apply_records({mmap(second, own[1], t + 2)});
  EXPECT_EQ(known(second), nullptr) << "published before its [vdso]";
  EXPECT_EQ(tracker_.stats().publishes_held_for_exec, 2u);
  // The event thread wakes when the wait ends, even if no record comes.
  const int due = tracker_.ms_until_due();
  EXPECT_GT(due, 50'000);
  EXPECT_LE(due, 60'000);
  tracker_.apply_records({mmap(second, vdso, t + 3)});
  auto whole = known(second);
  ASSERT_NE(whole, nullptr) << "not published at its [vdso]";
  EXPECT_EQ(whole->comm, "second");
  EXPECT_EQ(whole->mappings.size(), 3u);
  EXPECT_EQ(tracker_.stats().described_from_records, described_before + 1) << "published more than once";

  // A mapping after the image started (ld.so loading libc) is published at once.
  const ProcMapping later = mapping(0x10000, 0x20000, 0, "/nonexistent/libafter.so");
  tracker_.apply_records({mmap(second, later, t + 4)});
  EXPECT_EQ(known(second)->mappings.size(), 4u);

  // One that exited while mapping is published all the same, to be named.
  const int32_t exited = exited_pid();
  t = monotonic_ns();
  tracker_.apply_records({exec(exited, "exited", t), mmap(exited, own[0], t + 1),
                          task(PERF_RECORD_EXIT, exited, 1, t + 2)});
  ASSERT_NE(known(exited), nullptr);
  EXPECT_TRUE(known(exited)->exited);
}

// A [vdso] record lost (a full ring): the view is published once the wait
// is over, at the next batch, even one with nothing of that process.
TEST_F(ProcessTrackerRecordsTest, ExecWhoseVdsoRecordIsLostIsPublishedAfterTheWait) {
  tracker_.set_exec_mapping_wait(std::chrono::milliseconds(200));
  const auto own = own_executable_mappings();
  const ProcMapping vdso = mapping(0x7ffff7fc1000, 0x7ffff7fc3000, 0, "[vdso]");
  const int32_t teacher = exited_pid();
  uint64_t t = monotonic_ns();
  tracker_.apply_records({exec(teacher, "teacher", t), mmap(teacher, own[0], t + 1), mmap(teacher, vdso, t + 2)});

  const int32_t pid = exited_pid();
  t = monotonic_ns();
  tracker_.apply_records({exec(pid, "novdso", t), mmap(pid, own[0], t + 1)});
  EXPECT_EQ(known(pid), nullptr);
  usleep(250000);  // past the wait (200 ms)
  tracker_.apply_records({});
  auto published = known(pid);
  ASSERT_NE(published, nullptr) << "held for ever once its [vdso] record was lost";
  EXPECT_EQ(published->comm, "novdso");

  // An exec record older than the wait is not held at all.
  const int32_t old = exited_pid();
  t = monotonic_ns() - 1'000'000'000;
  tracker_.apply_records({exec(old, "old", t), mmap(old, own[0], t + 1)});
  EXPECT_NE(known(old), nullptr);
}

// A walk that ran before the host published what the records brought notes a
// pc in no known mapping. The records read since the note hold the mapping,
// so the note is answered without reading /proc (such reads were ~3 ms each
// of the event thread under bench/process_churn's storm). Once per process:
// a second note of it reads /proc, which has what a record the kernel lost
// would have brought.
TEST_F(ProcessTrackerRecordsTest, ANoteTheRecordsReadSinceAnswerReadsNoProcOncePerProcess) {
  const uint32_t self = static_cast<uint32_t>(getpid());
  auto stale = [&](uint64_t noted_ns) {
    tracker_.handle_event(omniprof_event{OMNIPROF_EVENT_MAPPINGS_STALE, self, noted_ns});
  };
  ASSERT_NE(tracker_.get(getpid()), nullptr);
  const int fd = open("/bin/true", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* recorded = ::mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  void* unrecorded = ::mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(recorded, MAP_FAILED);
  ASSERT_NE(unrecorded, MAP_FAILED);
  const auto recorded_pc = reinterpret_cast<uintptr_t>(recorded) + 16;
  const auto unrecorded_pc = reinterpret_cast<uintptr_t>(unrecorded) + 16;
  std::optional<ProcMapping> mapping;
  for (const auto& m : own_executable_mappings()) {
    if (m.start == reinterpret_cast<uintptr_t>(recorded)) mapping = m;
  }
  ASSERT_TRUE(mapping.has_value());

  const uint64_t first_note = monotonic_ns();
  tracker_.apply_records({mmap(getpid(), *mapping, first_note - 1)}, monotonic_ns());
  stale(first_note);
  EXPECT_EQ(tracker_.stats().maps_refreshes, 0u) << "the records read since the note were not enough";
  EXPECT_EQ(tracker_.stats().notes_answered_by_records, 1u);
  EXPECT_NE(known(getpid())->mapping_for(recorded_pc), nullptr);
  EXPECT_EQ(known(getpid())->mapping_for(unrecorded_pc), nullptr) << "its record was lost: not known yet";

  const uint64_t second_note = monotonic_ns();
  tracker_.apply_records({}, monotonic_ns());
  stale(second_note);
  EXPECT_EQ(tracker_.stats().maps_refreshes, 1u) << "a second note of the process did not read /proc";
  EXPECT_EQ(tracker_.stats().notes_answered_by_records, 1u);
  EXPECT_NE(known(getpid())->mapping_for(unrecorded_pc), nullptr) << "/proc's read did not publish it";
  ::munmap(recorded, 4096);
  ::munmap(unrecorded, 4096);
}

}  // namespace
}  // namespace omniprof
