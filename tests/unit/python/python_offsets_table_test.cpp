#include "python_offsets_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <omniprof/offsets.hpp>
#include <sstream>

namespace omniprof::python {
namespace {

std::string shipped_yaml() {
  std::ifstream in(OMNIPROF_PYTHON_YAML);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One version entry with every key, `replace` swapping one line.
std::string one_entry(const std::string& version, const std::string& drop_key = "",
                      const std::string& extra_line = "") {
  std::string text = "runtime: python\nversions:\n  - version: \"" + version + "\"\n    offsets:\n";
  for (std::string_view key : kPythonOffsetSchema.keys()) {
    if (key == drop_key) continue;
    std::string value = key == "version_hex"                           ? "0x030b0000"
                        : (key == "frame_model" || key == "gil_model") ? "2"
                                                                       : "8";
    text += "      " + std::string(key) + ": " + value + "\n";
  }
  return text + extra_line;
}

TEST(PythonOffsetsTable, LoadsEveryShippedVersion) {
  PythonOffsetsTable table = PythonOffsetsTable::parse(shipped_yaml(), "python.yaml");
  for (auto [major, minor] :
       {std::pair{2, 7}, {3, 6}, {3, 7}, {3, 8}, {3, 9}, {3, 10}, {3, 11}, {3, 12}, {3, 13}, {3, 14}, {3, 15}}) {
    const PythonVersionOffsets* offsets = table.find(major, minor);
    ASSERT_NE(offsets, nullptr) << major << "." << minor;
    EXPECT_EQ(offsets->bpf.version_hex, static_cast<uint32_t>(major << 24 | minor << 16));
  }
  EXPECT_EQ(table.versions().size(), 11u);
  const PythonVersionOffsets* v311 = table.find(3, 11);
  EXPECT_EQ(v311->bpf.frame_model, PYTHON_INTERPRETER_FRAME_311);
  EXPECT_EQ(v311->bpf.interp_ceval_gil, PYTHON_OFFSET_NONE);  // -1 in the file
  EXPECT_EQ(v311->reader.co_lnotab, -1);
  EXPECT_GT(v311->reader.co_qualname, 0);
}

TEST(PythonOffsetsTable, UnknownVersionIsNull) {
  PythonOffsetsTable table = PythonOffsetsTable::parse(shipped_yaml(), "python.yaml");
  EXPECT_EQ(table.find(3, 16), nullptr);
  EXPECT_EQ(table.find(3, 5), nullptr);
}

void expect_error(const std::string& yaml, const std::vector<std::string>& parts) {
  try {
    (void)PythonOffsetsTable::parse(yaml, "test.yaml");
    ADD_FAILURE() << "no error for:\n" << yaml;
  } catch (const sdk::OffsetError& error) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
  }
}

TEST(PythonOffsetsTable, MissingKeyNamesFileVersionAndKey) {
  (void)PythonOffsetsTable::parse(one_entry("3.11"), "test.yaml");  // complete: loads
  expect_error(one_entry("3.11", "tstate_frame"), {"test.yaml", "3.11", "tstate_frame", "missing"});
}

TEST(PythonOffsetsTable, RejectsUnknownKeysBadValuesAndPatchEntries) {
  expect_error(one_entry("3.11", "", "      tstate_fram: 3\n"),
               {"test.yaml", "3.11", "tstate_fram", "unknown"});
  std::string big = one_entry("3.11", "frame_back", "      frame_back: 65535\n");
  expect_error(big, {"3.11", "frame_back", "65535"});
  expect_error(one_entry("3.11", "frame_model", "      frame_model: -1\n"), {"frame_model"});
  expect_error(one_entry("3.11.4"), {"3.11.4", "MAJOR.MINOR"});
  expect_error(one_entry("3.12"), {"version_hex"});  // 0x030b0000 in a 3.12 entry
  std::string other_runtime = one_entry("3.11");
  other_runtime.replace(other_runtime.find("python"), 6, "ruby");
  expect_error(other_runtime, {"ruby"});
}

TEST(PythonOffsetsTable, SetAndGetRoundTrip) {
  PythonVersionOffsets offsets;
  EXPECT_TRUE(kPythonOffsetSchema.set(offsets, "frame_lasti", -1));
  EXPECT_EQ(offsets.bpf.frame_lasti, PYTHON_OFFSET_NONE);
  EXPECT_EQ(kPythonOffsetSchema.value(offsets, "frame_lasti"), -1);
  EXPECT_TRUE(kPythonOffsetSchema.set(offsets, "frame_lasti", 56));
  EXPECT_EQ(offsets.bpf.frame_lasti, 56);
  EXPECT_FALSE(kPythonOffsetSchema.set(offsets, "frame_lasti", 0x10000));
  EXPECT_FALSE(kPythonOffsetSchema.set(offsets, "no_such_key", 1));
  EXPECT_TRUE(kPythonOffsetSchema.set(offsets, "co_name", 120));
  EXPECT_EQ(offsets.reader.co_name, 120);
  EXPECT_THROW(kPythonOffsetSchema.value(offsets, "no_such_key"), std::out_of_range);
}

// frame_header_bytes: the walk reads a frame's fields from one read of that
// many bytes, so every field it reads must lie inside, on every shipped
// version (each within PYPERF_FRAME_HEADER_MAX: none falls back to a read a
// field).
TEST(PythonOffsetsTable, EveryShippedVersionsFrameFieldsLieInItsOneReadHeader) {
  PythonOffsetsTable table = PythonOffsetsTable::parse(shipped_yaml(), "python.yaml");
  for (PythonVersionOffsets offsets : table.versions()) {
    set_derived_offsets(offsets);
    const python_offsets& b = offsets.bpf;
    const uint32_t header = b.frame_header_bytes;
    SCOPED_TRACE(std::to_string(offsets.major) + "." + std::to_string(offsets.minor));
    EXPECT_GT(header, 0u);
    EXPECT_LE(header, static_cast<uint32_t>(PYPERF_FRAME_HEADER_MAX));
    uint32_t furthest = 0;
    auto inside = [&](const char* name, uint16_t offset, uint32_t size) {
      if (offset == PYTHON_OFFSET_NONE) return;
      EXPECT_LE(offset + size, header) << name;
      furthest = std::max(furthest, offset + size);
    };
    inside("frame_back", b.frame_back, 8);
    inside("frame_code", b.frame_code, 8);
    inside("frame_lasti", b.frame_lasti, b.frame_model == PYTHON_FRAME_OBJECT ? 4 : 8);
    inside("frame_owner", b.frame_owner, 1);
    inside("frame_is_entry", b.frame_is_entry, 1);
    EXPECT_EQ(header, furthest) << "the read copies no more than the furthest field needs";
  }
}

// A layout whose fields lie past PYPERF_FRAME_HEADER_MAX gets 0: the walk
// then reads each field on its own rather than a header that misses one.
TEST(PythonOffsetsTable, AFrameFieldPastTheHeaderLimitTurnsTheOneReadOff) {
  PythonOffsetsTable table = PythonOffsetsTable::parse(shipped_yaml(), "python.yaml");
  PythonVersionOffsets offsets = *table.find(3, 12);
  offsets.bpf.frame_owner = PYPERF_FRAME_HEADER_MAX;  // its one byte ends past the limit
  set_derived_offsets(offsets);
  EXPECT_EQ(offsets.bpf.frame_header_bytes, 0);
  offsets.bpf.frame_owner = PYPERF_FRAME_HEADER_MAX - 1;  // its one byte is the limit's last
  set_derived_offsets(offsets);
  EXPECT_EQ(offsets.bpf.frame_header_bytes, PYPERF_FRAME_HEADER_MAX);
  offsets.bpf.frame_owner = PYTHON_OFFSET_NONE;  // a field this version lacks is not read
  set_derived_offsets(offsets);
  EXPECT_GT(offsets.bpf.frame_header_bytes, 0);
  EXPECT_LT(offsets.bpf.frame_header_bytes, PYPERF_FRAME_HEADER_MAX);
}

}  // namespace
}  // namespace omniprof::python
