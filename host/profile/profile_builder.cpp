#include "profile/profile_builder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include "common/gzip.h"
#include "omniprof/support/unique_fd.h"
#include "profile/frame_type.h"

namespace omniprof {
namespace {

namespace pb = perftools::profiles;

std::string errno_message(int err) { return std::system_category().message(err); }

}  // namespace

Result<void> write_file_atomically(const std::string& path, const std::string& data) {
  auto failure = [&path](const std::string& step, int err) {
    return make_error("cannot write profile " + path + ": " + step + ": " + errno_message(err));
  };

  std::string temp_path = path + ".tmp.XXXXXX";
  UniqueFd fd(::mkstemp(temp_path.data()));
  if (!fd.valid()) return failure("create temporary file " + temp_path, errno);

  auto fail_and_remove = [&](const std::string& step) {
    const int err = errno;
    fd.reset();
    ::unlink(temp_path.c_str());
    return failure(step, err);
  };

  // mkstemp creates 0600; a profile written by root is meant to be read by
  // the user who asked for it.
  if (::fchmod(fd.get(), 0644) != 0) return fail_and_remove("chmod " + temp_path);

  const char* cursor = data.data();
  size_t remaining = data.size();
  while (remaining > 0) {
    const ssize_t n = ::write(fd.get(), cursor, remaining);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_and_remove("write " + temp_path);
    }
    cursor += n;
    remaining -= static_cast<size_t>(n);
  }
  // The data must be on disk before the rename makes it visible under `path`,
  // or a crash could leave an empty file where the old profile was.
  if (::fsync(fd.get()) != 0) return fail_and_remove("fsync " + temp_path);
  // close() can report a deferred write error (NFS); check it.
  if (::close(fd.release()) != 0) return fail_and_remove("close " + temp_path);
  if (::rename(temp_path.c_str(), path.c_str()) != 0) {
    return fail_and_remove("rename " + temp_path);
  }
  return ok();
}

Result<void> check_profile_writable(const std::string& path) {
  namespace fs = std::filesystem;
  auto refuse = [&path](const std::string& why) { return make_error("cannot write " + path + ": " + why); };
  std::error_code ec;
  if (path.empty()) return make_error("cannot write an empty path");
  if (fs::is_directory(path, ec)) return refuse("it is a directory");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  fs::file_status status = fs::status(dir, ec);
  if (status.type() == fs::file_type::not_found) return refuse("directory " + dir.string() + " does not exist");
  if (ec) return refuse(dir.string() + ": " + ec.message());
  if (!fs::is_directory(status)) return refuse(dir.string() + " is not a directory");
  // What write_gzip does first: create a temporary file next to `path`.
  std::string probe = path + ".tmp.XXXXXX";
  UniqueFd fd(::mkstemp(probe.data()));
  if (!fd.valid()) return refuse("cannot create a file in " + dir.string() + ": " + errno_message(errno));
  fd.reset();
  ::unlink(probe.c_str());
  return ok();
}

namespace {

// count * period, saturated: a value that overflowed int64 would show as a
// negative CPU time.
int64_t cpu_nanoseconds(int64_t count, int64_t period_ns) {
  int64_t product;
  if (__builtin_mul_overflow(count, period_ns, &product)) return INT64_MAX;
  return product;
}

}  // namespace

ProfileBuilder::ProfileBuilder(int64_t period_ns, int64_t time_nanos)
    : period_ns_(period_ns), time_nanos_(time_nanos) {
  intern("");  // pprof requires string_table[0] == ""
  str_samples_ = intern("samples");
  str_count_ = intern("count");
  str_cpu_ = intern("cpu");
  str_nanoseconds_ = intern("nanoseconds");
  str_pid_ = intern("pid");
  str_tid_ = intern("tid");
  str_comm_ = intern("comm");
  str_thread_name_ = intern("thread_name");
}

int64_t ProfileBuilder::intern(const std::string& s) {
  auto [it, inserted] = string_index_.try_emplace(s, static_cast<int64_t>(strings_.size()));
  if (inserted) strings_.push_back(s);
  return it->second;
}

uint64_t ProfileBuilder::add_mapping(const ProfileMapping& mapping) {
  const MappingEntry entry{.start = mapping.start,
                           .limit = mapping.limit,
                           .file_offset = mapping.file_offset,
                           .file = intern(mapping.file),
                           .build_id = intern(mapping.build_id),
                           .has_functions = mapping.has_functions};
  auto [it, inserted] = mapping_ids_.try_emplace(entry, mappings_.size() + 1);
  if (inserted) mappings_.push_back(entry);
  return it->second;
}

uint64_t ProfileBuilder::add_function(const ProfileLine& line) {
  const int64_t name = intern(line.function);
  // pprof readers show system_name in some views; an empty one would print
  // as a blank, so it defaults to the name.
  const int64_t system_name = line.system_name.empty() ? name : intern(line.system_name);
  const FunctionEntry entry{name, system_name, intern(line.file)};
  auto [it, inserted] = function_ids_.try_emplace(entry, functions_.size() + 1);
  if (inserted) functions_.push_back(entry);
  return it->second;
}

uint64_t ProfileBuilder::add_location(uint64_t mapping_id, uint64_t address,
                                      const std::vector<ProfileLine>& lines) {
  if (mapping_id > mappings_.size()) {
    // A caller bug; in release builds keep the profile valid (pprof rejects
    // dangling ids) by dropping the reference.
    assert(false && "mapping_id must come from add_mapping");
    mapping_id = 0;
  }
  LocationEntry entry{mapping_id, address, {}};
  entry.lines.reserve(lines.size());
  for (const ProfileLine& line : lines) {
    entry.lines.push_back(LineEntry{add_function(line), line.line});
  }
  auto [it, inserted] = location_ids_.try_emplace(entry, locations_.size() + 1);
  if (inserted) locations_.push_back(std::move(entry));
  return it->second;
}

void ProfileBuilder::add_sample(const std::vector<uint64_t>& location_ids, int64_t count,
                                const SampleLabels& labels, const std::vector<uint64_t>* times_unix_ns) {
  if (count <= 0) return;
  for (uint64_t id : location_ids) {
    if (id == 0 || id > locations_.size()) {
      // A caller bug; in release builds keep the profile valid (pprof
      // rejects dangling ids) by dropping the sample.
      assert(false && "location ids must come from add_location");
      return;
    }
  }
  SampleKey key{location_ids, labels.pid, labels.tid, intern(labels.comm), intern(labels.thread_name),
                intern(labels.extra_key), intern(labels.extra_value), intern_resource(labels)};
  SampleValue& value = samples_[std::move(key)];
  value.count += count;
  if (value.timed && times_unix_ns && times_unix_ns->size() == static_cast<size_t>(count)) {
    value.times.insert(value.times.end(), times_unix_ns->begin(), times_unix_ns->end());
    any_times_ = true;
  } else {
    value.timed = false;
    value.times.clear();
  }
}

std::vector<std::vector<uint64_t>> ProfileBuilder::sample_times() const {
  std::vector<std::vector<uint64_t>> out;
  if (!any_times_) return out;
  out.reserve(samples_.size());
  for (const auto& [key, value] : samples_) {
    out.push_back(value.timed ? value.times : std::vector<uint64_t>{});
    std::sort(out.back().begin(), out.back().end());
  }
  return out;
}

std::set<std::string> ProfileBuilder::resource_keys() const {
  std::set<std::string> keys;
  for (const LabelSet& set : resource_sets_) {
    for (const auto& [key, value] : set) keys.insert(strings_[static_cast<size_t>(key)]);
  }
  return keys;
}

size_t ProfileBuilder::intern_resource(const SampleLabels& labels) {
  if (!labels.resource || labels.resource->empty()) return 0;
  if (auto it = resource_by_source_.find(labels.resource); it != resource_by_source_.end()) return it->second;
  LabelSet set;
  for (const auto& [key, value] : *labels.resource) {
    if (!key.empty() && !value.empty()) set.emplace_back(intern(key), intern(value));
  }
  auto [it, inserted] = resource_set_ids_.try_emplace(set, resource_sets_.size());
  if (inserted) resource_sets_.push_back(std::move(set));
  resource_by_source_.emplace(labels.resource, it->second);
  return it->second;
}

void ProfileBuilder::add_comment(const std::string& comment) {
  comments_.push_back(intern(comment));
}

pb::Profile ProfileBuilder::build() const {
  pb::Profile profile;

  for (const std::string& s : strings_) profile.add_string_table(s);

  pb::ValueType* samples_type = profile.add_sample_type();
  samples_type->set_type(str_samples_);
  samples_type->set_unit(str_count_);
  pb::ValueType* cpu_type = profile.add_sample_type();
  cpu_type->set_type(str_cpu_);
  cpu_type->set_unit(str_nanoseconds_);
  profile.mutable_period_type()->set_type(str_cpu_);
  profile.mutable_period_type()->set_unit(str_nanoseconds_);
  profile.set_period(period_ns_);
  profile.set_time_nanos(time_nanos_);
  profile.set_duration_nanos(duration_ns_);
  for (int64_t comment : comments_) profile.add_comment(comment);

  // The has_filenames/has_line_numbers/has_inline_frames flags tell pprof
  // what symbolic detail a mapping's locations carry; derive them from the
  // locations instead of making every caller track them.
  struct MappingDetail {
    bool has_filenames = false;
    bool has_line_numbers = false;
    bool has_inline_frames = false;
  };
  std::vector<MappingDetail> details(mappings_.size());

  for (size_t i = 0; i < locations_.size(); ++i) {
    const LocationEntry& entry = locations_[i];
    pb::Location* location = profile.add_location();
    location->set_id(i + 1);
    location->set_mapping_id(entry.mapping_id);
    location->set_address(entry.address);
    for (const LineEntry& line_entry : entry.lines) {
      pb::Line* line = location->add_line();
      line->set_function_id(line_entry.function_id);
      line->set_line(line_entry.line);
    }
    if (entry.mapping_id == 0) continue;
    MappingDetail& detail = details[entry.mapping_id - 1];
    detail.has_inline_frames |= entry.lines.size() > 1;
    for (const LineEntry& line_entry : entry.lines) {
      detail.has_filenames |= functions_[line_entry.function_id - 1].file != 0;
      detail.has_line_numbers |= line_entry.line != 0;
    }
  }

  for (size_t i = 0; i < mappings_.size(); ++i) {
    const MappingEntry& entry = mappings_[i];
    pb::Mapping* mapping = profile.add_mapping();
    mapping->set_id(i + 1);
    mapping->set_memory_start(entry.start);
    mapping->set_memory_limit(entry.limit);
    mapping->set_file_offset(entry.file_offset);
    mapping->set_filename(entry.file);
    mapping->set_build_id(entry.build_id);
    mapping->set_has_functions(entry.has_functions);
    // Without function names, file/line/inline detail cannot be claimed.
    mapping->set_has_filenames(entry.has_functions && details[i].has_filenames);
    mapping->set_has_line_numbers(entry.has_functions && details[i].has_line_numbers);
    mapping->set_has_inline_frames(entry.has_functions && details[i].has_inline_frames);
  }

  for (size_t i = 0; i < functions_.size(); ++i) {
    const FunctionEntry& entry = functions_[i];
    pb::Function* function = profile.add_function();
    function->set_id(i + 1);
    function->set_name(entry.name);
    function->set_system_name(entry.system_name);
    function->set_filename(entry.file);
  }

  for (const auto& [key, value] : samples_) {
    const int64_t count = value.count;
    pb::Sample* sample = profile.add_sample();
    for (uint64_t id : key.location_ids) sample->add_location_id(id);
    sample->add_value(count);
    sample->add_value(cpu_nanoseconds(count, period_ns_));
    auto add_num_label = [sample](int64_t label_key, int64_t num) {
      pb::Label* label = sample->add_label();
      label->set_key(label_key);
      label->set_num(num);
    };
    auto add_str_label = [sample](int64_t label_key, int64_t str) {
      if (str == 0) return;  // an empty name carries no information
      pb::Label* label = sample->add_label();
      label->set_key(label_key);
      label->set_str(str);
    };
    add_num_label(str_pid_, key.pid);
    add_num_label(str_tid_, key.tid);
    add_str_label(str_comm_, key.comm);
    add_str_label(str_thread_name_, key.thread_name);
    if (key.extra_key != 0) add_str_label(key.extra_key, key.extra_value);
    for (const auto& [label_key, value] : resource_sets_[key.resource]) add_str_label(label_key, value);
  }

  return profile;
}

std::string ProfileBuilder::serialize() const { return build().SerializeAsString(); }

Result<std::string> ProfileBuilder::encode_gzip() const {
  const pb::Profile profile = build();
  // protobuf refuses to encode messages of 2 GiB or more.
  const size_t size = profile.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) {
    return make_error("profile too large to encode (" + std::to_string(size) + " bytes)");
  }
  std::string encoded;
  if (!profile.SerializeToString(&encoded)) return make_error("protobuf encoding failed");
  return gzip_compress(encoded);
}

Result<void> ProfileBuilder::write_gzip(const std::string& path) const {
  Result<std::string> compressed = encode_gzip();
  if (!compressed) {
    return make_error("cannot write profile " + path + ": " + compressed.error().message);
  }
  return write_file_atomically(path, *compressed);
}

std::vector<std::pair<std::string, std::string>> ProfileBuilder::function_names(const LocationEntry& location) const {
  std::vector<std::pair<std::string, std::string>> names;
  names.reserve(location.lines.size());
  const std::string& mapping_file = location.mapping_id != 0 ? strings_[mappings_[location.mapping_id - 1].file] : strings_[0];
  for (const LineEntry& line : location.lines) {
    const FunctionEntry& function = functions_[line.function_id - 1];
    const std::string& name = strings_[function.name];
    if (!name.empty()) names.emplace_back(name, frame_type_of(name, strings_[function.system_name], mapping_file));
  }
  if (!names.empty()) return names;
  // Named the way `pprof -top` names it, so the two summaries agree: by the
  // mapped file when there is one, else unknown.
  const std::string type = frame_type_of("", "", mapping_file);
  if (!mapping_file.empty()) {
    std::string_view basename = mapping_file;
    basename.remove_prefix(basename.rfind('/') + 1);  // npos + 1 == 0: no '/'
    // Appended piecewise: "[" + std::string trips g++ 12's bogus -Wrestrict.
    std::string name;
    name.reserve(basename.size() + 2);
    name += '[';
    name += basename;
    name += ']';
    return {{name, type}};
  }
  return {{"<unknown>", type}};
}

std::vector<FunctionCost> ProfileBuilder::top_functions(size_t n) const {
  std::map<std::string, FunctionCost> costs;
  for (const auto& [key, value] : samples_) {
    const int64_t count = value.count;
    if (key.location_ids.empty()) continue;  // no stack: nothing to charge

    // Flat: the innermost frame of the leaf location.
    auto leaf = function_names(locations_[key.location_ids.front() - 1]).front();
    FunctionCost& leaf_cost = costs[leaf.first];
    leaf_cost.flat += count;
    if (leaf_cost.type.empty()) leaf_cost.type = std::move(leaf.second);

    // Cumulative: every function on the stack, once however often it recurses.
    std::map<std::string, std::string> on_stack;
    for (uint64_t id : key.location_ids) {
      for (auto& [name, type] : function_names(locations_[id - 1])) on_stack.emplace(std::move(name), std::move(type));
    }
    for (auto& [name, type] : on_stack) {
      FunctionCost& cost = costs[name];
      cost.cumulative += count;
      if (cost.type.empty()) cost.type = std::move(type);
    }
  }

  std::vector<FunctionCost> ranked;
  ranked.reserve(costs.size());
  for (auto& [name, cost] : costs) {
    cost.function = name;
    ranked.push_back(std::move(cost));
  }
  std::sort(ranked.begin(), ranked.end(), [](const FunctionCost& a, const FunctionCost& b) {
    if (a.flat != b.flat) return a.flat > b.flat;
    if (a.cumulative != b.cumulative) return a.cumulative > b.cumulative;
    return a.function < b.function;
  });
  if (ranked.size() > n) ranked.resize(n);
  return ranked;
}

int64_t ProfileBuilder::total_samples() const {
  int64_t total = 0;
  for (const auto& [key, value] : samples_) total += value.count;
  return total;
}

}  // namespace omniprof
