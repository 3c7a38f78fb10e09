// The pprof output layer: what ProfileBuilder writes is what read_pprof_file
// (and go tool pprof, when installed) reads back, field by field.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/gzip.h"
#include "profile/frame_type.h"
#include "profile/pprof_reader.h"
#include "profile/profile_builder.h"

namespace omniprof {
namespace {

namespace fs = std::filesystem;
namespace pb = perftools::profiles;

constexpr int64_t kPeriodNs = 10'000'000;  // 100 Hz
constexpr int64_t kTimeNanos = 1'700'000'000'123'456'789;

class PprofTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "omniprof_pprof_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::vector<std::string> dir_entries(const fs::path& dir) const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// A profile that exercises every feature: two mappings (one symbolized),
// inlined frames, a location without a mapping, an unsymbolized location,
// merged samples and samples split by labels.
struct SampleProfile {
  ProfileBuilder builder{kPeriodNs, kTimeNanos};
  uint64_t app = 0, libc = 0;
  uint64_t leaf = 0, inlined_in_main = 0, libc_unsymbolized = 0, kernel = 0;

  SampleProfile() {
    app = builder.add_mapping({0x400000, 0x500000, 0x1000, "/usr/bin/app", "abcdef0123", true});
    libc = builder.add_mapping({0x7f0000000000, 0x7f0000100000, 0, "/lib/libc.so.6", "", false});
    leaf = builder.add_location(app, 0x401000, {{"leaf", "_Z4leafv", "app.cc", 10}});
    inlined_in_main = builder.add_location(
        app, 0x402000, {{"inlined", "", "app.cc", 20}, {"main", "", "app.cc", 30}});
    libc_unsymbolized = builder.add_location(libc, 0x7f0000001234, {});
    kernel = builder.add_location(0, 0xffffffff81000000, {{"do_syscall_64", "", "", 0}});

    const SampleLabels worker{100, 101, "app", "worker"};
    builder.add_sample({leaf, inlined_in_main}, 3, worker);
    builder.add_sample({leaf, inlined_in_main}, 2, worker);  // merges with the above
    builder.add_sample({leaf, inlined_in_main}, 1, {100, 102, "app", "other"});
    builder.add_sample({libc_unsymbolized, inlined_in_main}, 4, {100, 100, "app", ""});
    builder.add_sample({kernel}, 1, {0, 0, "swapper/0", ""});
    builder.add_sample({kernel}, 0, {0, 0, "swapper/0", ""});  // records nothing
    builder.set_duration_ns(2'000'000'000);
    builder.add_comment("omniprof unit test");
  }
};

// A sample with its string indexes resolved, for readable assertions.
struct DecodedSample {
  std::vector<uint64_t> location_ids;
  std::vector<int64_t> values;
  std::map<std::string, int64_t> num_labels;
  std::map<std::string, std::string> str_labels;
};

std::vector<DecodedSample> decode_samples(const pb::Profile& profile) {
  std::vector<DecodedSample> samples;
  for (const pb::Sample& sample : profile.sample()) {
    DecodedSample decoded;
    decoded.location_ids.assign(sample.location_id().begin(), sample.location_id().end());
    decoded.values.assign(sample.value().begin(), sample.value().end());
    for (const pb::Label& label : sample.label()) {
      const std::string& key = profile.string_table(label.key());
      if (label.str() != 0) {
        decoded.str_labels[key] = profile.string_table(label.str());
      } else {
        decoded.num_labels[key] = label.num();
      }
    }
    samples.push_back(std::move(decoded));
  }
  return samples;
}

const DecodedSample* find_sample(const std::vector<DecodedSample>& samples,
                                 const std::vector<uint64_t>& location_ids, int64_t tid) {
  for (const DecodedSample& sample : samples) {
    if (sample.location_ids == location_ids && sample.num_labels.at("tid") == tid) return &sample;
  }
  return nullptr;
}

TEST_F(PprofTest, DeduplicatesMappingsLocationsFunctionsAndSamples) {
  SampleProfile p;
  EXPECT_EQ(p.app, 1u);
  EXPECT_EQ(p.libc, 2u);
  EXPECT_EQ(p.builder.add_mapping({0x400000, 0x500000, 0x1000, "/usr/bin/app", "abcdef0123", true}),
            p.app);
  // Any differing field makes a new mapping.
  EXPECT_EQ(
      p.builder.add_mapping({0x400000, 0x500000, 0x1000, "/usr/bin/app", "abcdef0123", false}), 3u);

  EXPECT_EQ(p.leaf, 1u);
  EXPECT_EQ(p.kernel, 4u);
  EXPECT_EQ(p.builder.add_location(p.app, 0x401000, {{"leaf", "_Z4leafv", "app.cc", 10}}), p.leaf);
  // Same address, different line: a different location, same function.
  const size_t functions_before = p.builder.num_functions();
  EXPECT_EQ(p.builder.add_location(p.app, 0x401000, {{"leaf", "_Z4leafv", "app.cc", 11}}), 5u);
  EXPECT_EQ(p.builder.num_functions(), functions_before);

  EXPECT_EQ(p.builder.num_mappings(), 3u);
  EXPECT_EQ(p.builder.num_locations(), 5u);
  EXPECT_EQ(p.builder.num_functions(), 4u);  // leaf, inlined, main, do_syscall_64
  EXPECT_EQ(p.builder.num_samples(), 4u);    // the two identical worker samples merged
  EXPECT_EQ(p.builder.total_samples(), 11);
}

TEST_F(PprofTest, IdsNotFromTheBuilderAreRejected) {
  ProfileBuilder builder(kPeriodNs, kTimeNanos);
  // Debug builds assert; release builds keep the profile valid.
  EXPECT_DEBUG_DEATH(builder.add_location(7, 0x1000, {}), "mapping_id must come from add_mapping");
  EXPECT_DEBUG_DEATH(builder.add_sample({42}, 1, {1, 1, "x", ""}), "location ids must come");
  EXPECT_EQ(builder.num_samples(), 0u);
  const pb::Profile profile = builder.build();
  for (const pb::Location& location : profile.location()) {
    EXPECT_EQ(location.mapping_id(), 0u);
  }
}

TEST_F(PprofTest, GzipRoundTripPreservesEveryField) {
  SampleProfile p;
  const fs::path path = dir_ / "cpu.pb.gz";
  Result<void> written = p.builder.write_gzip(path.string());
  ASSERT_TRUE(written.ok()) << written.error().message;

  const std::string bytes = read_bytes(path);
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
  EXPECT_EQ(dir_entries(dir_), std::vector<std::string>{"cpu.pb.gz"}) << "temp file left behind";
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);

  Result<pb::Profile> read = read_pprof_file(path.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  const pb::Profile& profile = *read;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(profile, p.builder.build()));
  auto str = [&profile](int64_t index) { return profile.string_table(index); };

  ASSERT_GT(profile.string_table_size(), 0);
  EXPECT_EQ(profile.string_table(0), "");

  ASSERT_EQ(profile.sample_type_size(), 2);
  EXPECT_EQ(str(profile.sample_type(0).type()), "samples");
  EXPECT_EQ(str(profile.sample_type(0).unit()), "count");
  EXPECT_EQ(str(profile.sample_type(1).type()), "cpu");
  EXPECT_EQ(str(profile.sample_type(1).unit()), "nanoseconds");
  EXPECT_EQ(str(profile.period_type().type()), "cpu");
  EXPECT_EQ(str(profile.period_type().unit()), "nanoseconds");
  EXPECT_EQ(profile.period(), kPeriodNs);
  EXPECT_EQ(profile.time_nanos(), kTimeNanos);
  EXPECT_EQ(profile.duration_nanos(), 2'000'000'000);
  ASSERT_EQ(profile.comment_size(), 1);
  EXPECT_EQ(str(profile.comment(0)), "omniprof unit test");
  EXPECT_EQ(profile.drop_frames(), 0);
  EXPECT_EQ(profile.keep_frames(), 0);
  EXPECT_EQ(profile.default_sample_type(), 0);  // pprof shows the last type, cpu

  ASSERT_EQ(profile.mapping_size(), 2);
  const pb::Mapping& app = profile.mapping(0);
  EXPECT_EQ(app.id(), 1u);
  EXPECT_EQ(app.memory_start(), 0x400000u);
  EXPECT_EQ(app.memory_limit(), 0x500000u);
  EXPECT_EQ(app.file_offset(), 0x1000u);
  EXPECT_EQ(str(app.filename()), "/usr/bin/app");
  EXPECT_EQ(str(app.build_id()), "abcdef0123");
  EXPECT_TRUE(app.has_functions());
  EXPECT_TRUE(app.has_filenames());
  EXPECT_TRUE(app.has_line_numbers());
  EXPECT_TRUE(app.has_inline_frames());
  const pb::Mapping& libc = profile.mapping(1);
  EXPECT_EQ(libc.id(), 2u);
  EXPECT_EQ(libc.memory_start(), 0x7f0000000000u);
  EXPECT_EQ(libc.memory_limit(), 0x7f0000100000u);
  EXPECT_EQ(libc.file_offset(), 0u);
  EXPECT_EQ(str(libc.filename()), "/lib/libc.so.6");
  EXPECT_EQ(libc.build_id(), 0);
  EXPECT_FALSE(libc.has_functions());
  EXPECT_FALSE(libc.has_filenames());
  EXPECT_FALSE(libc.has_line_numbers());
  EXPECT_FALSE(libc.has_inline_frames());

  ASSERT_EQ(profile.function_size(), 4);
  std::map<uint64_t, const pb::Function*> functions;
  for (const pb::Function& function : profile.function()) functions[function.id()] = &function;
  auto function_name = [&](const pb::Line& line) {
    return str(functions.at(line.function_id())->name());
  };

  ASSERT_EQ(profile.location_size(), 4);
  const pb::Location& leaf = profile.location(0);
  EXPECT_EQ(leaf.id(), p.leaf);
  EXPECT_EQ(leaf.mapping_id(), p.app);
  EXPECT_EQ(leaf.address(), 0x401000u);
  EXPECT_FALSE(leaf.is_folded());
  ASSERT_EQ(leaf.line_size(), 1);
  EXPECT_EQ(function_name(leaf.line(0)), "leaf");
  EXPECT_EQ(leaf.line(0).line(), 10);
  const pb::Function& leaf_function = *functions.at(leaf.line(0).function_id());
  EXPECT_EQ(str(leaf_function.system_name()), "_Z4leafv");
  EXPECT_EQ(str(leaf_function.filename()), "app.cc");

  const pb::Location& inlined = profile.location(1);
  EXPECT_EQ(inlined.id(), p.inlined_in_main);
  EXPECT_EQ(inlined.mapping_id(), p.app);
  EXPECT_EQ(inlined.address(), 0x402000u);
  ASSERT_EQ(inlined.line_size(), 2);
  EXPECT_EQ(function_name(inlined.line(0)), "inlined");
  EXPECT_EQ(inlined.line(0).line(), 20);
  EXPECT_EQ(function_name(inlined.line(1)), "main");
  EXPECT_EQ(inlined.line(1).line(), 30);
  // An empty system name defaults to the name.
  EXPECT_EQ(str(functions.at(inlined.line(1).function_id())->system_name()), "main");

  const pb::Location& unsymbolized = profile.location(2);
  EXPECT_EQ(unsymbolized.id(), p.libc_unsymbolized);
  EXPECT_EQ(unsymbolized.mapping_id(), p.libc);
  EXPECT_EQ(unsymbolized.address(), 0x7f0000001234u);
  EXPECT_EQ(unsymbolized.line_size(), 0);

  const pb::Location& kernel = profile.location(3);
  EXPECT_EQ(kernel.id(), p.kernel);
  EXPECT_EQ(kernel.mapping_id(), 0u);
  EXPECT_EQ(kernel.address(), 0xffffffff81000000u);
  ASSERT_EQ(kernel.line_size(), 1);
  EXPECT_EQ(function_name(kernel.line(0)), "do_syscall_64");
  EXPECT_EQ(str(functions.at(kernel.line(0).function_id())->filename()), "");

  const std::vector<DecodedSample> samples = decode_samples(profile);
  ASSERT_EQ(samples.size(), 4u);

  const DecodedSample* worker = find_sample(samples, {p.leaf, p.inlined_in_main}, 101);
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->values, (std::vector<int64_t>{5, 5 * kPeriodNs}));
  EXPECT_EQ(worker->num_labels, (std::map<std::string, int64_t>{{"pid", 100}, {"tid", 101}}));
  EXPECT_EQ(worker->str_labels,
            (std::map<std::string, std::string>{{"comm", "app"}, {"thread_name", "worker"}}));

  const DecodedSample* other = find_sample(samples, {p.leaf, p.inlined_in_main}, 102);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->values, (std::vector<int64_t>{1, kPeriodNs}));
  EXPECT_EQ(other->str_labels.at("thread_name"), "other");

  const DecodedSample* in_libc =
      find_sample(samples, {p.libc_unsymbolized, p.inlined_in_main}, 100);
  ASSERT_NE(in_libc, nullptr);
  EXPECT_EQ(in_libc->values, (std::vector<int64_t>{4, 4 * kPeriodNs}));
  // An empty thread name is left out rather than written as "".
  EXPECT_EQ(in_libc->str_labels, (std::map<std::string, std::string>{{"comm", "app"}}));

  const DecodedSample* idle = find_sample(samples, {p.kernel}, 0);
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(idle->values, (std::vector<int64_t>{1, kPeriodNs}));
  EXPECT_EQ(idle->num_labels, (std::map<std::string, int64_t>{{"pid", 0}, {"tid", 0}}));
  EXPECT_EQ(idle->str_labels.at("comm"), "swapper/0");
}

// Written at zlib's fastest level (common/gzip.h): the gzip header's XFL
// byte is 4 for it (RFC 1952, 2.3.1), 0 at zlib's default level. Read back
// whole by the test above.
TEST_F(PprofTest, ProfilesAreCompressedAtZlibsFastestLevel) {
  SampleProfile p;
  Result<std::string> gzipped = p.builder.encode_gzip();
  ASSERT_TRUE(gzipped.ok()) << gzipped.error().message;
  ASSERT_GE(gzipped->size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>((*gzipped)[8]), 4) << "XFL: not the fastest level";
  Result<std::string> default_level = gzip_compress(p.builder.serialize(), kGzipLevelDefault);
  ASSERT_TRUE(default_level.ok());
  EXPECT_EQ(static_cast<unsigned char>((*default_level)[8]), 0);
  Result<std::string> back = gzip_decompress(*gzipped);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p.builder.serialize());
}

TEST_F(PprofTest, ReadsUncompressedProfile) {
  SampleProfile p;
  const fs::path path = dir_ / "cpu.pb";
  write_bytes(path, p.builder.serialize());
  Result<pb::Profile> read = read_pprof_file(path.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*read, p.builder.build()));
}

TEST_F(PprofTest, WritingOverAnExistingProfileReplacesIt) {
  const fs::path path = dir_ / "cpu.pb.gz";
  write_bytes(path, "old contents");
  SampleProfile p;
  Result<void> written = p.builder.write_gzip(path.string());
  ASSERT_TRUE(written.ok()) << written.error().message;
  Result<pb::Profile> read = read_pprof_file(path.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->sample_size(), 4);
  EXPECT_EQ(dir_entries(dir_), std::vector<std::string>{"cpu.pb.gz"});
}

TEST_F(PprofTest, TopFunctionsCountsFlatAtTheLeafAndCumulativeOncePerSample) {
  ProfileBuilder builder(kPeriodNs, kTimeNanos);
  auto at = [&builder](uint64_t address, std::vector<ProfileLine> lines) {
    return builder.add_location(0, address, lines);
  };
  const uint64_t main_loc = at(0x10, {{"main", "", "", 0}});
  const uint64_t a_loc = at(0x20, {{"a", "", "", 0}});
  const uint64_t a_loc2 = at(0x21, {{"a", "", "", 0}});  // another address in a
  const uint64_t b_loc = at(0x30, {{"b", "", "", 0}});
  // "inl" inlined into b: the innermost line is the leaf function.
  const uint64_t inl_in_b = at(0x40, {{"inl", "", "", 0}, {"b", "", "", 0}});
  const uint64_t unsymbolized = at(0x1234, {});
  const uint64_t libz =
      builder.add_mapping({0x7f00000000, 0x7f00100000, 0, "/lib/libz.so.1", "", false});
  const uint64_t libz_1 = builder.add_location(libz, 0x7f00000100, {});
  const uint64_t libz_2 = builder.add_location(libz, 0x7f00000200, {});
  const uint64_t alpha = at(0x50, {{"alpha", "", "", 0}});
  const uint64_t zeta = at(0x60, {{"zeta", "", "", 0}});

  const SampleLabels t1{1, 1, "t", ""};
  const SampleLabels t2{1, 2, "t", ""};
  builder.add_sample({a_loc, a_loc2, a_loc, main_loc}, 3, t1);  // a recursing
  builder.add_sample({a_loc, a_loc2, a_loc, main_loc}, 2, t2);  // same stack, other thread
  builder.add_sample({b_loc, a_loc, main_loc}, 3, t1);
  builder.add_sample({inl_in_b, b_loc, main_loc}, 2, t1);  // b twice on the stack
  builder.add_sample({unsymbolized, main_loc}, 1, t1);
  builder.add_sample({main_loc}, 1, t1);
  builder.add_sample({libz_1}, 1, t1);  // unsymbolized addresses of one library
  builder.add_sample({libz_2}, 1, t1);  // count as that library, like pprof -top
  builder.add_sample({zeta}, 1, t1);
  builder.add_sample({alpha}, 1, t1);
  builder.add_sample({}, 7, t1);  // no stack: in the total, charged to no function

  EXPECT_EQ(builder.total_samples(), 23);
  const std::vector<FunctionCost> expected = {
      {"a", "native", 5, 8},            // recursion counts once per sample in cumulative
      {"b", "native", 3, 5},            // twice on the inl stack (inlining caller, own frame): once
      {"[libz.so.1]", "native", 2, 2},  // both unsymbolized libz addresses; ties with inl: by name
      {"inl", "native", 2, 2},          // the innermost line of its location: the leaf
      {"main", "native", 1, 12},        // on every stack but the leaf-only ones
      {"<unknown>", "native", 1, 1},    // unsymbolized, no mapping
      {"alpha", "native", 1, 1},        // ties with zeta: by name
      {"zeta", "native", 1, 1},
  };
  EXPECT_EQ(builder.top_functions(100), expected);
  EXPECT_EQ(builder.top_functions(2),
            (std::vector<FunctionCost>{{"a", "native", 5, 8}, {"b", "native", 3, 5}}));
  EXPECT_TRUE(builder.top_functions(0).empty());
}

TEST_F(PprofTest, TopFunctionsSayEachRowsKind) {
  ProfileBuilder builder(kPeriodNs, kTimeNanos);
  const uint64_t kernel = builder.add_mapping({0xffff800000000000, UINT64_MAX, 0, "[kernel.kallsyms]", "", true});
  const uint64_t libc = builder.add_mapping({0x7f0000000000, 0x7f0000100000, 0, "/lib/libc.so.6", "", true});
  const uint64_t k = builder.add_location(kernel, 0xffffffff81000010, {ProfileLine{"do_syscall_64", "", "", 0}});
  const uint64_t n = builder.add_location(libc, 0x7f0000000010, {ProfileLine{"read", "", "", 0}});
  const uint64_t py =
      builder.add_location(0, 0, {ProfileLine{"<module>", typed_system_name("python", "<module>"), "a.py", 3}});
  const uint64_t rb =
      builder.add_location(0, 0, {ProfileLine{"<main>", typed_system_name("ruby", "<main>"), "a.rb", 1}});
  builder.add_sample({k, n, py}, 3, SampleLabels{1, 1, "python3", "main"});
  builder.add_sample({rb}, 2, SampleLabels{2, 2, "ruby", "main"});
  std::map<std::string, std::string> kinds;
  for (const FunctionCost& cost : builder.top_functions(10)) kinds[cost.function] = cost.type;
  EXPECT_EQ(kinds, (std::map<std::string, std::string>{
                       {"do_syscall_64", "kernel"}, {"read", "native"}, {"<module>", "python"}, {"<main>", "ruby"}}));
}

TEST_F(PprofTest, WriteIntoMissingDirectoryFailsNamingThePath) {
  SampleProfile p;
  const fs::path path = dir_ / "no_such_dir" / "cpu.pb.gz";
  Result<void> written = p.builder.write_gzip(path.string());
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.error().message.find(path.string()), std::string::npos)
      << written.error().message;
  EXPECT_NE(written.error().message.find("No such file or directory"), std::string::npos)
      << written.error().message;
  EXPECT_TRUE(dir_entries(dir_).empty());
}

TEST_F(PprofTest, FailedRenameRemovesTheTemporaryFile) {
  SampleProfile p;
  // rename() cannot replace a non-empty directory, so the write fails after
  // the temporary file was created and written.
  const fs::path path = dir_ / "occupied";
  fs::create_directory(path);
  write_bytes(path / "keep", "x");
  Result<void> written = p.builder.write_gzip(path.string());
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.error().message.find(path.string()), std::string::npos)
      << written.error().message;
  EXPECT_NE(written.error().message.find("rename"), std::string::npos) << written.error().message;
  EXPECT_EQ(dir_entries(dir_), std::vector<std::string>{"occupied"});
}

TEST_F(PprofTest, ReadMissingFileFails) {
  const fs::path path = dir_ / "absent.pb.gz";
  Result<pb::Profile> read = read_pprof_file(path.string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find(path.string()), std::string::npos) << read.error().message;
  EXPECT_NE(read.error().message.find("No such file or directory"), std::string::npos)
      << read.error().message;
}

TEST_F(PprofTest, ReadTruncatedGzipFails) {
  SampleProfile p;
  const fs::path whole = dir_ / "whole.pb.gz";
  ASSERT_TRUE(p.builder.write_gzip(whole.string()).ok());
  const std::string bytes = read_bytes(whole);

  // Cut in the middle of the deflate data, and cut only the 8-byte trailer.
  for (size_t keep : {bytes.size() / 2, bytes.size() - 8}) {
    const fs::path truncated = dir_ / ("truncated_" + std::to_string(keep) + ".pb.gz");
    write_bytes(truncated, bytes.substr(0, keep));
    Result<pb::Profile> read = read_pprof_file(truncated.string());
    ASSERT_FALSE(read.ok()) << "kept " << keep << " of " << bytes.size() << " bytes";
    EXPECT_NE(read.error().message.find(truncated.string()), std::string::npos)
        << read.error().message;
    EXPECT_NE(read.error().message.find("truncated"), std::string::npos) << read.error().message;
  }
}

TEST_F(PprofTest, ReadCorruptGzipFails) {
  const fs::path path = dir_ / "corrupt.pb.gz";
  write_bytes(path, std::string("\x1f\x8b\x08\x00", 4) + std::string(64, '\xee'));
  Result<pb::Profile> read = read_pprof_file(path.string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find(path.string()), std::string::npos) << read.error().message;
  EXPECT_NE(read.error().message.find("bad gzip data"), std::string::npos) << read.error().message;
}

TEST_F(PprofTest, ReadGarbageFails) {
  const fs::path path = dir_ / "garbage.pb";
  write_bytes(path, std::string(16, '\xff'));  // a varint that never ends
  Result<pb::Profile> read = read_pprof_file(path.string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find(path.string()), std::string::npos) << read.error().message;
  EXPECT_NE(read.error().message.find("not a pprof profile"), std::string::npos)
      << read.error().message;
}

TEST_F(PprofTest, ReadInconsistentProfileFails) {
  // Valid protobuf, but not a valid pprof profile.
  const fs::path empty = dir_ / "empty.pb";
  write_bytes(empty, "");
  Result<pb::Profile> read = read_pprof_file(empty.string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find("string_table[0]"), std::string::npos)
      << read.error().message;

  SampleProfile p;
  pb::Profile profile = p.builder.build();
  profile.mutable_sample(0)->add_location_id(999);
  const fs::path dangling = dir_ / "dangling.pb";
  write_bytes(dangling, profile.SerializeAsString());
  read = read_pprof_file(dangling.string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find(dangling.string()), std::string::npos)
      << read.error().message;
  EXPECT_NE(read.error().message.find("unknown location 999"), std::string::npos)
      << read.error().message;
}

// --- go tool pprof, the reference reader ------------------------------------

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct CommandOutput {
  int exit_status = -1;
  std::string output;  // stdout and stderr
};

CommandOutput run_shell(const std::string& command) {
  CommandOutput result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class GoPprofTest : public PprofTest {
 protected:
  // `go tool pprof FILE ARGS`, with HOME and GOCACHE pointing into the test's
  // directory when unset (go refuses to run without a cache location).
  CommandOutput go_pprof(const std::string& go, const std::string& args, const fs::path& file) {
    std::string env;
    if (std::getenv("HOME") == nullptr) env += "HOME='" + (dir_ / "home").string() + "' ";
    if (std::getenv("GOCACHE") == nullptr) env += "GOCACHE='" + (dir_ / "gocache").string() + "' ";
    return run_shell(env + "'" + go + "' tool pprof -symbolize=none " + args + " '" +
                     file.string() + "'");
  }
};

// The flat and cum columns of `pprof -top` for `function`, or {-1, -1}.
std::pair<int64_t, int64_t> top_row(const std::string& top_output, const std::string& function) {
  std::istringstream lines(top_output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> columns;
    for (std::string field; fields >> field;) columns.push_back(field);
    // flat flat% sum% cum cum% name [(inline)]
    if (columns.size() >= 6 && columns[5] == function) {
      return {std::stoll(columns[0]), std::stoll(columns[3])};
    }
  }
  return {-1, -1};
}

TEST_F(GoPprofTest, GoToolPprofReadsTheProfile) {
  const std::string go = find_on_path("go");
  if (go.empty()) GTEST_SKIP() << "go not on PATH: cannot cross-check with go tool pprof";

  SampleProfile p;
  const fs::path path = dir_ / "cpu.pb.gz";
  ASSERT_TRUE(p.builder.write_gzip(path.string()).ok());

  const CommandOutput top = go_pprof(go, "-top -sample_index=samples", path);
  ASSERT_EQ(top.exit_status, 0) << top.output;
  const std::vector<FunctionCost> costs = p.builder.top_functions(100);
  ASSERT_EQ(costs.size(), 5u);  // leaf, [libc.so.6], do_syscall_64, inlined, main
  for (const FunctionCost& cost : costs) {
    EXPECT_EQ(top_row(top.output, cost.function), std::make_pair(cost.flat, cost.cumulative))
        << cost.function << " in:\n"
        << top.output;
  }

  const CommandOutput tags = go_pprof(go, "-tags", path);
  ASSERT_EQ(tags.exit_status, 0) << tags.output;
  for (const char* expected : {"comm", "app", "swapper/0", "thread_name", "worker", "pid", "tid"}) {
    EXPECT_NE(tags.output.find(expected), std::string::npos) << expected << " in:\n" << tags.output;
  }
}

// pprof takes a function whose system_name equals its name for a demangled
// C++ name and strips what looks like template arguments from it: Python's
// `<module>` prints as a blank. omniprof writes a plugin frame's system_name
// as "<type>:<name>" (profile/frame_type.h), which tells pprof the name is
// final. Read as a user reads it: no -symbolize=none.
TEST_F(GoPprofTest, InterpreterNamesSurvivePprofsCppSimplification) {
  const std::string go = find_on_path("go");
  if (go.empty()) GTEST_SKIP() << "go not on PATH: cannot cross-check with go tool pprof";
  ProfileBuilder builder(kPeriodNs, kTimeNanos);
  const std::vector<std::pair<std::string, std::string>> typed = {
      {"<module>", "python"},
      {"Engine.finish.<locals>.closure", "python"},
      {"block (2 levels) in <class:Worker>", "ruby"},
      {"<main>", "ruby"},
      {"Integer#times", "ruby"}};
  std::vector<uint64_t> stack;
  for (const auto& [name, type] : typed) {
    stack.push_back(builder.add_location(0, 0, {ProfileLine{name, typed_system_name(type, name), "x", 1}}));
  }
  // The control: the same kind of name written the old way.
  stack.push_back(builder.add_location(0, 0, {ProfileLine{"<control>", "", "x", 1}}));
  builder.add_sample(stack, 3, SampleLabels{1, 1, "app", "main"});
  const fs::path path = dir_ / "names.pb.gz";
  ASSERT_TRUE(builder.write_gzip(path.string()).ok());

  std::string env;
  if (std::getenv("HOME") == nullptr) env += "HOME='" + (dir_ / "home").string() + "' ";
  if (std::getenv("GOCACHE") == nullptr) env += "GOCACHE='" + (dir_ / "gocache").string() + "' ";
  for (const char* view : {"-traces", "-top", "-tree"}) {
    const CommandOutput out = run_shell(env + "'" + go + "' tool pprof " + view + " '" + path.string() + "'");
    ASSERT_EQ(out.exit_status, 0) << out.output;
    std::vector<std::string> lines;
    std::istringstream in(out.output);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    for (const auto& [name, type] : typed) {
      // The name ends a line (traces: "  name"; top: "... name"; tree: "... | name").
      bool found = std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
        return line.size() >= name.size() + 1 && line.compare(line.size() - name.size(), name.size(), name) == 0 &&
               line[line.size() - name.size() - 1] == ' ';
      });
      EXPECT_TRUE(found) << view << ": '" << name << "' not printed verbatim in:\n" << out.output;
    }
    // What the control shows that this is needed for.
    EXPECT_EQ(out.output.find("<control>"), std::string::npos) << view << ": pprof no longer simplifies names:\n"
                                                               << out.output;
  }
}

}  // namespace
}  // namespace omniprof
