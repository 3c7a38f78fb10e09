#include "process/proc_maps.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace omniprof {
namespace {

namespace fs = std::filesystem;

// Not static, not inlined: its address must be in this binary's text mapping.
__attribute__((noinline)) int proc_maps_test_function(int value) { return value * 2 + 1; }

TEST(ParseProcMapsTest, ParsesAllFields) {
  auto mappings = parse_proc_maps(
      "55d0c6a00000-55d0c6a21000 r-xp 00002000 fd:01 1835025                    /usr/bin/cat\n"
      "7ffd3f1e0000-7ffd3f201000 rw-p 00000000 00:00 0                          [stack]\n"
      "7f12a0000000-7f12a0021000 rw-p 00000000 00:00 0 \n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
      "7f12a1000000-7f12a1001000 r--s 00001000 103:0a 42 /dev/shm/segment\n");
  ASSERT_TRUE(mappings.ok()) << mappings.error().message;
  ASSERT_EQ(mappings->size(), 5u);

  const ProcMapping& cat = (*mappings)[0];
  EXPECT_EQ(cat.start, 0x55d0c6a00000u);
  EXPECT_EQ(cat.end, 0x55d0c6a21000u);
  EXPECT_EQ(cat.perms, "r-xp");
  EXPECT_EQ(cat.offset, 0x2000u);
  EXPECT_EQ(cat.dev_major, 0xfdu);
  EXPECT_EQ(cat.dev_minor, 0x01u);
  EXPECT_EQ(cat.inode, 1835025u);
  EXPECT_EQ(cat.path, "/usr/bin/cat");
  EXPECT_FALSE(cat.deleted);
  EXPECT_TRUE(cat.executable());
  EXPECT_TRUE(cat.is_file_backed());
  EXPECT_TRUE(cat.contains(0x55d0c6a00000));
  EXPECT_FALSE(cat.contains(0x55d0c6a21000));

  const ProcMapping& stack = (*mappings)[1];
  EXPECT_EQ(stack.path, "[stack]");
  EXPECT_FALSE(stack.executable());
  EXPECT_FALSE(stack.is_file_backed());

  const ProcMapping& anonymous = (*mappings)[2];
  EXPECT_EQ(anonymous.path, "");
  EXPECT_FALSE(anonymous.is_file_backed());

  const ProcMapping& vsyscall = (*mappings)[3];
  EXPECT_EQ(vsyscall.end, 0xffffffffff601000u);
  EXPECT_TRUE(vsyscall.executable());
  EXPECT_FALSE(vsyscall.is_file_backed());

  const ProcMapping& shared = (*mappings)[4];
  EXPECT_EQ(shared.perms, "r--s");
  EXPECT_EQ(shared.dev_major, 0x103u);
  EXPECT_EQ(shared.dev_minor, 0x0au);
  EXPECT_EQ(shared.path, "/dev/shm/segment");
}

TEST(ParseProcMapsTest, PathsWithSpacesAndDeletedFiles) {
  auto mappings = parse_proc_maps(
      "7f0000000000-7f0000001000 r-xp 00000000 08:01 11 /opt/My App/lib thing.so\n"
      "7f0000001000-7f0000002000 r-xp 00000000 08:01 12 /tmp/replaced.so (deleted)\n"
      "7f0000002000-7f0000003000 rw-s 00000000 00:01 13 /memfd:jit-cache (deleted)\n"
      "7f0000003000-7f0000004000 r-xp 00000000 08:01 14 /opt/name with (deleted) inside.so\n"
      "7f0000004000-7f0000005000 r-xp 00000000 00:00 0 [vdso]\n");
  ASSERT_TRUE(mappings.ok()) << mappings.error().message;
  ASSERT_EQ(mappings->size(), 5u);
  EXPECT_EQ((*mappings)[0].path, "/opt/My App/lib thing.so");
  EXPECT_FALSE((*mappings)[0].deleted);
  EXPECT_EQ((*mappings)[1].path, "/tmp/replaced.so");
  EXPECT_TRUE((*mappings)[1].deleted);
  EXPECT_TRUE((*mappings)[1].is_file_backed());
  EXPECT_EQ((*mappings)[2].path, "/memfd:jit-cache");
  EXPECT_TRUE((*mappings)[2].deleted);
  EXPECT_EQ((*mappings)[3].path, "/opt/name with (deleted) inside.so");
  EXPECT_FALSE((*mappings)[3].deleted);
  EXPECT_EQ((*mappings)[4].path, "[vdso]");
  EXPECT_TRUE((*mappings)[4].executable());
  EXPECT_FALSE((*mappings)[4].is_file_backed());
}

TEST(ParseProcMapsTest, MalformedLineIsAnErrorNamingIt) {
  const char* cases[] = {
      "7f0000000000 r-xp 00000000 08:01 11 /lib/a.so",             // no range dash
      "7f0000000000-7f0000001000 rxp 00000000 08:01 11 /lib/a.so",  // 3-char perms
      "7f0000000000-7f0000001000 r-xq 00000000 08:01 11 /lib/a.so", // bad sharing flag
      "7f0000000000-7f0000001000 r-xp 0000zz00 08:01 11 /lib/a.so", // bad offset
      "7f0000000000-7f0000001000 r-xp 00000000 0801 11 /lib/a.so",  // no device colon
      "7f0000000000-7f0000001000 r-xp 00000000 08:01 1x /lib/a.so", // bad inode
      "7f0000001000-7f0000000000 r-xp 00000000 08:01 11 /lib/a.so", // end before start
      "7f0000000000-7f0000001000 r-xp 00000000 08:01",              // no inode
      "1ffffffffffffffff-2ffffffffffffffff r-xp 00000000 08:01 11", // overflow
  };
  for (const char* bad_line : cases) {
    SCOPED_TRACE(bad_line);
    const std::string text =
        std::string("7f0000010000-7f0000011000 r-xp 00000000 08:01 11 /lib/good.so\n") + bad_line + "\n";
    auto mappings = parse_proc_maps(text);
    ASSERT_FALSE(mappings.ok());
    EXPECT_NE(mappings.error().message.find("line 2"), std::string::npos) << mappings.error().message;
    EXPECT_NE(mappings.error().message.find(bad_line), std::string::npos) << mappings.error().message;
  }
}

TEST(ParseProcMapsTest, EmptyTextHasNoMappings) {
  auto mappings = parse_proc_maps("");
  ASSERT_TRUE(mappings.ok());
  EXPECT_TRUE(mappings->empty());
}

TEST(ReadProcMapsTest, ReadsOwnMaps) {
  auto mappings = read_proc_maps(::getpid());
  ASSERT_TRUE(mappings.ok()) << mappings.error().message;
  ASSERT_FALSE(mappings->empty());

  // This function lies in an executable mapping of this test binary.
  const ProcMapping* text = find_mapping(*mappings, reinterpret_cast<uint64_t>(&proc_maps_test_function));
  ASSERT_NE(text, nullptr);
  EXPECT_TRUE(text->executable());
  EXPECT_TRUE(text->is_file_backed());
  EXPECT_EQ(fs::canonical(text->path), fs::canonical("/proc/self/exe"));
  EXPECT_NE(text->inode, 0u);

  // A local variable lies on the stack.
  int local = 0;
  const ProcMapping* stack = find_mapping(*mappings, reinterpret_cast<uint64_t>(&local));
  ASSERT_NE(stack, nullptr);
  EXPECT_EQ(stack->path, "[stack]");

  bool has_vdso = false;
  for (size_t i = 0; i < mappings->size(); ++i) {
    has_vdso |= (*mappings)[i].path == "[vdso]";
    if (i > 0) {
      EXPECT_LE((*mappings)[i - 1].end, (*mappings)[i].start) << "sorted, non-overlapping";
    }
  }
  EXPECT_TRUE(has_vdso);
  EXPECT_EQ(find_mapping(*mappings, 0), nullptr);
}

// A real mapping of a file whose name has spaces, which is then deleted.
TEST(ReadProcMapsTest, SpacesAndDeletedFilesInRealMaps) {
  std::string dir_pattern = (fs::temp_directory_path() / "omniprof_maps_XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir_pattern.data()), nullptr);
  const std::string path = dir_pattern + "/a file with spaces.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(8192, 'x');
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* address = ::mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd, 4096);
  ::close(fd);
  ASSERT_NE(address, MAP_FAILED);

  auto before = read_proc_maps(::getpid());
  ASSERT_TRUE(before.ok()) << before.error().message;
  const ProcMapping* mapping = find_mapping(*before, reinterpret_cast<uint64_t>(address));
  ASSERT_NE(mapping, nullptr);
  EXPECT_EQ(mapping->path, path);
  EXPECT_FALSE(mapping->deleted);
  EXPECT_EQ(mapping->offset, 4096u);
  EXPECT_EQ(mapping->perms, "r--p");

  fs::remove(path);
  auto after = read_proc_maps(::getpid());
  ASSERT_TRUE(after.ok()) << after.error().message;
  mapping = find_mapping(*after, reinterpret_cast<uint64_t>(address));
  ASSERT_NE(mapping, nullptr);
  EXPECT_EQ(mapping->path, path);
  EXPECT_TRUE(mapping->deleted);
  EXPECT_TRUE(mapping->is_file_backed());

  ::munmap(address, 8192);
  fs::remove_all(dir_pattern);
}

TEST(ReadProcMapsTest, ExitedProcessIsAnErrorSayingSo) {
  // A child that has exited and been reaped: its PID no longer exists.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);

  auto mappings = read_proc_maps(child);
  ASSERT_FALSE(mappings.ok());
  EXPECT_NE(mappings.error().message.find("exited"), std::string::npos) << mappings.error().message;
  EXPECT_NE(mappings.error().message.find(std::to_string(child)), std::string::npos);

  auto nonsense = read_proc_maps(INT_MAX);
  ASSERT_FALSE(nonsense.ok());
  EXPECT_NE(nonsense.error().message.find("exited"), std::string::npos);
}

}  // namespace
}  // namespace omniprof
