// Files as the process maps them (map_files, the device/inode check, one
// kept descriptor per FileID), hostile files (FIFOs, devices, sockets,
// directories never block nor get read), and the symbol cache by FileID.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>

#include "omniprof/support/regular_file.h"
#include "executables/file_id.h"
#include "executables/open_executables.h"
#include "process/mapped_file.h"
#include "process/proc_maps.h"
#include "process/process_tracker.h"
#include "omniprof/support/debug_file_finder.h"
#include "omniprof/support/elf_file.h"
#include "symbolize/elf_symbolizer.h"
#include "symbolize/symbol_cache.h"

namespace omniprof {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return std::string(OMNIPROF_TEST_FIXTURES_DIR) + "/symbols/" + name; }

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "omniprof_mapped_XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

// Whether this process may open its own /proc/self/map_files entries
// (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: root here). Asked of the kernel
// with nothing of the code under test (no read_proc_maps, map_files_path,
// open_regular_file): the tests below expect those to succeed when this
// says the kernel allows it, so a broken open fails them instead of
// passing as "not permitted here". The test binary's own mapping (the first
// line of /proc/self/maps) is a file this process maps; map_files names it
// by the same range printed without leading zeros.
bool can_open_map_files() {
  std::ifstream maps("/proc/self/maps");
  std::string range;
  if (!(maps >> range)) return false;
  const size_t dash = range.find('-');
  if (dash == std::string::npos) return false;
  const unsigned long long start = std::stoull(range.substr(0, dash), nullptr, 16);
  const unsigned long long end = std::stoull(range.substr(dash + 1), nullptr, 16);
  char entry[96];
  std::snprintf(entry, sizeof(entry), "/proc/self/map_files/%llx-%llx", start, end);
  const int fd = ::open(entry, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

const ProcMapping* own_mapping(const std::vector<ProcMapping>& maps, const void* address) {
  return find_mapping(maps, reinterpret_cast<uint64_t>(address));
}

// The open file at a path known to be regular (a fixture).
RegularFile opened_file(const std::string& path) {
  auto file = open_regular_file(path);
  EXPECT_TRUE(file.ok()) << file.error().message;
  return file ? std::move(file).value() : RegularFile{};
}

// --- Hostile files -----------------------------------------------------------

// Every reader of process-named paths, each of which must refuse `path`
// without blocking, with an error naming the path and `what`.
void expect_every_reader_refuses(const std::string& path, const std::string& what) {
  const std::vector<std::pair<std::string, std::function<std::string()>>> readers = {
      {"open_regular_file", [&] { auto r = open_regular_file(path); return r ? "" : r.error().message; }},
      {"ElfFile::open", [&] { auto r = ElfFile::open(path); return r ? "" : r.error().message; }},
      {"compute_file_id", [&] { auto r = compute_file_id(path); return r ? "" : r.error().message; }},
      {"FileIdCache", [&] { FileIdCache c; auto r = c.file_id(path); return r ? "" : r.error().message; }},
      {"file_crc32", [&] { auto r = file_crc32(path); return r ? "" : r.error().message; }},
      {"ElfSymbolizer", [&] { ElfSymbolizer s; auto r = s.symbolize(1, path, 0x1000); return r ? "" : r.error().message; }},
      {"ElfSymbolizer by path", [&] { ElfSymbolizer s; auto r = s.find_symbol(path, "main"); return r ? "" : r.error().message; }},
  };
  for (const auto& [name, read] : readers) {
    // A reader that blocks fails the test instead of hanging it. (A FIFO
    // test unblocks a stuck reader by opening the FIFO for writing.)
    auto result = std::async(std::launch::async, read);
    if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << name << " blocked on " << path;
      int unblock = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
      result.wait();
      if (unblock >= 0) ::close(unblock);
      continue;
    }
    const std::string error = result.get();
    EXPECT_NE(error.find(path), std::string::npos) << name << ": " << error;
    EXPECT_NE(error.find(what), std::string::npos) << name << ": " << error;
  }
}

TEST(HostileFilesTest, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("libc.so.6");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  expect_every_reader_refuses(fifo, "a FIFO");
}

TEST(HostileFilesTest, CharacterDeviceIsRefusedBeforeAnyRead) {
  // Reading /dev/zero never ends; the refusal must come before the read.
  expect_every_reader_refuses("/dev/zero", "a character device");
}

TEST(HostileFilesTest, SocketIsRefused) {
  TempDir dir;
  const std::string path = dir.file("sock");
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(address.sun_path));
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(fd, 1), 0);
  expect_every_reader_refuses(path, "a socket");
  ::close(fd);
}

TEST(HostileFilesTest, DirectoryIsRefused) {
  TempDir dir;
  const std::string path = dir.file("lib");
  ASSERT_TRUE(fs::create_directory(path));
  expect_every_reader_refuses(path, "a directory");
}

TEST(HostileFilesTest, RegularFileOpensWithItsOwnStat) {
  auto file = open_regular_file(fixture("symbols_pie"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(fixture("symbols_pie").c_str(), &st), 0);
  EXPECT_EQ(file->st.st_ino, st.st_ino);
  EXPECT_EQ(file->st.st_size, st.st_size);
  // Not blocking matters at open only: reads of a regular file are normal.
  char magic[4];
  ASSERT_EQ(::pread(file->fd.get(), magic, 4, 0), 4);
  EXPECT_EQ(std::memcmp(magic, "\x7f" "ELF", 4), 0);
}

// --- Compressed sections -----------------------------------------------------

TEST(CompressedSectionBoundTest, BoundsOnTheDeclaredSize) {
  // Small sections always pass; past 1 MiB more than 64x is refused; past
  // 1 GiB everything is.
  EXPECT_TRUE(check_inflated_size("f", "s", kAlwaysInflatableBytes, 1).ok());
  EXPECT_TRUE(check_inflated_size("f", "s", 64 * 100000, 100000).ok());
  auto ratio = check_inflated_size("/lib/x.so", "section 7 (.symtab)", 65 * 100000, 100000);
  ASSERT_FALSE(ratio.ok());
  EXPECT_NE(ratio.error().message.find("/lib/x.so"), std::string::npos) << ratio.error().message;
  EXPECT_NE(ratio.error().message.find(".symtab"), std::string::npos) << ratio.error().message;
  EXPECT_NE(ratio.error().message.find("64x"), std::string::npos) << ratio.error().message;
  auto cap = check_inflated_size("/lib/x.so", "section 7 (.symtab)", kMaxInflatedSectionBytes + 1,
                                 kMaxInflatedSectionBytes);
  ASSERT_FALSE(cap.ok());
  EXPECT_NE(cap.error().message.find("more than the"), std::string::npos) << cap.error().message;
}

// --- Files as the process maps them ------------------------------------------

TEST(MappedFileTest, CandidatesPreferMapFilesAndSkipThePathOfDeletedFiles) {
  ProcMapping m;
  m.start = 0x7f0000001000;
  m.end = 0x7f0000003000;
  m.path = "/usr/lib/libc.so.6";
  EXPECT_EQ(mapped_file_candidates(42, m),
            (std::vector<std::string>{"/proc/42/map_files/7f0000001000-7f0000003000", "/proc/42/root/usr/lib/libc.so.6",
                                      "/usr/lib/libc.so.6"}));
  m.deleted = true;  // replaced by an upgrade: the path names the new file
  EXPECT_EQ(mapped_file_candidates(42, m), (std::vector<std::string>{"/proc/42/map_files/7f0000001000-7f0000003000"}));
  m.path = "/memfd:jit";  // memfd_create: reachable through map_files only
  EXPECT_EQ(mapped_file_candidates(42, m).size(), 1u);
  m.path = "[vdso]";
  EXPECT_TRUE(mapped_file_candidates(42, m).empty());
  m.path = "";
  EXPECT_TRUE(mapped_file_candidates(42, m).empty());
}

TEST(MappedFileTest, DeviceAndInodeMustBeTheMappedOnes) {
  TempDir dir;
  const std::string path = dir.file("lib.so");
  write_file(path, std::string(8192, 'a'));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ProcMapping m;
  m.inode = st.st_ino;
  m.dev_major = major(st.st_dev);
  m.dev_minor = minor(st.st_dev);
  EXPECT_TRUE(is_mapped_file(st, m, false));
  m.dev_minor += 1;
  EXPECT_FALSE(is_mapped_file(st, m, false));
  EXPECT_TRUE(is_mapped_file(st, m, true));  // map_files is the mapped file whatever st_dev says
  m.inode += 1;
  EXPECT_FALSE(is_mapped_file(st, m, true));
}

// The upgrade case: a file mapped, then another written and renamed over
// it. The mapping must be read as the old file, through map_files; through
// the path it is refused (another inode), never silently read.
TEST(MappedFileTest, ReplacedFileIsOpenedAsMappedOrRefused) {
  TempDir dir;
  const std::string path = dir.file("libreplaced.so");
  write_file(path, std::string(8192, 'o'));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* address = ::mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(address, MAP_FAILED);
  write_file(path + ".new", std::string(8192, 'n'));
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);

  auto maps = read_proc_maps(::getpid());
  ASSERT_TRUE(maps.ok()) << maps.error().message;
  const ProcMapping* m = own_mapping(*maps, address);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->deleted);
  auto opened = open_mapped_file(::getpid(), *m);
  if (can_open_map_files()) {
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    EXPECT_EQ(opened->path, map_files_path(::getpid(), *m));
    char byte = 0;
    ASSERT_EQ(::pread(opened->file.fd.get(), &byte, 1, 100), 1);
    EXPECT_EQ(byte, 'o') << "read the new file, not the mapped one";
  } else {
    ASSERT_FALSE(opened.ok());
    EXPECT_NE(opened.error().message.find(path), std::string::npos) << opened.error().message;
  }

  // Not deleted but the inode differs (a remap raced us, or maps is
  // stale): the /proc/PID/root candidate is refused naming the inode.
  ProcMapping stale = *m;
  stale.deleted = false;
  stale.start = stale.end = 1;  // no such map_files entry either
  auto refused = open_mapped_file(::getpid(), stale);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("inode"), std::string::npos) << refused.error().message;
  ::munmap(address, 8192);
}

// A process described from the kernel's records after it exited: no
// map_files, no /proc/PID/root. Its file is opened by path in the agent's
// namespace, and only if device and inode are the mapped ones.
TEST(MappedFileTest, FileOfAnExitedProcessIsOpenedByPathOnlyIfItIsTheMappedOne) {
  TempDir dir;
  const std::string path = dir.file("libgone.so");
  write_file(path, std::string(8192, 'g'));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: /proc/CHILD is gone
  ProcMapping m;
  m.start = 0x7f0000001000;
  m.end = 0x7f0000003000;
  m.path = path;
  m.inode = st.st_ino;
  m.dev_major = major(st.st_dev);
  m.dev_minor = minor(st.st_dev);
  auto opened = open_mapped_file(child, m);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  EXPECT_EQ(opened->path, path);
  m.inode += 1;  // another file now has the path
  auto refused = open_mapped_file(child, m);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("inode"), std::string::npos) << refused.error().message;
}

TEST(MappedFileTest, MemfdIsOpenedThroughMapFiles) {
  if (!can_open_map_files()) GTEST_SKIP() << "opening /proc/PID/map_files needs CAP_SYS_ADMIN";
  int fd = ::memfd_create("omniprof-jit", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::string contents(4096, 'm');
  ASSERT_EQ(::write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
  void* address = ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(address, MAP_FAILED);
  auto maps = read_proc_maps(::getpid());
  ASSERT_TRUE(maps.ok());
  const ProcMapping* m = own_mapping(*maps, address);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->path, "/memfd:omniprof-jit");
  EXPECT_TRUE(m->deleted);
  auto opened = open_mapped_file(::getpid(), *m);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  EXPECT_EQ(opened->file.st.st_size, 4096);
  ::munmap(address, 4096);
}

// --- FileIDs and kept descriptors --------------------------------------------

TEST(FileIdCacheTest, KeyedByTheFileOpenedNotByWhatThePathNamesNow) {
  TempDir dir;
  const std::string path = dir.file("lib.so");
  fs::copy_file(fixture("libsymbols_fixture.so"), path);
  auto old_file = open_regular_file(path);
  ASSERT_TRUE(old_file.ok());
  fs::copy_file(fixture("symbols_pie"), path + ".new");
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);

  FileIdCache cache;
  auto old_id = cache.file_id(*old_file, path);
  auto new_id = cache.file_id(path);
  ASSERT_TRUE(old_id.ok() && new_id.ok());
  EXPECT_EQ(*old_id, *compute_file_id(fixture("libsymbols_fixture.so")));
  EXPECT_EQ(*new_id, *compute_file_id(fixture("symbols_pie")));
  EXPECT_EQ(cache.size(), 2u);
  // Again through the old descriptor: a hit under its own key.
  EXPECT_EQ(*cache.file_id(*old_file, path), *old_id);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(OpenExecutablesTest, OneDescriptorPerFileIdReadableAfterTheFileIsGone) {
  TempDir dir;
  const std::string a = dir.file("a.so");
  const std::string b = dir.file("b.so");
  fs::copy_file(fixture("libsymbols_fixture.so"), a);
  fs::copy_file(fixture("libsymbols_fixture.so"), b);  // same contents, another path and inode
  FileIdCache ids;
  OpenExecutables files(ids, 8);
  auto first = files.identify(opened_file(a), a);
  auto second = files.identify(opened_file(b), b);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_NE(first->file, nullptr);
  EXPECT_EQ(first->file, second->file);
  EXPECT_EQ(first->file_id, second->file_id);
  EXPECT_EQ(files.stats().open, 1u);
  EXPECT_EQ(files.stats().reused, 1u);

  // Deleted from disk: the kept descriptor still reads it.
  fs::remove(a);
  fs::remove(b);
  ElfSymbolizer symbolizer;
  auto id = compute_file_id(first->file->path);
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(*id, first->file_id);
  auto build_id = symbolizer.build_id(first->file_id, first->file->path);
  EXPECT_TRUE(build_id.ok()) << build_id.error().message;

  // The last reference closes it.
  first->file.reset();
  second->file.reset();
  EXPECT_EQ(files.stats().open, 0u);
}

TEST(OpenExecutablesTest, PastTheBoundFilesAreIdentifiedNotKeptAndCounted) {
  FileIdCache ids;
  OpenExecutables files(ids, 1);
  auto kept = files.identify(opened_file(fixture("symbols_pie")), fixture("symbols_pie"));
  auto over = files.identify(opened_file(fixture("symbols_nopie")), fixture("symbols_nopie"));
  ASSERT_TRUE(kept.ok() && over.ok());
  EXPECT_NE(kept->file, nullptr);
  EXPECT_EQ(over->file, nullptr);
  EXPECT_EQ(over->file_id, *compute_file_id(fixture("symbols_nopie")));
  EXPECT_EQ(files.stats().not_kept, 1u);
  // Room again once the first is released.
  kept->file.reset();
  auto again = files.identify(opened_file(fixture("symbols_nopie")), fixture("symbols_nopie"));
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->file, nullptr);
}

// The unit-test twin of the e2e replaced-library test: this process
// dlopen()s a copy of a library, the copy is replaced on disk, and the
// tracker must still hand out a path reading the library as loaded.
TEST(ProcessTrackerFilesTest, ReplacedLibraryIsReadAsMapped) {
  if (!can_open_map_files()) GTEST_SKIP() << "opening /proc/PID/map_files needs CAP_SYS_ADMIN";
  TempDir dir;
  const std::string path = dir.file("libreplaced_unit.so");
  fs::copy_file(fixture("libsymbols_fixture.so"), path);
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << ::dlerror();
  void* function = ::dlsym(library, "omniprof_fixture_lib_add");
  ASSERT_NE(function, nullptr);
  fs::copy_file(fixture("symbols_pie"), path + ".new");
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);

  FileIdCache ids;
  OpenExecutables files(ids);
  ElfSymbolizer symbolizer;
  ProcessTracker tracker(nullptr, nullptr);
  tracker.track_executables(nullptr, &files, &symbolizer);
  auto snapshot = tracker.get(::getpid());
  ASSERT_NE(snapshot, nullptr);
  const uint64_t pc = reinterpret_cast<uint64_t>(function);
  const ProcMapping* m = snapshot->mapping_for(pc);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->path, path);
  EXPECT_TRUE(m->deleted);
  const ExecutableRef* ref = snapshot->executable_for(*m);
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(ref->file_id, *compute_file_id(fixture("libsymbols_fixture.so")));
  const std::string host_path = snapshot->host_path(*m);
  EXPECT_TRUE(host_path.starts_with("/proc/self/fd/")) << host_path;
  auto symbol = symbolizer.symbolize(ref->file_id, host_path, pc - ref->load_bias);
  ASSERT_TRUE(symbol.ok()) << symbol.error().message;
  ASSERT_TRUE(symbol->has_value());
  EXPECT_EQ((*symbol)->name, "omniprof_fixture_lib_add");

  // Exited: the kept descriptor outlives the process's map_files.
  tracker.handle_event(omniprof_event{OMNIPROF_EVENT_EXIT, static_cast<uint32_t>(::getpid())});
  auto exited = tracker.get(::getpid());
  ASSERT_NE(exited, nullptr);
  ASSERT_TRUE(exited->exited);
  EXPECT_EQ(exited->host_path(*exited->mapping_for(pc)), host_path);
  ::dlclose(library);
}

// Past the descriptor budget a file is read through map_files, which names
// nothing once the process is gone: host_path says so ("") rather than
// naming another file.
TEST(ProcessTrackerFilesTest, FileNotKeptIsReadThroughMapFilesWhileTheProcessLives) {
  if (!can_open_map_files()) GTEST_SKIP() << "opening /proc/PID/map_files needs CAP_SYS_ADMIN";
  FileIdCache ids;
  OpenExecutables files(ids, 0);
  ElfSymbolizer symbolizer;
  ProcessTracker tracker(nullptr, nullptr);
  tracker.track_executables(nullptr, &files, &symbolizer);
  auto snapshot = tracker.get(::getpid());
  ASSERT_NE(snapshot, nullptr);
  const uint64_t pc = reinterpret_cast<uint64_t>(&can_open_map_files);
  const ProcMapping* m = snapshot->mapping_for(pc);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(snapshot->host_path(*m), map_files_path(::getpid(), *m));
  EXPECT_NE(snapshot->executable_for(*m)->file_id, 0u);
  EXPECT_GT(files.stats().not_kept, 0u);

  tracker.handle_event(omniprof_event{OMNIPROF_EVENT_EXIT, static_cast<uint32_t>(::getpid()), 0});
  auto exited = tracker.get(::getpid());
  ASSERT_TRUE(exited && exited->exited);
  EXPECT_EQ(exited->host_path(*exited->mapping_for(pc)), "");
}

// --- Symbol cache --------------------------------------------------------------

std::pair<uint64_t, uint64_t> nm_address(const std::string& path, const std::string& name) {
  auto file = ElfFile::open(path);
  if (!file) return {0, 0};
  auto symbols = file->symbols();
  if (!symbols) return {0, 0};
  for (const ElfSymbol& s : *symbols) {
    if (s.name == name) return {s.value, s.size};
  }
  return {0, 0};
}

TEST(SymbolCacheTest, HitAcrossPathsAndRoundsWithoutRereadingTheFile) {
  TempDir dir;
  const std::string first_path = dir.file("first.so");
  fs::copy_file(fixture("libsymbols_fixture.so"), first_path);
  const uint64_t id = *compute_file_id(first_path);
  const auto [address, size] = nm_address(first_path, "omniprof_fixture_lib_add");
  ASSERT_NE(address, 0u);

  ElfSymbolizer symbolizer;
  SymbolCache cache(symbolizer);
  auto first = cache.lookup(id, first_path, address + 1);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->name, "omniprof_fixture_lib_add");
  EXPECT_EQ(cache.stats().misses, 1u);

  // Another process, another round, another path for the same FileID, and
  // the file gone from disk: answered from the cache, nothing read.
  fs::remove(first_path);
  auto again = cache.lookup(id, dir.file("elsewhere.so"), address + 1);
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ((*again)->name, "omniprof_fixture_lib_add");
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().entries, 1u);

  // A new address of the same FileID: read from the symbolizer's copy of
  // the file, parsed once under the FileID.
  auto other = cache.lookup(id, dir.file("elsewhere.so"), address);
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_EQ(cache.stats().misses, 2u);
}

TEST(SymbolCacheTest, ForgottenFileIsReadAgainAndErrorsAreNotCached) {
  TempDir dir;
  const std::string path = dir.file("lib.so");
  fs::copy_file(fixture("libsymbols_fixture.so"), path);
  const uint64_t id = *compute_file_id(path);
  const uint64_t address = nm_address(path, "omniprof_fixture_lib_add").first;
  ElfSymbolizer symbolizer;
  SymbolCache cache(symbolizer);
  ASSERT_TRUE(cache.lookup(id, path, address).ok());
  EXPECT_FALSE(cache.build_id(id, path).empty());

  cache.forget_if([&](uint64_t file_id) { return file_id == id; });
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().forgotten, 1u);
  fs::remove(path);
  // Forgotten with the symbolizer's copy: the file is needed again, and it
  // is gone, so this is an error (naming the path), and it is not cached.
  auto gone = cache.lookup(id, path, address);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message.find(path), std::string::npos) << gone.error().message;
  fs::copy_file(fixture("libsymbols_fixture.so"), path);
  auto back = cache.lookup(id, path, address);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->has_value());
}

TEST(SymbolCacheTest, BoundedInBytes) {
  const std::string path = fixture("libsymbols_fixture.so");
  const uint64_t id = *compute_file_id(path);
  const auto [address, size] = nm_address(path, "omniprof_fixture_lib_add");
  ASSERT_GT(size, 8u);
  ElfSymbolizer symbolizer;
  SymbolCache cache(symbolizer, 1024);  // a handful of entries
  for (uint64_t offset = 0; offset < size; ++offset) ASSERT_TRUE(cache.lookup(id, path, address + offset).ok());
  EXPECT_LE(cache.stats().bytes, 1024u);
  EXPECT_GT(cache.stats().evicted, 0u);
  EXPECT_EQ(cache.stats().entries + cache.stats().evicted, size);
}

}  // namespace
}  // namespace omniprof
