// ExecutableInfoManager and FileID without a kernel: a fake loader records
// what the plugins would be asked to do.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "executables/executable_info_manager.h"
#include "executables/file_id.h"
#include "log/logger.h"

namespace omniprof {
namespace {

namespace fs = std::filesystem;

class FakeLoader : public ExecutableLoader {
 public:
  omniprof_status load(uint64_t file_id, const std::string& path, std::string& error) override {
    std::lock_guard<std::mutex> lock(mutex);
    loads[file_id]++;
    paths[file_id] = path;
    if (failures_left > 0) {
      failures_left--;
      error = "cannot read it now";
      return failure;
    }
    return OMNIPROF_OK;
  }
  void unload(uint64_t file_id) override {
    std::lock_guard<std::mutex> lock(mutex);
    unloads[file_id]++;
  }
  void evict(uint64_t file_id) override {
    std::lock_guard<std::mutex> lock(mutex);
    evictions[file_id]++;
  }
  void mark_building(uint64_t file_id) override {
    std::lock_guard<std::mutex> lock(mutex);
    building.insert(file_id);
    events.push_back("mark " + std::to_string(file_id));
  }
  void clear_building(uint64_t file_id) override {
    std::lock_guard<std::mutex> lock(mutex);
    building.erase(file_id);
    events.push_back("clear " + std::to_string(file_id));
  }
  std::set<uint64_t> building;      // marked and not cleared: what BPF would see as being built
  std::vector<std::string> events;  // mark/clear in order
  std::mutex mutex;
  std::map<uint64_t, int> loads, unloads, evictions;
  std::map<uint64_t, std::string> paths;  // of the last load
  int failures_left = 0;
  omniprof_status failure = OMNIPROF_ERR_IO;
};

TEST(ExecutableInfoManagerTest, LoadsOnFirstReferenceAndKeepsTheLastForTheNextProcess) {
  FakeLoader loader;
  ExecutableInfoManager manager(loader);
  const auto t0 = ExecutableInfoManager::Clock::now();
  manager.add_or_inc_ref(7, "/lib/libc.so.6");
  manager.add_or_inc_ref(7, "/proc/123/root/lib/libc.so.6");  // same file in a container
  EXPECT_EQ(loader.loads[7], 1);
  EXPECT_EQ(manager.references(7), 2u);
  EXPECT_FALSE(manager.remove_or_dec_ref(7, t0));  // not the last reference
  EXPECT_EQ(loader.unloads[7], 0);
  EXPECT_TRUE(manager.is_loaded(7));
  EXPECT_TRUE(manager.remove_or_dec_ref(7, t0));  // the last: kept, still loaded
  EXPECT_EQ(loader.unloads[7], 0);
  EXPECT_TRUE(manager.is_loaded(7));
  EXPECT_TRUE(manager.settled(7));
  EXPECT_FALSE(manager.referenced(7));
  EXPECT_EQ(manager.references(7), 0u);
  EXPECT_EQ(manager.stats().kept_unmapped, 1u);
  EXPECT_FALSE(manager.remove_or_dec_ref(7, t0));  // one too many: ignored

  // The next process maps it within the time: nothing is loaded again.
  manager.add_or_inc_ref(7, "/lib/libc.so.6");
  EXPECT_EQ(loader.loads[7], 1);
  EXPECT_TRUE(manager.referenced(7));
  EXPECT_EQ(manager.stats().reused, 1u);
  EXPECT_EQ(manager.stats().kept_unmapped, 0u);
  const auto t1 = t0 + std::chrono::seconds(5);
  EXPECT_TRUE(manager.remove_or_dec_ref(7, t1));

  // Mapped by none for kKeepUnmapped (counted from its last process): unloaded.
  manager.retry_deferred(t1 + ExecutableInfoManager::kKeepUnmapped - std::chrono::seconds(1));
  EXPECT_EQ(loader.unloads[7], 0);
  manager.retry_deferred(t1 + ExecutableInfoManager::kKeepUnmapped);
  EXPECT_EQ(loader.unloads[7], 1);
  EXPECT_FALSE(manager.is_loaded(7));
  EXPECT_FALSE(manager.settled(7));
  ExecutableStats stats = manager.stats();
  EXPECT_EQ(stats.unloaded, 1u);
  EXPECT_EQ(stats.loaded, 0u);
  EXPECT_EQ(stats.kept_unmapped, 0u);
  // Mapped again after that: loaded again.
  manager.add_or_inc_ref(7, "/lib/libc.so.6");
  EXPECT_EQ(loader.loads[7], 2);
  EXPECT_TRUE(manager.is_loaded(7));
}

// At most kMaxKeptUnmapped files are kept: past it, the one unmapped longest
// goes at once.
TEST(ExecutableInfoManagerTest, KeptFilesAreBoundedOldestFirst) {
  FakeLoader loader;
  ExecutableInfoManager manager(loader);
  const auto t0 = ExecutableInfoManager::Clock::now();
  const uint64_t n = ExecutableInfoManager::kMaxKeptUnmapped;
  for (uint64_t id = 1; id <= n + 2; ++id) {
    manager.add_or_inc_ref(id, "/f");
    manager.remove_or_dec_ref(id, t0 + std::chrono::milliseconds(id));
  }
  EXPECT_EQ(manager.stats().kept_unmapped, n);
  EXPECT_EQ(loader.unloads[1], 1);
  EXPECT_EQ(loader.unloads[2], 1);
  EXPECT_EQ(loader.unloads[3], 0);
  EXPECT_TRUE(manager.is_loaded(n + 2));
  // The agent stops: every kept file is unloaded.
  manager.unload_unmapped();
  for (uint64_t id = 1; id <= n + 2; ++id) EXPECT_EQ(loader.unloads[id], 1) << id;
  EXPECT_EQ(manager.stats().kept_unmapped, 0u);
  EXPECT_EQ(manager.stats().loaded, 0u);
}

// A full map makes room with a kept file before any file a process maps,
// however recently that one was sampled.
TEST(ExecutableInfoManagerTest, KeptFilesMakeRoomFirst) {
  // Room for two executables.
  class Bounded : public FakeLoader {
   public:
    omniprof_status load(uint64_t file_id, const std::string& path, std::string& error) override {
      if (held.size() >= 2) {
        error = "maps full";
        return OMNIPROF_ERR_NO_SPACE;
      }
      held.insert(file_id);
      return FakeLoader::load(file_id, path, error);
    }
    void unload(uint64_t file_id) override {
      held.erase(file_id);
      FakeLoader::unload(file_id);
    }
    void evict(uint64_t file_id) override {
      held.erase(file_id);
      FakeLoader::evict(file_id);
    }
    std::set<uint64_t> held;
  } loader;
  ExecutableInfoManager manager(loader);
  manager.add_or_inc_ref(1, "/mapped");
  manager.add_or_inc_ref(2, "/kept");
  manager.remove_or_dec_ref(2);
  manager.add_or_inc_ref(3, "/new");  // no room: the kept /kept makes it at once
  EXPECT_TRUE(manager.is_loaded(3));
  EXPECT_TRUE(manager.is_loaded(1));
  EXPECT_FALSE(manager.is_loaded(2));
  EXPECT_EQ(loader.unloads[2], 1);   // let go whole (no process maps it),
  EXPECT_EQ(loader.evictions[1], 0);  // not an eviction of a mapped file
  EXPECT_EQ(manager.stats().evicted, 0u);
  EXPECT_EQ(manager.stats().unloaded, 1u);
}

// A process's files are all marked as being built before its mappings are
// published and any of them is built; each mark is cleared once its build
// ends, stored or not, and the file is then settled.
TEST(ExecutableInfoManagerTest, TwoStepReferencesMarkEveryNewFileBeforeBuildingAny) {
  FakeLoader loader;
  ExecutableInfoManager manager(loader);
  manager.add_or_inc_ref(1, "/lib/libc.so.6");  // known before: neither marked nor built again
  loader.events.clear();
  loader.failures_left = 1;  // the next build fails (deferred): its mark goes too
  auto to_load = manager.add_refs({{1, "/lib/libc.so.6", nullptr, ""},
                                   {2, "/usr/lib/libLLVM.so", nullptr, ""},
                                   {3, "/usr/lib/libclang.so", nullptr, ""}});
  EXPECT_EQ(to_load, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(loader.building, (std::set<uint64_t>{2, 3}));
  EXPECT_EQ(loader.loads[2], 0);
  EXPECT_FALSE(manager.settled(2));
  EXPECT_TRUE(manager.settled(1));
  // Not the main thread's retry either: the publishing thread builds them.
  manager.retry_deferred(ExecutableInfoManager::Clock::now() + std::chrono::hours(1));
  EXPECT_EQ(loader.loads[2], 0);

  manager.load_referenced(to_load);
  EXPECT_EQ(loader.loads[2], 1);
  EXPECT_EQ(loader.loads[3], 1);
  EXPECT_TRUE(loader.building.empty());
  EXPECT_EQ(loader.events, (std::vector<std::string>{"mark 2", "mark 3", "mark 2", "clear 2", "mark 3", "clear 3"}));
  EXPECT_FALSE(manager.is_loaded(2));  // failed, deferred
  EXPECT_TRUE(manager.settled(2));     // but nothing more to wait for at start-up
  EXPECT_TRUE(manager.is_loaded(3));
  EXPECT_TRUE(manager.settled(3));
  EXPECT_EQ(manager.building(), "");
  // The last reference gone: settled while kept, no longer once unloaded
  // (a new first reference builds it again).
  const auto t0 = ExecutableInfoManager::Clock::now();
  manager.remove_or_dec_ref(3, t0);
  EXPECT_TRUE(manager.settled(3));
  manager.retry_deferred(t0 + ExecutableInfoManager::kKeepUnmapped);
  EXPECT_FALSE(manager.settled(3));
}

// A file whose references are all dropped before its first build ran (the
// process exited meanwhile) is not built, and its mark goes.
TEST(ExecutableInfoManagerTest, MarkOfAFileDroppedBeforeItsBuildIsCleared) {
  FakeLoader loader;
  ExecutableInfoManager manager(loader);
  auto to_load = manager.add_refs({{5, "/usr/bin/gone", nullptr, ""}});
  EXPECT_EQ(loader.building, (std::set<uint64_t>{5}));
  EXPECT_TRUE(manager.referenced(5));
  manager.remove_or_dec_ref(5);
  EXPECT_TRUE(loader.building.empty());
  EXPECT_FALSE(manager.referenced(5));
  manager.load_referenced(to_load);
  EXPECT_EQ(loader.loads[5], 0);
  EXPECT_FALSE(manager.settled(5));
}

// retry_deferred (every second) walks the entries only once something can
// be due; each change to them (a file let go, a load failing) brings that
// time forward, so nothing waits past its time.
TEST(ExecutableInfoManagerTest, IdleRetriesSkipTheirWalkYetEachChangeIsActedOnInTime) {
  using std::chrono::seconds;
  FakeLoader loader;
  ExecutableInfoManager manager(loader);
  const auto t0 = ExecutableInfoManager::Clock::now();
  manager.add_or_inc_ref(7, "/lib/libc.so.6");
  for (int s = 0; s < 5; ++s) manager.retry_deferred(t0 + seconds(s));  // mapped and loaded: nothing is due
  EXPECT_TRUE(manager.remove_or_dec_ref(7, t0 + seconds(5)));          // let go: kept kKeepUnmapped from now
  manager.retry_deferred(t0 + seconds(4) + ExecutableInfoManager::kKeepUnmapped);
  EXPECT_EQ(loader.unloads[7], 0);
  manager.retry_deferred(t0 + seconds(5) + ExecutableInfoManager::kKeepUnmapped);
  EXPECT_EQ(loader.unloads[7], 1);
  EXPECT_FALSE(manager.is_loaded(7));

  // Nothing left to wait for; then a load fails: retried at its time.
  loader.failures_left = 1;
  manager.add_or_inc_ref(9, "/usr/bin/big");
  EXPECT_EQ(loader.loads[9], 1);
  manager.retry_deferred(ExecutableInfoManager::Clock::now() + ExecutableInfoManager::kFirstRetry +
                         ExecutableInfoManager::kKeepUnmapped);
  EXPECT_EQ(loader.loads[9], 2);
  EXPECT_TRUE(manager.is_loaded(9));
}

TEST(ExecutableInfoManagerTest, FailedLoadIsDeferredAndRetriedWithBackoff) {
  FakeLoader loader;
  loader.failures_left = 2;
  loader.failure = OMNIPROF_ERR_NO_SPACE;
  ExecutableInfoManager manager(loader);
  auto t0 = ExecutableInfoManager::Clock::now();
  manager.add_or_inc_ref(9, "/usr/bin/big");
  EXPECT_FALSE(manager.is_loaded(9));
  EXPECT_EQ(manager.stats().deferred, 1u);
  EXPECT_EQ(manager.stats().no_space, 1u);

  manager.retry_deferred(t0);  // backoff not over: no busy retry
  EXPECT_EQ(loader.loads[9], 1);
  manager.retry_deferred(t0 + ExecutableInfoManager::kFirstRetry + std::chrono::seconds(1));
  EXPECT_EQ(loader.loads[9], 2);  // failed again: the backoff doubles
  manager.retry_deferred(t0 + ExecutableInfoManager::kFirstRetry * 2 + std::chrono::seconds(1));
  EXPECT_EQ(loader.loads[9], 2);
  manager.retry_deferred(t0 + ExecutableInfoManager::kFirstRetry * 4 + std::chrono::seconds(2));
  EXPECT_EQ(loader.loads[9], 3);
  EXPECT_TRUE(manager.is_loaded(9));
  EXPECT_EQ(manager.stats().deferred, 0u);
}

// `run`'s main thread sleeps until retry_due() (or a round's end): a
// deferred load says so through the hook; until a scan, what is due is not
// known (min(): look soon), after one it is the retry's time; once loaded,
// nothing is due.
TEST(ExecutableInfoManagerTest, DeferredLoadTellsWhenItsRetryIsDue) {
  FakeLoader loader;
  loader.failures_left = 1;
  ExecutableInfoManager manager(loader);
  int scheduled = 0;
  manager.set_retry_scheduled([&] { scheduled++; });
  const auto before = ExecutableInfoManager::Clock::now();
  manager.add_or_inc_ref(9, "/usr/bin/big");
  EXPECT_EQ(scheduled, 1);
  EXPECT_LE(manager.retry_due(), before);
  manager.retry_deferred(ExecutableInfoManager::Clock::now());
  EXPECT_FALSE(manager.is_loaded(9));
  const auto due = manager.retry_due();
  EXPECT_GE(due, before + ExecutableInfoManager::kFirstRetry);
  EXPECT_LE(due, ExecutableInfoManager::Clock::now() + ExecutableInfoManager::kFirstRetry);
  manager.retry_deferred(due);
  EXPECT_TRUE(manager.is_loaded(9));
  EXPECT_EQ(scheduled, 1);
  EXPECT_EQ(manager.retry_due(), ExecutableInfoManager::Clock::time_point::max());
}

TEST(ExecutableInfoManagerTest, DeferredFileWhoseProcessesWentAwayIsDropped) {
  FakeLoader loader;
  loader.failures_left = 100;
  ExecutableInfoManager manager(loader);
  manager.add_or_inc_ref(5, "/gone");
  manager.remove_or_dec_ref(5);
  // Never loaded, yet the plugins hear that it went: a description of it
  // (describe_file) is let go all the same.
  EXPECT_EQ(loader.unloads[5], 1);
  EXPECT_EQ(loader.evictions[5], 0);
  manager.retry_deferred(ExecutableInfoManager::Clock::now() + std::chrono::hours(1));
  EXPECT_EQ(loader.loads[5], 1);
  EXPECT_EQ(manager.stats().deferred, 0u);
}

TEST(ExecutableInfoManagerTest, ConcurrentReferencesLoadOnce) {
  FakeLoader loader;
  ExecutableInfoManager manager(loader);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (uint64_t id = 1; id <= 50; ++id) manager.add_or_inc_ref(id, "/x");
      for (uint64_t id = 1; id <= 50; ++id) manager.remove_or_dec_ref(id);
    });
  }
  for (auto& t : threads) t.join();
  for (uint64_t id = 1; id <= 50; ++id) {
    EXPECT_EQ(loader.loads[id], 1) << id;  // kept between its processes: never loaded twice
    EXPECT_EQ(loader.unloads[id], 0) << id;
    EXPECT_EQ(manager.references(id), 0u);
  }
  manager.retry_deferred(ExecutableInfoManager::Clock::now() + ExecutableInfoManager::kKeepUnmapped);
  for (uint64_t id = 1; id <= 50; ++id) EXPECT_EQ(loader.unloads[id], 1) << id;
}

// A loader with room for `capacity` executables.
class BoundedLoader : public ExecutableLoader {
 public:
  explicit BoundedLoader(size_t capacity) : capacity(capacity) {}
  omniprof_status load(uint64_t file_id, const std::string&, std::string& error) override {
    if (held.size() >= capacity) {
      error = "maps full";
      return OMNIPROF_ERR_NO_SPACE;
    }
    held.insert(file_id);
    return OMNIPROF_OK;
  }
  void unload(uint64_t file_id) override { held.erase(file_id); }
  void evict(uint64_t file_id) override {
    held.erase(file_id);
    evicted.push_back(file_id);
  }
  size_t capacity;
  std::set<uint64_t> held;
  std::vector<uint64_t> evicted;
};

TEST(ExecutableInfoManagerTest, ExecutablesNobodySamplesMakeRoomAndComeBackWhenSampled) {
  BoundedLoader loader(2);
  ExecutableInfoManager manager(loader);
  manager.add_or_inc_ref(1, "/a");
  manager.add_or_inc_ref(2, "/b");
  auto later = ExecutableInfoManager::Clock::now() + ExecutableInfoManager::kEvictAfterIdle * 2;
  manager.mark_sampled(1, later);  // /a is still sampled, /b is not

  // Full. add_or_inc_ref runs at the real "now", when nothing has been idle
  // long: /c is deferred rather than evicting executables loaded a moment ago.
  manager.add_or_inc_ref(3, "/c");
  EXPECT_FALSE(manager.is_loaded(3));
  EXPECT_EQ(manager.stats().evicted, 0u);
  // At its retry, /b has been idle for longest and makes room.
  manager.retry_deferred(later + ExecutableInfoManager::kFirstRetry);
  EXPECT_TRUE(manager.is_loaded(3));
  EXPECT_TRUE(manager.is_loaded(1));
  EXPECT_FALSE(manager.is_loaded(2));
  EXPECT_EQ(loader.held, (std::set<uint64_t>{1, 3}));
  EXPECT_EQ(manager.stats().evicted, 1u);
  EXPECT_EQ(loader.evicted, std::vector<uint64_t>{2});  // an eviction, not the file's last reference
  EXPECT_EQ(manager.references(2), 1u);  // still mapped: only its table went

  // An evicted executable is not retried on a timer...
  manager.retry_deferred(later + std::chrono::hours(1));
  EXPECT_FALSE(manager.is_loaded(2));
  // ...but when it is sampled again, and then it takes the place of the
  // executable idle for longest (/a, last sampled at `later`).
  auto much_later = later + ExecutableInfoManager::kEvictAfterIdle * 3;
  manager.mark_sampled(3, much_later);
  manager.mark_sampled(2, much_later);
  manager.retry_deferred(much_later);
  EXPECT_TRUE(manager.is_loaded(2));
  EXPECT_FALSE(manager.is_loaded(1));
  EXPECT_EQ(loader.held, (std::set<uint64_t>{2, 3}));
}

// BoundedLoader, except that some files can never fit.
class LoaderWithHugeFiles : public BoundedLoader {
 public:
  using BoundedLoader::BoundedLoader;
  omniprof_status load(uint64_t file_id, const std::string& path, std::string& error) override {
    attempts[file_id]++;
    if (huge.count(file_id) != 0) {
      error = "native: table needs more than 8 chunks";
      return OMNIPROF_ERR_TOO_LARGE;
    }
    return BoundedLoader::load(file_id, path, error);
  }
  std::set<uint64_t> huge;
  std::map<uint64_t, int> attempts;
};

TEST(ExecutableInfoManagerTest, PermanentFailureIsNeverRetriedAndEvictsNothing) {
  LoaderWithHugeFiles loader(1);
  loader.huge = {2};
  ExecutableInfoManager manager(loader);
  manager.add_or_inc_ref(1, "/a");
  ASSERT_TRUE(manager.is_loaded(1));
  manager.add_or_inc_ref(2, "/huge");
  EXPECT_FALSE(manager.is_loaded(2));
  EXPECT_EQ(loader.attempts[2], 1);
  ExecutableStats stats = manager.stats();
  EXPECT_EQ(stats.permanent_failures, 1u);
  EXPECT_EQ(stats.load_failures, 0u);  // counted apart from failures worth retrying
  EXPECT_EQ(stats.deferred, 0u);

  // Long after: /a has been idle far beyond kEvictAfterIdle, so a file that
  // merely lacked room would have evicted it by now. /huge is not even tried.
  auto later = ExecutableInfoManager::Clock::now() + ExecutableInfoManager::kEvictAfterIdle * 10;
  manager.retry_deferred(later);
  manager.mark_sampled(2, later);
  manager.retry_deferred(later + ExecutableInfoManager::kMaxRetry * 2);
  EXPECT_EQ(loader.attempts[2], 1);
  EXPECT_TRUE(manager.is_loaded(1));
  EXPECT_EQ(manager.stats().evicted, 0u);
  EXPECT_EQ(manager.stats().permanent_failures, 1u);  // logged and counted once
  EXPECT_EQ(manager.references(2), 1u);

  // A second process mapping it changes nothing; once every process is gone
  // and the file comes back changed (another FileID), it is tried again.
  manager.add_or_inc_ref(2, "/proc/7/root/huge");
  EXPECT_EQ(loader.attempts[2], 1);
  manager.remove_or_dec_ref(2);
  manager.remove_or_dec_ref(2);
  EXPECT_EQ(manager.references(2), 0u);
  manager.add_or_inc_ref(3, "/huge");
  EXPECT_EQ(loader.attempts[3], 1);
}

TEST(ExecutableInfoManagerTest, NoSpaceStillEvictsWhereTooLargeDoesNot) {
  // The same scenario with a file that only lacks room: the idle /a makes
  // way. (The contrast the test above relies on.)
  LoaderWithHugeFiles loader(1);
  ExecutableInfoManager manager(loader);
  manager.add_or_inc_ref(1, "/a");
  manager.add_or_inc_ref(2, "/big");
  EXPECT_FALSE(manager.is_loaded(2));
  manager.retry_deferred(ExecutableInfoManager::Clock::now() + ExecutableInfoManager::kEvictAfterIdle * 10);
  EXPECT_TRUE(manager.is_loaded(2));
  EXPECT_FALSE(manager.is_loaded(1));
  EXPECT_EQ(manager.stats().permanent_failures, 0u);
}

class PartialLoader : public FakeLoader {
 public:
  omniprof_status load(uint64_t file_id, const std::string& path, std::string& error) override {
    omniprof_status status = FakeLoader::load(file_id, path, error);
    if (status == OMNIPROF_OK && file_id == 4) error = "native: 1 malformed FDE skipped";
    return status;
  }
};

// The plugin saw a descriptor's path (/proc/self/fd/N): the host's line
// names the file as the process maps it.
TEST(ExecutableInfoManagerTest, PartialLoadsAreLoadedCountedAndLoggedWithTheFilesName) {
  std::ostringstream logged;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
  log().sinks().push_back(sink);
  PartialLoader loader;
  ExecutableInfoManager manager(loader);
  manager.add_or_inc_ref(3, "/whole");
  manager.add_or_inc_ref(4, "/proc/self/fd/180", nullptr, "/usr/lib/libbroken.so.1");
  log().sinks().pop_back();
  EXPECT_TRUE(manager.is_loaded(3));
  EXPECT_TRUE(manager.is_loaded(4));
  EXPECT_EQ(manager.stats().loaded, 2u);
  EXPECT_EQ(manager.stats().partial_loads, 1u);
  EXPECT_EQ(manager.stats().load_failures, 0u);
  const std::string text = logged.str();
  EXPECT_NE(text.find("/usr/lib/libbroken.so.1"), std::string::npos) << text;
  EXPECT_NE(text.find("native: 1 malformed FDE skipped"), std::string::npos) << text;
  EXPECT_EQ(text.find("/whole"), std::string::npos) << "a whole load is not logged: " << text;
}

// The path handed to the loader is a descriptor the host keeps
// (/proc/self/fd/N); what keeps it open must live as long as the entry, so
// that a retry after the process exited still reads the file, and go with it.
TEST(ExecutableInfoManagerTest, DeferredRetryKeepsTheFileOpenAndTakesTheNewestPath) {
  FakeLoader loader;
  loader.failures_left = 1;
  ExecutableInfoManager manager(loader);
  auto first_file = std::make_shared<int>(1);
  std::weak_ptr<int> first_alive = first_file;
  auto t0 = ExecutableInfoManager::Clock::now();
  manager.add_or_inc_ref(9, "/proc/self/fd/40", std::move(first_file), "/usr/lib/libssl.so.3");
  EXPECT_FALSE(manager.is_loaded(9));
  EXPECT_FALSE(first_alive.expired()) << "the deferred entry let its file go";

  // A second process maps it while it waits: its path and file replace the
  // first (whose process may be gone by the retry).
  auto second_file = std::make_shared<int>(2);
  std::weak_ptr<int> second_alive = second_file;
  manager.add_or_inc_ref(9, "/proc/self/fd/41", std::move(second_file));
  EXPECT_TRUE(first_alive.expired());
  manager.retry_deferred(t0 + ExecutableInfoManager::kMaxRetry);
  EXPECT_TRUE(manager.is_loaded(9));
  EXPECT_EQ(loader.paths[9], "/proc/self/fd/41");

  manager.remove_or_dec_ref(9);
  EXPECT_FALSE(second_alive.expired());
  const auto t1 = ExecutableInfoManager::Clock::now();
  manager.remove_or_dec_ref(9, t1);
  EXPECT_FALSE(second_alive.expired()) << "kept for the next process: its file too";
  manager.retry_deferred(t1 + ExecutableInfoManager::kKeepUnmapped);
  EXPECT_TRUE(second_alive.expired()) << "the unload of a file no process maps must release it";
}

TEST(FileIdTest, SameContentsSameIdWhateverThePath) {
  fs::path dir = fs::temp_directory_path() / "omniprof-fileid";
  fs::create_directories(dir);
  fs::copy_file("/proc/self/exe", dir / "a", fs::copy_options::overwrite_existing);
  fs::copy_file("/proc/self/exe", dir / "b", fs::copy_options::overwrite_existing);
  auto a = compute_file_id(dir / "a");
  auto b = compute_file_id(dir / "b");
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, 0u);

  // One byte changed in the tail: another file.
  {
    std::fstream f(dir / "b", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x5a');
  }
  auto changed = compute_file_id(dir / "b");
  ASSERT_TRUE(changed);
  EXPECT_NE(*changed, *a);

  FileIdCache cache;
  auto cached = cache.file_id(dir / "a");
  ASSERT_TRUE(cached);
  EXPECT_EQ(*cached, *a);
  EXPECT_EQ(cache.size(), 1u);
  fs::remove_all(dir);
}

TEST(FileIdTest, MissingFileAndDirectoryAreErrorsNamingThePath) {
  auto missing = compute_file_id("/nonexistent/omniprof");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/omniprof"), std::string::npos);
  auto dir = compute_file_id("/tmp");
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().message.find("is a directory, not a regular file"), std::string::npos) << dir.error().message;
}

}  // namespace
}  // namespace omniprof
