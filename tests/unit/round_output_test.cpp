// RoundOutput without a kernel: `run`'s rounds survive their directory being
// removed (recreated), or unwritable for a while (kept, then written under
// their own names), and at most kMaxPendingRounds wait (older ones dropped,
// counted). Also `record`'s pre-flight check of its output path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "profile/pprof_reader.h"
#include "profile/round_output.h"

namespace omniprof {
namespace {

namespace fs = std::filesystem;

ProfileBuilder profile_named(const std::string& comment) {
  ProfileBuilder builder(10000000, 1);
  builder.add_comment(comment);
  return builder;
}

// The comment of the profile written at path, or why it cannot be read.
std::string comment_of(const std::string& path) {
  auto profile = read_pprof_file(path);
  if (!profile) return "unreadable: " + profile.error().message;
  if (profile->comment_size() != 1) return "no comment";
  return profile->string_table(static_cast<int>(profile->comment(0)));
}

class RoundOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("omniprof-round-output-" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "profiles").string();
  }
  void TearDown() override { fs::remove_all(root_); }
  // Makes the directory unwritable even for root: a file stands where it was.
  void replace_directory_with_file() {
    fs::remove_all(dir_);
    std::ofstream(dir_) << "not a directory\n";
  }
  fs::path root_;
  std::string dir_;
};

TEST_F(RoundOutputTest, RemovedDirectoryIsRecreated) {
  RoundOutput output(dir_);
  EXPECT_EQ(output.write("r1.pb.gz", profile_named("r1")).size(), 1u);
  fs::remove_all(dir_);
  auto written = output.write("r2.pb.gz", profile_named("r2"));
  ASSERT_EQ(written, std::vector<std::string>{dir_ + "/r2.pb.gz"});
  EXPECT_EQ(comment_of(written[0]), "r2");
  EXPECT_EQ(output.stats().written, 2u);
  EXPECT_EQ(output.stats().write_failures, 0u);
}

TEST_F(RoundOutputTest, UnwritableRoundsAreKeptAndWrittenWhenItWorksAgain) {
  RoundOutput output(dir_);
  replace_directory_with_file();
  EXPECT_TRUE(output.write("r1.pb.gz", profile_named("r1")).empty());
  EXPECT_TRUE(output.write("r2.pb.gz", profile_named("r2")).empty());
  EXPECT_EQ(output.stats().pending, 2u);
  EXPECT_EQ(output.stats().write_failures, 2u);
  fs::remove(dir_);
  auto written = output.write("r3.pb.gz", profile_named("r3"));
  ASSERT_EQ(written, (std::vector<std::string>{dir_ + "/r1.pb.gz", dir_ + "/r2.pb.gz", dir_ + "/r3.pb.gz"}));
  for (const char* name : {"r1", "r2", "r3"}) {
    EXPECT_EQ(comment_of(dir_ + "/" + name + ".pb.gz"), name);
  }
  EXPECT_EQ(output.stats().pending, 0u);
  EXPECT_EQ(output.stats().dropped, 0u);
  // No temporary file left by the failed attempts.
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    files++;
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
  EXPECT_EQ(files, 3u);
}

TEST_F(RoundOutputTest, AtMostMaxPendingRoundsWaitTheOldestAreDropped) {
  RoundOutput output(dir_, 2);
  replace_directory_with_file();
  for (const char* name : {"r1", "r2", "r3", "r4"}) output.write(std::string(name) + ".pb.gz", profile_named(name));
  EXPECT_EQ(output.stats().pending, 2u);
  EXPECT_EQ(output.stats().dropped, 2u);
  fs::remove(dir_);
  EXPECT_EQ(output.flush(), (std::vector<std::string>{dir_ + "/r3.pb.gz", dir_ + "/r4.pb.gz"}));
  EXPECT_FALSE(fs::exists(dir_ + "/r1.pb.gz"));
}

TEST_F(RoundOutputTest, RecordChecksItsOutputPathBeforeSampling) {
  EXPECT_TRUE(check_profile_writable(root_ / "profile.pb.gz"));
  EXPECT_TRUE(fs::is_empty(root_)) << "the probe file was left behind";

  auto missing = check_profile_writable(root_ / "missing" / "profile.pb.gz");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "cannot write " + (root_ / "missing" / "profile.pb.gz").string() +
                                         ": directory " + (root_ / "missing").string() + " does not exist");

  auto directory = check_profile_writable(root_.string());
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error().message, "cannot write " + root_.string() + ": it is a directory");

  std::ofstream(root_ / "file") << "x";
  auto under_file = check_profile_writable(root_ / "file" / "profile.pb.gz");
  ASSERT_FALSE(under_file);
  EXPECT_NE(under_file.error().message.find((root_ / "file").string() + " is not a directory"), std::string::npos)
      << under_file.error().message;
}

}  // namespace
}  // namespace omniprof
