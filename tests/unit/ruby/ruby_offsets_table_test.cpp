#include "ruby_offsets_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <omniprof/offsets.hpp>
#include <sstream>

namespace omniprof::ruby {
namespace {

std::string shipped_yaml() {
  std::ifstream in(OMNIPROF_RUBY_YAML);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One version entry with every key (ec_model 1, everything else 8), without
// `drop_key`, then `extra_line`.
std::string one_entry(const std::string& version, const std::string& drop_key = "", const std::string& extra_line = "") {
  std::string text = "runtime: ruby\nversions:\n  - version: \"" + version + "\"\n    offsets:\n";
  // 8 for every offset, but ec_model TLS and a 3.2-like shape.
  const std::map<std::string_view, int> values = {{"ec_model", 1},         {"shape_size", 32},     {"shape_edge_name", 8},
                                                  {"shape_next_iv_index", 16}, {"shape_type", 24}, {"shape_parent_id", 28},
                                                  {"shape_type_ivar", 1},  {"shape_id_shift", 32}};
  for (std::string_view key : kRubyOffsetSchema.keys()) {
    if (key == drop_key) continue;
    auto value = values.find(key);
    text += "      " + std::string(key) + ": " + std::to_string(value == values.end() ? 8 : value->second) + "\n";
  }
  return text + extra_line;
}

void expect_error(const std::string& yaml, const std::vector<std::string>& parts) {
  try {
    (void)RubyOffsetsTable::parse(yaml, "test.yaml");
    ADD_FAILURE() << "no error for:\n" << yaml;
  } catch (const sdk::OffsetError& error) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
  }
}

TEST(RubyOffsetsTable, LoadsEveryShippedVersion) {
  RubyOffsetsTable table = RubyOffsetsTable::parse(shipped_yaml(), "ruby.yaml");
  for (auto [major, minor] : {std::pair{2, 6}, {2, 7}, {3, 0}, {3, 1}, {3, 2}, {3, 3}, {3, 4}}) {
    const RubyVersionOffsets* offsets = table.find(major, minor);
    ASSERT_NE(offsets, nullptr) << major << "." << minor;
    EXPECT_EQ(offsets->patch, -1);
    EXPECT_EQ(offsets->bpf.version, static_cast<uint32_t>(major << 16 | minor << 8));
    EXPECT_NE(offsets->bpf.control_frame_size, RUBY_OFFSET_NONE);
  }
  EXPECT_EQ(table.find(3, 5), nullptr);
  EXPECT_EQ(table.find(2, 5), nullptr);
  const RubyVersionOffsets* v31 = table.find(3, 1);
  EXPECT_EQ(v31->bpf.control_frame_size, 64);
  EXPECT_EQ(v31->bpf.ractor_running_ec, RUBY_OFFSET_NONE);  // -1 in the file
  EXPECT_EQ(v31->reader.ec_model, RUBY_EC_TLS_DTV);
  EXPECT_EQ(v31->reader.classext_classpath, -1);
}

TEST(RubyOffsetsTable, PatchVersionsFindTheirMinorUnlessListed) {
  RubyOffsetsTable table = RubyOffsetsTable::parse(shipped_yaml(), "ruby.yaml");
  const RubyVersionOffsets* v317 = table.find(3, 1, 7);
  ASSERT_NE(v317, nullptr);
  EXPECT_EQ(v317, table.find(3, 1));
  // 3.0.0 to 3.0.3 reach the EC through the main ractor, 3.0.4+ through TLS.
  const RubyVersionOffsets* v303 = table.find(3, 0, 3);
  const RubyVersionOffsets* v304 = table.find(3, 0, 4);
  const RubyVersionOffsets* v307 = table.find(3, 0, 7);
  ASSERT_NE(v303, nullptr);
  ASSERT_NE(v304, nullptr);
  ASSERT_NE(v307, nullptr);
  EXPECT_EQ(v303, table.find(3, 0));
  EXPECT_EQ(v303->reader.ec_model, RUBY_EC_MAIN_RACTOR);
  EXPECT_NE(v303->bpf.ractor_running_ec, RUBY_OFFSET_NONE);
  EXPECT_EQ(v304->patch, 4);
  EXPECT_EQ(v304->reader.ec_model, RUBY_EC_TLS_DTV);
  EXPECT_EQ(v307->reader.ec_model, RUBY_EC_TLS_DTV);
  EXPECT_EQ(v304->bpf.version, v303->bpf.version);
}

TEST(RubyOffsetsTable, MissingKeyNamesFileVersionAndKey) {
  (void)RubyOffsetsTable::parse(one_entry("3.1"), "test.yaml");  // complete: loads
  expect_error(one_entry("3.1", "cfp_ep"), {"test.yaml", "3.1", "cfp_ep", "missing"});
  expect_error(one_entry("3.1", "classext_iv_tbl"), {"test.yaml", "3.1", "classext_iv_tbl", "missing"});
}

TEST(RubyOffsetsTable, RejectsUnknownKeysBadValuesAndRuntime) {
  expect_error(one_entry("3.1", "", "      cfp_epp: 3\n"), {"test.yaml", "3.1", "cfp_epp", "unknown"});
  expect_error(one_entry("3.1", "ec_cfp", "      ec_cfp: 65535\n"), {"3.1", "ec_cfp", "65535"});
  expect_error(one_entry("3.1", "me_owner", "      me_owner: -2\n"), {"me_owner", "-2"});
  expect_error(one_entry("3.1", "ec_model", "      ec_model: 2\n"), {"ec_model"});
  // The main ractor model needs the offset it reads through.
  std::string ractor = one_entry("3.0", "ec_model", "      ec_model: 4\n");
  ractor.replace(ractor.find("ractor_running_ec: 8"), 20, "ractor_running_ec: -1");
  expect_error(ractor, {"3.0", "ractor_running_ec"});
  // A global EC is checked against the sampled thread: both offsets needed.
  std::string global = one_entry("2.7", "ec_model", "      ec_model: 3\n");
  (void)RubyOffsetsTable::parse(global, "test.yaml");
  global.replace(global.find("thread_native_id: 8"), 19, "thread_native_id: -1");
  expect_error(global, {"2.7", "thread_native_id"});
  std::string other_runtime = one_entry("3.1");
  other_runtime.replace(other_runtime.find("ruby"), 4, "python");
  expect_error(other_runtime, {"python"});
  // The SDK's own checks: a line number, a non-integer.
  expect_error(one_entry("3.1", "cfp_pc", "      cfp_pc: abc\n"), {"test.yaml:", "cfp_pc", "abc"});
}

// 3.2's classes go through object shapes: the keys come together and each
// field lies inside the shape the reader reads.
TEST(RubyOffsetsTable, ShapeKeysComeTogetherAndFitTheShape) {
  RubyOffsetsTable table = RubyOffsetsTable::parse(one_entry("3.2"), "test.yaml");
  EXPECT_EQ(table.find(3, 2)->reader.shape_parent_id, 28);
  expect_error(one_entry("3.2", "shape_parent_id", "      shape_parent_id: 30\n"), {"3.2", "shape_parent_id", "30"});
  expect_error(one_entry("3.2", "shape_edge_name", "      shape_edge_name: -1\n"), {"3.2", "shape_edge_name"});
  expect_error(one_entry("3.2", "vm_shape_list", "      vm_shape_list: -1\n"), {"3.2", "vm_shape_list"});
  expect_error(one_entry("3.2", "shape_id_shift", "      shape_id_shift: 64\n"), {"3.2", "shape_id_shift"});
  // Without classext_iv_ptr the shape keys are not used (every other version).
  (void)RubyOffsetsTable::parse(one_entry("3.1"), "test.yaml");
}

TEST(RubyOffsetsTable, ValuesRoundTripThroughKeys) {
  RubyOffsetsTable table = RubyOffsetsTable::parse(shipped_yaml(), "ruby.yaml");
  const RubyVersionOffsets& v31 = *table.find(3, 1);
  EXPECT_EQ(kRubyOffsetSchema.value(v31, "ractor_running_ec"), -1);
  EXPECT_EQ(kRubyOffsetSchema.value(v31, "control_frame_size"), 64);
  EXPECT_EQ(kRubyOffsetSchema.value(v31, "st_entry_size"), 24);
  EXPECT_THROW((void)kRubyOffsetSchema.value(v31, "nope"), std::out_of_range);
}

}  // namespace
}  // namespace omniprof::ruby
