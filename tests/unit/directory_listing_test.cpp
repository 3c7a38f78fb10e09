// list_directory: every entry of a directory, or an error naming it; never an
// exception (a range-for over std::filesystem::directory_iterator throws when
// advancing fails, which ended an agent run once).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/directory_listing.h"

namespace omniprof {
namespace {

namespace fs = std::filesystem;

TEST(DirectoryListingTest, ListsEveryEntry) {
  const fs::path dir = fs::path(testing::TempDir()) / "directory_listing_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  for (const char* name : {"a.yaml", "b.so", "c"}) std::ofstream(dir / name) << "x";
  auto entries = list_directory(dir.string());
  ASSERT_TRUE(entries) << entries.error().message;
  std::vector<std::string> names;
  for (const auto& entry : *entries) names.push_back(entry.filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.yaml", "b.so", "c", "sub"}));
  fs::remove_all(dir);
}

TEST(DirectoryListingTest, MissingDirectoryIsAnErrorNamingIt) {
  const std::string missing = (fs::path(testing::TempDir()) / "directory_listing_test_missing").string();
  fs::remove_all(missing);
  auto entries = list_directory(missing);
  ASSERT_FALSE(entries);
  EXPECT_NE(entries.error().message.find(missing), std::string::npos) << entries.error().message;
}

TEST(DirectoryListingTest, AFileIsNotADirectory) {
  const fs::path file = fs::path(testing::TempDir()) / "directory_listing_test_file";
  std::ofstream(file) << "x";
  auto entries = list_directory(file.string());
  ASSERT_FALSE(entries);
  EXPECT_NE(entries.error().message.find(file.string()), std::string::npos) << entries.error().message;
  fs::remove(file);
}

}  // namespace
}  // namespace omniprof
