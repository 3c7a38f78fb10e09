#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "omniprof/offsets.hpp"

namespace omniprof::sdk {
namespace {

constexpr const char* kPythonOffsets = R"(# offsets for one runtime
runtime: python
versions:
  - version: "3.11"
    offsets:
      PyThreadState.frame: 72
      PyFrameObject.f_back: 24
  - version: "3.11.4"
    offsets:
      PyThreadState.frame: 0x50
      PyFrameObject.f_back: -1
  - version: 3.12
    offsets:
      PyThreadState.frame: 56
  - version: "3.10.2"
    offsets: {}
)";

// The message of the OffsetError that parsing `yaml` throws.
std::string parse_error(const std::string& yaml) {
  try {
    OffsetTable::parse(yaml, "python.yaml");
  } catch (const OffsetError& e) {
    return e.what();
  }
  return "<parsed without error>";
}

TEST(RuntimeVersionTest, ParsesMajorMinorAndPatch) {
  EXPECT_EQ(RuntimeVersion::parse("3.11.4"), (RuntimeVersion{3, 11, 4}));
  EXPECT_EQ(RuntimeVersion::parse("3.11"), (RuntimeVersion{3, 11, 0}));
  EXPECT_EQ(RuntimeVersion::parse("10.200.3000"), (RuntimeVersion{10, 200, 3000}));
}

TEST(RuntimeVersionTest, ToleratesSuffixes) {
  EXPECT_EQ(RuntimeVersion::parse("2.7.18+"), (RuntimeVersion{2, 7, 18}));
  EXPECT_EQ(RuntimeVersion::parse("3.13.0rc1"), (RuntimeVersion{3, 13, 0}));
  EXPECT_EQ(RuntimeVersion::parse("3.12.0a7"), (RuntimeVersion{3, 12, 0}));
  EXPECT_EQ(RuntimeVersion::parse("3.2.2p53"), (RuntimeVersion{3, 2, 2}));
  EXPECT_EQ(RuntimeVersion::parse("3.11-dev"), (RuntimeVersion{3, 11, 0}));
  EXPECT_EQ(RuntimeVersion::parse("3.11.x"), (RuntimeVersion{3, 11, 0}));
}

TEST(RuntimeVersionTest, RejectsWhatIsNotAVersion) {
  for (const char* text :
       {"", "3", "3.", ".11", "v3.11", "-3.11", "3.-1", "python", "99999999999.1"}) {
    EXPECT_EQ(RuntimeVersion::parse(text), std::nullopt) << text;
  }
}

TEST(RuntimeVersionTest, OrdersComponentWise) {
  EXPECT_LT((RuntimeVersion{3, 9, 18}), (RuntimeVersion{3, 10, 0}));
  EXPECT_LT((RuntimeVersion{2, 7, 18}), (RuntimeVersion{3, 0, 0}));
  EXPECT_EQ(RuntimeVersion::parse("3.11.4")->to_string(), "3.11.4");
}

TEST(OffsetTableTest, ParsesRuntimeAndVersions) {
  OffsetTable table = OffsetTable::parse(kPythonOffsets, "python.yaml");
  EXPECT_EQ(table.runtime(), "python");
  EXPECT_EQ(table.versions(), (std::vector<std::string>{"3.11", "3.11.4", "3.12", "3.10.2"}));
}

TEST(OffsetTableTest, MinorEntryMatchesEveryPatchRelease) {
  OffsetTable table = OffsetTable::parse(kPythonOffsets, "python.yaml");
  for (RuntimeVersion version : {RuntimeVersion{3, 11, 0}, RuntimeVersion{3, 11, 3},
                                 RuntimeVersion{3, 11, 5}, RuntimeVersion{3, 11, 99}}) {
    const Offsets* offsets = table.find(version);
    ASSERT_NE(offsets, nullptr) << version.to_string();
    EXPECT_EQ(offsets->version(), "3.11");
    EXPECT_EQ(offsets->get("PyThreadState.frame"), 72);
    EXPECT_EQ(offsets->get("PyFrameObject.f_back"), 24);
  }
  const Offsets* unquoted = table.find({3, 12, 1});
  ASSERT_NE(unquoted, nullptr);
  EXPECT_EQ(unquoted->version(), "3.12");
  EXPECT_EQ(unquoted->get("PyThreadState.frame"), 56);
}

TEST(OffsetTableTest, PatchEntryWinsOverMinorEntry) {
  OffsetTable table = OffsetTable::parse(kPythonOffsets, "python.yaml");
  const Offsets* offsets = table.find({3, 11, 4});
  ASSERT_NE(offsets, nullptr);
  EXPECT_EQ(offsets->version(), "3.11.4");
  EXPECT_EQ(offsets->get("PyThreadState.frame"), 0x50);
  EXPECT_EQ(offsets->get("PyFrameObject.f_back"), -1);
}

TEST(OffsetTableTest, PatchEntryOnlyMatchesItsPatch) {
  OffsetTable table = OffsetTable::parse(kPythonOffsets, "python.yaml");
  const Offsets* exact = table.find({3, 10, 2});
  ASSERT_NE(exact, nullptr);
  EXPECT_EQ(exact->version(), "3.10.2");
  EXPECT_EQ(table.find({3, 10, 3}), nullptr);
  EXPECT_EQ(table.find({3, 10, 0}), nullptr);
}

TEST(OffsetTableTest, NoMatch) {
  OffsetTable table = OffsetTable::parse(kPythonOffsets, "python.yaml");
  EXPECT_EQ(table.find({3, 13, 0}), nullptr);
  EXPECT_EQ(table.find({2, 11, 0}), nullptr);
  EXPECT_EQ(table.find({4, 11, 4}), nullptr);
}

TEST(OffsetTableTest, MissingFieldNamesFieldAndVersion) {
  OffsetTable table = OffsetTable::parse(kPythonOffsets, "python.yaml");
  const Offsets* offsets = table.find({3, 12, 0});
  ASSERT_NE(offsets, nullptr);
  EXPECT_EQ(offsets->find("PyFrameObject.f_back"), std::nullopt);
  EXPECT_EQ(offsets->find("PyThreadState.frame"), 56);
  try {
    offsets->get("PyFrameObject.f_back");
    FAIL() << "get of a missing field did not throw";
  } catch (const OffsetError& e) {
    EXPECT_STREQ(e.what(),
                 "python.yaml:12: python 3.12 has no offset for \"PyFrameObject.f_back\"");
  }
}

TEST(OffsetTableTest, ParseErrorsNameLineAndKey) {
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offsets:\n"
                        "      a.b: 1\n      c.d: abc\n"),
            "python.yaml:6: versions[0].offsets.c.d: expected an integer offset, got \"abc\"");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offsets:\n"
                        "      a.b: [1]\n"),
            "python.yaml:5: versions[0].offsets.a.b: expected an integer offset, got a list");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offsets:\n"
                        "      a.b: 1.5\n"),
            "python.yaml:5: versions[0].offsets.a.b: expected an integer offset, got \"1.5\"");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offsets:\n"
                        "      a.b:\n"),
            "python.yaml:5: versions[0].offsets.a.b: expected an integer offset, got nothing");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offsets:\n"
                        "      a.b: 9223372036854775808\n"),
            "python.yaml:5: versions[0].offsets.a.b: 9223372036854775808 does not fit in 64 bits");
}

TEST(OffsetTableTest, LeadingZeroIsDecimalNotOctal) {
  OffsetTable table = OffsetTable::parse(
      "runtime: ruby\nversions:\n  - version: \"3.2\"\n    offsets:\n      a: 072\n"
      "      b: -9223372036854775808\n",
      "ruby.yaml");
  const Offsets* offsets = table.find({3, 2, 2});
  ASSERT_NE(offsets, nullptr);
  EXPECT_EQ(offsets->get("a"), 72);
  EXPECT_EQ(offsets->get("b"), INT64_MIN);
}

TEST(OffsetTableTest, VersionErrors) {
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offsets: {}\n"
                        "  - version: \"3.12\"\n    offsets: {}\n  - version: \"3.11\"\n"
                        "    offsets: {}\n"),
            "python.yaml:7: versions[2].version: duplicate version 3.11 (first at python.yaml:3)");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11.4\"\n    offsets: {}\n"
                        "  - version: \"3.11.04\"\n    offsets: {}\n"),
            "python.yaml:5: versions[1].version: duplicate version 3.11.04 (first at "
            "python.yaml:3)");
  for (const char* bad : {"3", "3.11+", "3.11.4.1", "3.x", "3.11.", "v3.11"}) {
    EXPECT_EQ(parse_error(std::string("runtime: python\nversions:\n  - version: \"") + bad +
                          "\"\n    offsets: {}\n"),
              std::string("python.yaml:3: versions[0].version: expected a version \"MAJOR.MINOR\" "
                          "or \"MAJOR.MINOR.PATCH\", got \"") +
                  bad + "\"");
  }
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - offsets: {}\n"),
            "python.yaml:3: versions[0]: missing required key `version`");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n"),
            "python.yaml:3: versions[0]: missing required key `offsets`");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offsets:\n"),
            "python.yaml:4: versions[0].offsets: expected a mapping of field: offset, got nothing");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offset: {}\n"),
            "python.yaml:4: versions[0].offset: unknown key (known: version, offsets)");
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - \"3.11\"\n"),
            "python.yaml:3: versions[0]: expected a mapping with `version` and `offsets`, got "
            "\"3.11\"");
}

TEST(OffsetTableTest, DuplicateField) {
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: \"3.11\"\n    offsets:\n"
                        "      a.b: 1\n      c.d: 2\n      a.b: 3\n"),
            "python.yaml:7: versions[0].offsets.a.b: duplicate key (first on line 5)");
}

TEST(OffsetTableTest, TopLevelErrors) {
  EXPECT_EQ(parse_error(""), "python.yaml: empty offsets file, expected `runtime` and `versions`");
  EXPECT_EQ(parse_error("# nothing\n"),
            "python.yaml: empty offsets file, expected `runtime` and `versions`");
  EXPECT_EQ(parse_error("- 1\n"),
            "python.yaml:1: expected a mapping with `runtime` and `versions`, got a list");
  EXPECT_EQ(parse_error("versions:\n  - version: \"3.11\"\n    offsets: {}\n"),
            "python.yaml:1: missing required key `runtime`");
  EXPECT_EQ(parse_error("runtime: python\n"), "python.yaml:1: missing required key `versions`");
  EXPECT_EQ(parse_error("runtime: python\nversions: []\n"),
            "python.yaml:2: versions: expected a non-empty list of {version, offsets} entries, "
            "got a list");
  EXPECT_EQ(parse_error("runtime:\nversions: []\n"),
            "python.yaml:1: runtime: expected a name, got nothing");
  EXPECT_EQ(parse_error("runtime: python\nruntme: ruby\n"),
            "python.yaml:2: runtme: unknown key (known: runtime, versions)");
  EXPECT_EQ(parse_error("runtime: python\n---\nruntime: ruby\n"),
            "python.yaml:3: expected one YAML document, found 2");
}

TEST(OffsetTableTest, YamlSyntaxError) {
  EXPECT_EQ(parse_error("runtime: python\nversions:\n  - version: [3.11\n"),
            "python.yaml:4: invalid YAML: end of sequence flow not found");
}

TEST(OffsetTableTest, LoadsAFile) {
  std::string path = ::testing::TempDir() + "omniprof_offsets_XXXXXX";
  int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << kPythonOffsets;
  OffsetTable table = OffsetTable::load_file(path);
  std::remove(path.c_str());
  EXPECT_EQ(table.runtime(), "python");
  ASSERT_NE(table.find({3, 11, 4}), nullptr);
}

TEST(OffsetTableTest, MissingFile) {
  const std::string path = ::testing::TempDir() + "omniprof_no_such_dir/python.yaml";
  try {
    OffsetTable::load_file(path);
    FAIL() << "loading a missing file did not throw";
  } catch (const OffsetError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot open " + path + ": No such file or directory");
  }
}

}  // namespace
}  // namespace omniprof::sdk
