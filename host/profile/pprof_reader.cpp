#include "profile/pprof_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "common/gzip.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {
namespace {

namespace pb = perftools::profiles;

// protobuf cannot parse a message of 2 GiB or more; anything larger, on disk
// or after decompression, cannot be a profile.
constexpr size_t kMaxProfileBytes = INT_MAX;

Result<std::string> read_whole_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return make_error("open: " + std::system_category().message(errno));
  std::string data;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error("read: " + std::system_category().message(errno));
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
    if (data.size() > kMaxProfileBytes) return make_error("file larger than 2 GiB");
  }
  return data;
}

// The consistency checks go tool pprof applies when it decodes a profile
// (every sample's value count equals the sample types', ids are non-zero and
// unique, every referenced location, function, mapping and string exists), so
// a file this reader accepts is one pprof accepts. The first problem found is reported.
class ProfileChecker {
 public:
  explicit ProfileChecker(const pb::Profile& profile) : profile_(profile) {}

  Result<void> check() {
    if (profile_.string_table_size() == 0 || !profile_.string_table(0).empty()) {
      fail("string_table[0] must be \"\"");
    }
    for (int i = 0; i < profile_.sample_type_size(); ++i) {
      check_string(profile_.sample_type(i).type(), "sample_type", i);
      check_string(profile_.sample_type(i).unit(), "sample_type", i);
    }
    check_string(profile_.period_type().type(), "period_type", 0);
    check_string(profile_.period_type().unit(), "period_type", 0);
    check_string(profile_.drop_frames(), "drop_frames", 0);
    check_string(profile_.keep_frames(), "keep_frames", 0);
    check_string(profile_.default_sample_type(), "default_sample_type", 0);
    for (int i = 0; i < profile_.comment_size(); ++i) {
      check_string(profile_.comment(i), "comment", i);
    }
    check_mappings();
    check_functions();
    check_locations();
    check_samples();
    if (!problem_.empty()) return make_error(problem_);
    return ok();
  }

 private:
  void fail(std::string problem) {
    if (problem_.empty()) problem_ = std::move(problem);
  }

  void check_string(int64_t index, const char* what, uint64_t which) {
    if (index >= 0 && index < profile_.string_table_size()) return;
    fail(std::string(what) + " " + std::to_string(which) + " refers to string " +
         std::to_string(index) + " but the string table has " +
         std::to_string(profile_.string_table_size()));
  }

  // pprof ids are non-zero (0 means "none") and unique within their kind.
  void check_id(uint64_t id, const char* what, std::set<uint64_t>& seen) {
    if (id == 0 || !seen.insert(id).second) {
      fail(std::string(what) + " id " + std::to_string(id) + " is zero or repeated");
    }
  }

  void check_mappings() {
    for (const pb::Mapping& mapping : profile_.mapping()) {
      check_id(mapping.id(), "mapping", mapping_ids_);
      check_string(mapping.filename(), "mapping", mapping.id());
      check_string(mapping.build_id(), "mapping", mapping.id());
    }
  }

  void check_functions() {
    for (const pb::Function& function : profile_.function()) {
      check_id(function.id(), "function", function_ids_);
      check_string(function.name(), "function", function.id());
      check_string(function.system_name(), "function", function.id());
      check_string(function.filename(), "function", function.id());
    }
  }

  void check_locations() {
    for (const pb::Location& location : profile_.location()) {
      check_id(location.id(), "location", location_ids_);
      if (location.mapping_id() != 0 && mapping_ids_.count(location.mapping_id()) == 0) {
        fail("location " + std::to_string(location.id()) + " refers to unknown mapping " +
             std::to_string(location.mapping_id()));
      }
      for (const pb::Line& line : location.line()) {
        if (function_ids_.count(line.function_id()) == 0) {
          fail("location " + std::to_string(location.id()) + " refers to unknown function " +
               std::to_string(line.function_id()));
        }
      }
    }
  }

  void check_samples() {
    for (int i = 0; i < profile_.sample_size(); ++i) {
      const pb::Sample& sample = profile_.sample(i);
      if (sample.value_size() != profile_.sample_type_size()) {
        fail("sample " + std::to_string(i) + " has " + std::to_string(sample.value_size()) +
             " values but there are " + std::to_string(profile_.sample_type_size()) +
             " sample types");
      }
      for (uint64_t id : sample.location_id()) {
        if (location_ids_.count(id) == 0) {
          fail("sample " + std::to_string(i) + " refers to unknown location " + std::to_string(id));
        }
      }
      for (const pb::Label& label : sample.label()) {
        check_string(label.key(), "label of sample", i);
        check_string(label.str(), "label of sample", i);
        check_string(label.num_unit(), "label of sample", i);
      }
    }
  }

  const pb::Profile& profile_;
  std::set<uint64_t> mapping_ids_;
  std::set<uint64_t> function_ids_;
  std::set<uint64_t> location_ids_;
  std::string problem_;
};

}  // namespace

Result<pb::Profile> read_pprof_file(const std::string& path) {
  auto failure = [&path](const std::string& what) {
    return make_error("cannot read profile " + path + ": " + what);
  };

  Result<std::string> data = read_whole_file(path);
  if (!data) return failure(data.error().message);

  if (has_gzip_magic(*data)) {
    Result<std::string> decompressed = gzip_decompress(*data);
    if (!decompressed) return failure(decompressed.error().message);
    data = std::move(decompressed);
  }

  pb::Profile profile;
  if (!profile.ParseFromString(*data)) {
    return failure("not a pprof profile (protobuf parse failed)");
  }
  if (Result<void> checked = ProfileChecker(profile).check(); !checked) {
    return failure("invalid pprof profile: " + checked.error().message);
  }
  return profile;
}

}  // namespace omniprof
