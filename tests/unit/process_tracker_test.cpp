// ProcessTracker's locking without a kernel: the first reference to an
// executable builds its unwind table (here a loader blocked on a latch), and
// that must happen outside the tracker's lock, one operation per pid at a
// time. Every assertion is about order: what completes while the load is
// still blocked, what a second event for the same pid sees afterwards.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "common/clock.h"
#include "executables/executable_info_manager.h"
#include "executables/file_id.h"
#include "executables/open_executables.h"
#include "omniprof/support/unique_fd.h"
#include "process/process_tracker.h"
#include "symbolize/elf_symbolizer.h"

extern char** environ;

namespace omniprof {
namespace {

// Loads instantly until armed; armed, the next load waits until released.
class LatchedLoader : public ExecutableLoader {
 public:
  omniprof_status load(uint64_t, const std::string&, std::string&) override {
    std::unique_lock<std::mutex> lock(mutex_);
    loads_++;
    if (armed_) {
      blocked_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return !armed_; });
      blocked_ = false;
    }
    return OMNIPROF_OK;
  }
  void unload(uint64_t) override {}
  void arm() {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
  }
  void wait_until_blocked() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return blocked_; });
  }
  bool blocked() {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocked_;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool blocked_ = false;
  int loads_ = 0;
};

// Another process that maps other files than this test (so describing this
// test later needs new loads): /bin/sleep.
class SleepingChild {
 public:
  SleepingChild() {
    char arg0[] = "sleep", arg1[] = "60";
    char* argv[] = {arg0, arg1, nullptr};
    if (posix_spawn(&pid_, "/bin/sleep", nullptr, nullptr, argv, environ) != 0) pid_ = -1;
  }
  ~SleepingChild() { stop(); }
  // Kills and reaps it (pid() is -1 after).
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

class ProcessTrackerLockTest : public ::testing::Test {
 protected:
  ProcessTrackerLockTest() : executables_(loader_) {
    tracker_.track_executables(&executables_, &open_files_, &symbolizer_);
  }
  void SetUp() override {
    ASSERT_GT(child_.pid(), 0) << "cannot start /bin/sleep";
    ASSERT_NE(tracker_.get(child_.pid()), nullptr);
  }
  static std::set<uint64_t> file_ids_of(const ProcessSnapshot& snapshot) {
    std::set<uint64_t> ids;
    for (const auto& executable : snapshot.executables) {
      if (executable.file_id != 0) ids.insert(executable.file_id);
    }
    return ids;
  }
  std::set<uint64_t> child_files() { return file_ids_of(*tracker_.get(child_.pid())); }
  // Runs `body` on another thread and waits for it; false if it is still
  // stuck after a minute (then the loader is released so the test ends).
  bool completes_while_load_is_blocked(const std::function<void()>& body) {
    auto done = std::async(std::launch::async, body);
    bool completed = done.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    EXPECT_TRUE(loader_.blocked()) << "the load was released before the check ended";
    if (!completed) loader_.release();
    done.get();
    return completed;
  }

  LatchedLoader loader_;
  FileIdCache file_ids_;
  OpenExecutables open_files_{file_ids_};
  ElfSymbolizer symbolizer_;
  ExecutableInfoManager executables_;
  ProcessTracker tracker_{nullptr, nullptr};
  SleepingChild child_;
};

TEST_F(ProcessTrackerLockTest, SlowTableBuildBlocksNeitherReadersNorOtherProcesses) {
  const int32_t self = getpid();
  loader_.arm();
  std::shared_ptr<const ProcessSnapshot> described;
  std::thread event_thread([&] { described = tracker_.get(self); });
  loader_.wait_until_blocked();

  size_t size_meanwhile = 0;
  std::shared_ptr<const ProcessSnapshot> child_meanwhile;
  std::shared_ptr<const KnownProcesses> known_meanwhile;
  EXPECT_TRUE(completes_while_load_is_blocked([&] {
    size_meanwhile = tracker_.size();
    child_meanwhile = tracker_.get(child_.pid());
    (void)tracker_.stats();
    // The main thread at a round's end: what is known, the files sampled.
    known_meanwhile = tracker_.snapshot();
    for (uint64_t file_id : child_files()) executables_.mark_sampled(file_id);
    tracker_.end_round();
  })) << "the tracker waited for a table build";
  // This process is stored before its tables are built: a round closing
  // meanwhile names it.
  EXPECT_EQ(size_meanwhile, 2u);
  ASSERT_NE(known_meanwhile->find(self), nullptr);
  EXPECT_FALSE(file_ids_of(*known_meanwhile->find(self)).empty());
  ASSERT_NE(child_meanwhile, nullptr);
  EXPECT_EQ(child_meanwhile->pid, child_.pid());

  loader_.release();
  event_thread.join();
  ASSERT_NE(described, nullptr);
  EXPECT_EQ(described->pid, self);
  EXPECT_EQ(tracker_.size(), 2u);
}

TEST_F(ProcessTrackerLockTest, SecondRequestForAPidBeingDescribedWaitsForTheSameSnapshot) {
  const int32_t self = getpid();
  loader_.arm();
  std::shared_ptr<const ProcessSnapshot> first, second;
  std::thread event_thread([&] { first = tracker_.get(self); });
  loader_.wait_until_blocked();
  // A second notice for the same process (the main thread's round end, or a
  // stale-mappings event) is not described twice.
  std::thread main_thread([&] { second = tracker_.get(self); });
  std::thread refresh_thread([&] { tracker_.refresh_for_unknown_address(self); });
  loader_.release();
  event_thread.join();
  main_thread.join();
  refresh_thread.join();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, second);
  EXPECT_EQ(tracker_.stats().described, 2u);  // the child and this process, once each
  // Each file this process maps holds one reference for it (two if the
  // child maps it too), however many requests raced.
  for (uint64_t file_id : file_ids_of(*first)) {
    EXPECT_EQ(executables_.references(file_id), 1u + child_files().count(file_id)) << file_id;
  }
}

// The start-up scan: every process is read, and its files told, before any
// table is built; while a build runs, the pid is busy, the file is being
// built and not settled; once the scan is over every file is settled.
TEST_F(ProcessTrackerLockTest, ScanTellsEveryFileBeforeBuildingAndSettlesThemAll) {
  const int32_t self = getpid();
  loader_.arm();
  std::vector<ProcessTracker::ScannedFile> told;
  std::thread scan_thread([&] {
    tracker_.scan({self}, [&](const std::vector<ProcessTracker::ScannedFile>& files) { told = files; });
  });
  loader_.wait_until_blocked();
  ASSERT_FALSE(told.empty());  // before the first build ended
  EXPECT_TRUE(tracker_.busy({self}));
  EXPECT_FALSE(tracker_.busy({child_.pid()}));
  EXPECT_NE(executables_.building(), "");
  size_t settled_meanwhile = 0;
  for (const auto& file : told) settled_meanwhile += executables_.settled(file.file_id);
  EXPECT_LT(settled_meanwhile, told.size());
  loader_.release();
  scan_thread.join();
  EXPECT_FALSE(tracker_.busy({self}));
  auto snapshot = tracker_.get(self);
  ASSERT_NE(snapshot, nullptr);
  std::set<uint64_t> told_ids;
  for (const auto& file : told) {
    told_ids.insert(file.file_id);
    EXPECT_TRUE(executables_.settled(file.file_id)) << file.name;
    EXPECT_FALSE(file.name.empty());
  }
  EXPECT_EQ(told_ids, file_ids_of(*snapshot));
  EXPECT_EQ(told_ids.size(), told.size());  // each file once
  EXPECT_EQ(executables_.building(), "");
}

TEST_F(ProcessTrackerLockTest, ExitDuringDescribeIsAppliedAfterThePublish) {
  const int32_t self = getpid();
  loader_.arm();
  std::thread event_thread([&] { tracker_.get(self); });
  loader_.wait_until_blocked();
  omniprof_event exit_event{};
  exit_event.type = OMNIPROF_EVENT_EXIT;
  exit_event.pid = static_cast<uint32_t>(self);
  EXPECT_TRUE(completes_while_load_is_blocked([&] { tracker_.handle_event(exit_event); }))
      << "the exit waited for a table build";
  loader_.release();
  event_thread.join();
  auto snapshot = tracker_.get(self);
  ASSERT_NE(snapshot, nullptr);
  EXPECT_TRUE(snapshot->exited);
  // The round's drains (after the exit's), then its end: forgotten, its
  // references dropped.
  tracker_.drained({self});
  tracker_.drained({self});
  tracker_.end_round();
  EXPECT_EQ(tracker_.size(), 1u);
  for (uint64_t file_id : file_ids_of(*snapshot)) {
    EXPECT_EQ(executables_.references(file_id), child_files().count(file_id)) << file_id;
  }
}

// A process that exits after the drain before the round's last may have
// samples still in BPF (taken after the last drain read the maps): they are
// the next round's, so the round's end keeps it, and a drain that has them
// all forgets it. Forgotten at the round's end, `run` named such samples as
// of an unknown process.
TEST_F(ProcessTrackerLockTest, AnExitAfterTheRoundsLastDrainButOneIsKeptForTheNextRound) {
  const int32_t self = getpid();
  ASSERT_NE(tracker_.get(self), nullptr);
  tracker_.drained({self});
  omniprof_event exit_event{};
  exit_event.type = OMNIPROF_EVENT_EXIT;
  exit_event.pid = static_cast<uint32_t>(self);
  tracker_.handle_event(exit_event);
  tracker_.drained({self});  // the round's last drain
  tracker_.end_round(true);
  const ProcessSnapshot* kept = tracker_.snapshot()->find(self);
  ASSERT_NE(kept, nullptr) << "forgotten with samples of it possibly still in BPF";
  EXPECT_TRUE(kept->exited);
  tracker_.drained({});  // the next round's first: every sample of it drained, none in this round
  EXPECT_EQ(tracker_.snapshot()->find(self), nullptr);
  EXPECT_EQ(tracker_.size(), 1u);
}

// Without process records, a process found gone at the round's end (no exit
// noted) is noted as exited then and kept likewise, until a drain after
// which none of its samples can be in BPF.
TEST_F(ProcessTrackerLockTest, AProcessFoundGoneAtTheRoundsEndIsKeptUntilItsSamplesAreDrained) {
  SleepingChild other;
  const pid_t gone = other.pid();
  ASSERT_GT(gone, 0);
  ASSERT_NE(tracker_.get(gone), nullptr);
  other.stop();
  tracker_.drained({gone});
  tracker_.end_round(false);
  const ProcessSnapshot* kept = tracker_.snapshot()->find(gone);
  ASSERT_NE(kept, nullptr);
  EXPECT_TRUE(kept->exited);
  tracker_.drained({gone});
  tracker_.drained({gone});  // sampled in this round: kept for its naming
  ASSERT_NE(tracker_.snapshot()->find(gone), nullptr);
  tracker_.end_round(false);
  EXPECT_EQ(tracker_.snapshot()->find(gone), nullptr);
  EXPECT_EQ(tracker_.size(), 1u);  // child_
}

// A mapped file that cannot be opened as mapped (here a character device
// mapped executable) is counted; two describes at once count it under the
// lock every counter takes (the ThreadSanitizer build checks).
TEST_F(ProcessTrackerLockTest, UnidentifiedFilesAreCountedByConcurrentDescribes) {
  UniqueFd zero(open("/dev/zero", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(zero.valid());
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, zero.get(), 0);
  ASSERT_NE(code, MAP_FAILED) << strerror(errno);
  omniprof_event stale{OMNIPROF_EVENT_MAPPINGS_STALE, static_cast<uint32_t>(getpid()), 0};
  std::atomic<int> finished{0};
  std::thread describe([&] {
    tracker_.get(getpid());
    finished++;
  });
  std::thread refresh([&] {
    tracker_.handle_event(stale);
    finished++;
  });
  while (finished.load() < 2) (void)tracker_.stats();  // reads while the counts are taken
  describe.join();
  refresh.join();
  munmap(code, 4096);
  EXPECT_GE(tracker_.stats().unidentified_files, 1u);
}

// Without process records the read at BPF's exec notice often precedes
// ld.so's mappings: the exec'd process is read again 5, 10, 20, 40, 80 and
// 160 ms later, and what was mapped meanwhile (here /bin/true mapped
// executable, as ld.so maps libc) is published by the next of them; after
// the last nothing more is due.
TEST_F(ProcessTrackerLockTest, AnExecdProcessIsReadAgainAfterTheNoticeWithWhatWasMappedSince) {
  auto maps_file = [&](const ProcessSnapshot& s, uintptr_t address) {
    for (const ProcMapping& m : s.mappings) {
      if (address >= m.start && address < m.end) return true;
    }
    return false;
  };
  tracker_.handle_event(omniprof_event{OMNIPROF_EVENT_EXEC, static_cast<uint32_t>(getpid()), 0});
  const auto noticed = std::chrono::steady_clock::now();
  const int due = tracker_.ms_until_due();
  EXPECT_GE(due, 0);
  EXPECT_LE(due, 5) << "the first re-read is due 5 ms after the notice";
  UniqueFd file(open("/bin/true", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(file.valid());
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, file.get(), 0);
  ASSERT_NE(code, MAP_FAILED) << strerror(errno);
  const auto address = reinterpret_cast<uintptr_t>(code);
  EXPECT_FALSE(maps_file(*tracker_.get(getpid()), address)) << "mapped after the read at the notice";

  std::this_thread::sleep_until(noticed + std::chrono::milliseconds(6));
  tracker_.reread_execs_due();
  EXPECT_GE(tracker_.stats().exec_rereads, 1u);
  EXPECT_TRUE(maps_file(*tracker_.get(getpid()), address)) << "the re-read publishes what was mapped since";
  const int next = tracker_.ms_until_due();
  EXPECT_GE(next, 0);
  EXPECT_LE(next, 160) << "more re-reads follow, the last 160 ms after the notice";
  std::this_thread::sleep_until(noticed + std::chrono::milliseconds(161));
  tracker_.reread_execs_due();
  EXPECT_EQ(tracker_.stats().exec_rereads, 6u);
  EXPECT_EQ(tracker_.ms_until_due(), -1) << "nothing more is due";
  munmap(code, 4096);
}

// BPF's note of a pc in no known mapping can be read before the exec's
// notice (each CPU has its ring): the read it brings publishes the new image
// and keeps the one it replaces, which names the samples taken in it
// (KnownProcesses::image_for); the notice that follows finds the same
// mappings and keeps no second one. Here an unmap stands for the exec: the
// page the first image mapped is in no mapping of the second.
TEST_F(ProcessTrackerLockTest, AReadThatFindsOtherMappingsKeepsTheImageItReplacesToNameItsSamples) {
  UniqueFd file(open("/bin/true", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(file.valid());
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, file.get(), 0);
  ASSERT_NE(code, MAP_FAILED) << strerror(errno);
  const auto pc = reinterpret_cast<uintptr_t>(code) + 16;
  const auto first = tracker_.get(getpid());
  ASSERT_NE(first, nullptr);
  ASSERT_NE(first->mapping_for(pc), nullptr);
  munmap(code, 4096);

  tracker_.handle_event(omniprof_event{OMNIPROF_EVENT_MAPPINGS_STALE, static_cast<uint32_t>(getpid()), 0});
  EXPECT_EQ(tracker_.get(getpid())->mapping_for(pc), nullptr) << "the read published what is mapped now";
  EXPECT_EQ(tracker_.stats().earlier_images_kept, 1u);
  auto image = tracker_.recent_images().image_for(getpid(), "", {pc});
  ASSERT_NE(image, nullptr);
  EXPECT_NE(image->mapping_for(pc), nullptr) << "a sample taken in the replaced image is named with it";

  tracker_.handle_event(omniprof_event{OMNIPROF_EVENT_EXEC, static_cast<uint32_t>(getpid()), 0});
  EXPECT_EQ(tracker_.stats().earlier_images_kept, 1u) << "the notice kept the image the read had published";
  image = tracker_.recent_images().image_for(getpid(), "", {pc});
  ASSERT_NE(image, nullptr);
  EXPECT_NE(image->mapping_for(pc), nullptr);
}

// BPF's note of a pc in no known mapping carries when the walk noted it: a
// read of the mappings begun after that answers it (the note of an image an
// exec replaced, read after the exec's notice on another CPU's ring), and
// one after the last read is read at once, however soon after the previous
// (ld.so maps libc after the read at an exec's notice; BPF limits its notes
// itself). Naming's requests, which carry no time, stay limited here.
TEST_F(ProcessTrackerLockTest, ANoteOfAnUnknownPcIsReadUnlessAReadBegunSinceAnswersIt) {
  const uint32_t self = static_cast<uint32_t>(getpid());
  auto stale = [&](uint64_t noted_ns) {
    tracker_.handle_event(omniprof_event{OMNIPROF_EVENT_MAPPINGS_STALE, self, noted_ns});
  };
  const uint64_t before_read = monotonic_ns();
  ASSERT_NE(tracker_.get(getpid()), nullptr);
  stale(before_read);
  EXPECT_EQ(tracker_.stats().maps_refreshes, 0u) << "noted before the read that described the process";

  UniqueFd file(open("/bin/true", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(file.valid());
  std::vector<void*> pages;
  for (int i = 0; i < 2; ++i) {
    void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, file.get(), 0);
    ASSERT_NE(code, MAP_FAILED) << strerror(errno);
    pages.push_back(code);
    stale(monotonic_ns());
    EXPECT_EQ(tracker_.stats().maps_refreshes, static_cast<uint64_t>(i + 1))
        << "a note after the last read, " << i << " before it within the second";
    EXPECT_NE(tracker_.get(getpid())->mapping_for(reinterpret_cast<uintptr_t>(code)), nullptr);
  }
  stale(0);
  stale(0);
  EXPECT_EQ(tracker_.stats().maps_refreshes, 3u) << "naming's second request within the second is not read";
  for (void* code : pages) munmap(code, 4096);
}

}  // namespace
}  // namespace omniprof
