// Path trust: a file is loaded only if nobody but root (or the agent's own
// user) could have written it or swapped it through a directory on its path.
#include "trust/path_trust.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "temp_tree.h"

namespace omniprof {
namespace {

using testing_support::TempTree;

// A uid that owns nothing here (Debian's `nobody`).
constexpr uid_t kOtherUid = 65534;

std::string trust_error(const std::string& path) {
  auto r = check_trusted_path(path);
  return r ? "<trusted>" : r.error().message;
}

TEST(PathTrustTest, RootOwnedFileInRootOwnedDirectoriesIsTrusted) {
  TempTree tree("trust");
  std::string file = tree.file("etc/omniprof.yaml", "log_level: info\n");
  // Its path passes through /tmp (sticky, 1777, root's) on the way to `/`.
  EXPECT_EQ(trust_error(file), "<trusted>");
  EXPECT_EQ(trust_error(tree.root()), "<trusted>");
}

TEST(PathTrustTest, GroupWritableFileIsRefusedWithItsGroupAndMode) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another group";
  TempTree tree("trust");
  std::string file = tree.file("plugins/ruby.so", "x", 0664);
  ASSERT_EQ(::chown(file.c_str(), 0, 65534), 0);
  EXPECT_EQ(trust_error(file), "file is group-writable by gid 65534 (mode 0664)");
}

// Group root is root: what root makes with umask 002 stays trusted.
TEST(PathTrustTest, GroupWritableByGroupRootIsTrusted) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to group root";
  TempTree tree("trust");
  std::string file = tree.file("plugins/ruby.so", "x", 0664);
  tree.dir("plugins", 0775);
  ASSERT_EQ(::chown(file.c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(tree.path("plugins").c_str(), 0, 0), 0);
  EXPECT_EQ(trust_error(file), "<trusted>");
}

TEST(PathTrustTest, WorldWritableFileIsRefused) {
  TempTree tree("trust");
  std::string file = tree.file("conf.d/10-x.yaml", "x", 0646);
  EXPECT_EQ(trust_error(file), "file is world-writable (mode 0646)");
}

TEST(PathTrustTest, WorldWritableDirectoryAnywhereOnThePathIsRefused) {
  TempTree tree("trust");
  tree.dir("opt", 0777);
  std::string file = tree.file("opt/lib/plugins/ruby.so", "x");
  tree.dir("opt/lib/plugins", 0755);
  EXPECT_EQ(trust_error(file), tree.path("opt") + ": directory is world-writable (mode 0777)");
}

TEST(PathTrustTest, GroupWritableDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another group";
  TempTree tree("trust");
  std::string file = tree.file("conf.d/10-x.yaml", "x");
  tree.dir("conf.d", 0775);
  ASSERT_EQ(::chown(tree.path("conf.d").c_str(), 0, 65534), 0);
  EXPECT_EQ(trust_error(file), tree.path("conf.d") + ": directory is group-writable by gid 65534 (mode 0775)");
}

TEST(PathTrustTest, FileOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  TempTree tree("trust");
  std::string file = tree.file("plugins/ruby.so", "x");
  ASSERT_EQ(::chown(file.c_str(), kOtherUid, 0), 0);
  EXPECT_EQ(trust_error(file), "file is owned by uid 65534, not by root");
}

TEST(PathTrustTest, DirectoryOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  TempTree tree("trust");
  std::string file = tree.file("home/plugins/ruby.so", "x");
  ASSERT_EQ(::chown(tree.path("home").c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_EQ(trust_error(file), tree.path("home") + ": directory is owned by uid 65534, not by root");
}

// A sticky world-writable directory is safe to pass through only because
// what lies below it is a trusted owner's: another user's file in it is not.
TEST(PathTrustTest, StickyRootDirectoryPassesButAnotherUsersFileInItDoesNot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to own a sticky directory and give a file away";
  TempTree tree("trust");
  tree.dir("shared", 01777);
  std::string mine = tree.file("shared/mine.yaml", "x");
  std::string theirs = tree.file("shared/theirs.yaml", "x");
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_EQ(trust_error(mine), "<trusted>");
  EXPECT_EQ(trust_error(theirs), "file is owned by uid 65534, not by root");
  // Sticky but not root's: its owner could replace what is in it.
  ASSERT_EQ(::chown(tree.path("shared").c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_EQ(trust_error(mine), tree.path("shared") + ": directory is owned by uid 65534, not by root");
}

// The check follows a symlink to the file it names, which is the one loaded.
TEST(PathTrustTest, SymlinkIsJudgedByItsTarget) {
  TempTree tree("trust");
  std::string target = tree.file("real/ruby.so", "x", 0666);
  std::string link = tree.path("ruby.so");
  std::filesystem::create_symlink(target, link);
  EXPECT_EQ(trust_error(link), "its target " + target + ": file is world-writable (mode 0666)");
}

// What to open is the file that was checked (the link is not followed a
// second time); the directories the link sits in count too, since whoever
// can write them can point it elsewhere.
TEST(PathTrustTest, SymlinkIsTrustedOnlyWhereItSitsAndWhatItNames) {
  TempTree tree("trust");
  std::string target = tree.file("real/ruby.so", "x");
  std::string link = tree.path("links/ruby.so");
  tree.dir("links");
  std::filesystem::create_symlink(target, link);
  auto r = check_trusted_path(link);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, target);
  tree.dir("links", 0777);
  EXPECT_EQ(trust_error(link), tree.path("links") + ": directory is world-writable (mode 0777)");
}

TEST(PathTrustTest, MissingFileIsAnErrorNamingIt) {
  TempTree tree("trust");
  EXPECT_EQ(trust_error(tree.path("absent.so")), tree.path("absent.so") + ": No such file or directory");
}

// An agent running as an ordinary user trusts its own files, and only those
// and root's.
TEST(PathTrustTest, TrustedOwnersAreRootAndThisProcessesUser) {
  auto owners = PathTrustPolicy::for_this_process().trusted_owners;
  EXPECT_EQ(owners.front(), 0u);
  EXPECT_EQ(std::count(owners.begin(), owners.end(), geteuid()), 1);
  PathTrustPolicy only_other{{kOtherUid}};
  TempTree tree("trust");
  std::string file = tree.file("x.yaml", "x");
  auto r = check_trusted_path(file, only_other);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "file is owned by uid " + std::to_string(geteuid()) + ", not by root");
}

}  // namespace
}  // namespace omniprof
