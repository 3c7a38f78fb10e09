// ProfileBuilder: accumulates symbolized stacks into a pprof profile and
// writes it out. It owns the pprof bookkeeping (string interning, id
// assignment, deduplication of mappings, functions, locations and samples)
// so callers only deal in names, addresses and counts.
//
// The profile has two sample types, samples/count and cpu/nanoseconds
// (count * period), so `pprof -top` shows CPU time by default (pprof shows the
// last sample type) and `-sample_index=samples` shows raw counts.
//
// Not thread-safe: one thread builds a profile.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "omniprof/support/result.h"
#include "profile/profile.pb.h"

namespace omniprof {

// One executable mapping of a process (a line of /proc/PID/maps).
struct ProfileMapping {
  uint64_t start = 0;
  uint64_t limit = 0;  // one past the last address
  uint64_t file_offset = 0;
  std::string file;
  std::string build_id;        // hex GNU build id, "" if unknown
  bool has_functions = false;  // locations in it carry function names

  friend auto operator<=>(const ProfileMapping&, const ProfileMapping&) = default;
};

// One source-level frame at an address. Several lines at one address are
// inlined calls: innermost first, the function that owns the address last.
struct ProfileLine {
  std::string function;     // demangled name
  std::string system_name;  // mangled (linker) name, "" if same as function
  std::string file;         // source file, "" if unknown
  int64_t line = 0;         // 0 if unknown

  friend auto operator<=>(const ProfileLine&, const ProfileLine&) = default;
};

// Who was on CPU: pid/tid become numeric pprof labels, comm/thread_name
// string labels (omitted when empty), so `pprof -tagfocus` can filter on them.
struct SampleLabels {
  int64_t pid = 0;
  int64_t tid = 0;
  std::string comm;         // process name
  std::string thread_name;  // thread name
  // A label an interpreter plugin put on the sample (python_gil=held);
  // empty key = none.
  std::string extra_key;
  std::string extra_value;
  // Who the process is (service.name, container.id, ...: the resource
  // attributes of process/process_identity.h), as string labels; shared by
  // every sample of the process. Null: none.
  std::shared_ptr<const std::vector<std::pair<std::string, std::string>>> resource;

  friend auto operator<=>(const SampleLabels&, const SampleLabels&) = default;
};

// A function's share of the samples: flat = samples where it is the leaf
// (innermost) frame, cumulative = samples where it is anywhere on the stack.
struct FunctionCost {
  std::string function;
  std::string type;  // kernel, native, python, ruby, jit... (profile/frame_type.h)
  int64_t flat = 0;
  int64_t cumulative = 0;

  friend bool operator==(const FunctionCost&, const FunctionCost&) = default;
};

class ProfileBuilder {
 public:
  // time_nanos: when collection started, ns since the Unix epoch.
  ProfileBuilder(int64_t period_ns, int64_t time_nanos);

  // Returns the mapping's pprof id (1-based); an identical mapping added
  // before gets the same id.
  uint64_t add_mapping(const ProfileMapping& mapping);

  // Returns the location's pprof id (1-based); a location with the same
  // mapping, address and lines gets the same id. mapping_id is 0 for an
  // address outside any mapping, otherwise an id from add_mapping (anything
  // else asserts in debug builds and is treated as 0 in release builds).
  // lines may be empty (unsymbolized address).
  uint64_t add_location(uint64_t mapping_id, uint64_t address,
                        const std::vector<ProfileLine>& lines);

  // Records `count` samples of a stack (location ids from add_location, leaf
  // first). Samples with the same stack and labels are merged. count <= 0
  // records nothing; an id not from add_location asserts in debug builds and
  // drops the sample in release builds.
  // `times_unix_ns`: when each of the `count` samples was taken (ns since
  // the Unix epoch), or null. A merged sample keeps its times only if every
  // part came with all of its own.
  void add_sample(const std::vector<uint64_t>& location_ids, int64_t count,
                  const SampleLabels& labels, const std::vector<uint64_t>* times_unix_ns = nullptr);

  void set_duration_ns(int64_t duration_ns) { duration_ns_ = duration_ns; }
  void add_comment(const std::string& comment);

  perftools::profiles::Profile build() const;
  // The uncompressed protobuf encoding of build(); empty if the profile
  // exceeds protobuf's 2 GiB message limit (write_gzip reports that case).
  std::string serialize() const;
  // Writes the gzip'd profile to `path` (mode 0644) atomically: readers see
  // either the old file or the complete new one, never a partial write. An
  // error names `path`, the failed step and strerror, and leaves no
  // temporary file behind.
  Result<void> write_gzip(const std::string& path) const;
  // The gzip'd encoding write_gzip writes (to keep a profile that cannot be
  // written yet, or write it elsewhere).
  Result<std::string> encode_gzip() const;

  // The n functions with the most flat samples (ties: more cumulative
  // samples, then name). Functions are identified by name; an unsymbolized
  // location is named as `pprof -top` names it: "[libc.so.6]" after its
  // mapped file, or "<unknown>" without one.
  std::vector<FunctionCost> top_functions(size_t n) const;
  // Sum of all sample counts.
  int64_t total_samples() const;
  // The label keys that say who a process is (SampleLabels::resource) in
  // this profile: an exporter whose format separates a process's resource
  // from its samples' attributes (OTLP) reads them apart by these.
  std::set<std::string> resource_keys() const;

  // Each sample's times, in build()'s sample order, each sorted: as many as
  // its count, or none (taken without times). Empty if no sample has times.
  // pprof has no place for them; OTLP does (otlp_profile.h).
  std::vector<std::vector<uint64_t>> sample_times() const;
  int64_t period_ns() const { return period_ns_; }
  size_t num_samples() const { return samples_.size(); }  // after merging
  size_t num_locations() const { return locations_.size(); }
  size_t num_functions() const { return functions_.size(); }
  size_t num_mappings() const { return mappings_.size(); }
  size_t num_strings() const { return strings_.size(); }

 private:
  // The entries below hold string_table indexes instead of strings, so each
  // string is stored once however many entries name it.
  struct MappingEntry {
    uint64_t start;
    uint64_t limit;
    uint64_t file_offset;
    int64_t file;
    int64_t build_id;
    bool has_functions;
    friend auto operator<=>(const MappingEntry&, const MappingEntry&) = default;
  };
  struct FunctionEntry {
    int64_t name;
    int64_t system_name;
    int64_t file;
    friend auto operator<=>(const FunctionEntry&, const FunctionEntry&) = default;
  };
  struct LineEntry {
    uint64_t function_id;
    int64_t line;
    friend auto operator<=>(const LineEntry&, const LineEntry&) = default;
  };
  struct LocationEntry {
    uint64_t mapping_id;
    uint64_t address;
    std::vector<LineEntry> lines;
    friend auto operator<=>(const LocationEntry&, const LocationEntry&) = default;
  };
  struct SampleKey {
    std::vector<uint64_t> location_ids;
    int64_t pid;
    int64_t tid;
    int64_t comm;         // string index, 0 = no label
    int64_t thread_name;  // string index, 0 = no label
    int64_t extra_key;    // string index, 0 = no label
    int64_t extra_value;
    size_t resource;  // index into resource_sets_, 0 = none
    friend auto operator<=>(const SampleKey&, const SampleKey&) = default;
  };
  // A process's resource labels as string indexes, stored once per distinct set.
  using LabelSet = std::vector<std::pair<int64_t, int64_t>>;
  size_t intern_resource(const SampleLabels& labels);

  int64_t intern(const std::string& s);
  uint64_t add_function(const ProfileLine& line);
  // The functions top_functions() charges for a location, innermost first:
  // name and frame type.
  std::vector<std::pair<std::string, std::string>> function_names(const LocationEntry& location) const;

  int64_t period_ns_;
  int64_t time_nanos_;
  int64_t duration_ns_ = 0;

  std::vector<std::string> strings_;
  std::unordered_map<std::string, int64_t> string_index_;

  // Entry i has pprof id i + 1; the maps find an entry's id for dedup.
  std::vector<MappingEntry> mappings_;
  std::map<MappingEntry, uint64_t> mapping_ids_;
  std::vector<FunctionEntry> functions_;
  std::map<FunctionEntry, uint64_t> function_ids_;
  std::vector<LocationEntry> locations_;
  std::map<LocationEntry, uint64_t> location_ids_;

  struct SampleValue {
    int64_t count = 0;
    std::vector<uint64_t> times;  // unix ns; meaningful only while `timed`
    bool timed = true;
  };
  // Merged samples and their counts. Ordered so build() is deterministic.
  std::map<SampleKey, SampleValue> samples_;
  bool any_times_ = false;
  std::vector<LabelSet> resource_sets_{LabelSet{}};  // [0]: none
  std::map<LabelSet, size_t> resource_set_ids_;
  // The sets already interned, by the shared attributes they came from (one
  // process's samples share one), kept alive so their addresses stay unique.
  std::map<std::shared_ptr<const std::vector<std::pair<std::string, std::string>>>, size_t> resource_by_source_;

  std::vector<int64_t> comments_;

  // string_table indexes of the fixed vocabulary (sample types, label keys),
  // interned once by the constructor.
  int64_t str_samples_, str_count_, str_cpu_, str_nanoseconds_;
  int64_t str_pid_, str_tid_, str_comm_, str_thread_name_;
};

// Writes `data` to `path` through a temporary file in the same directory,
// fsync and a rename, so a reader (or a crash) never sees a half-written
// file. An error names `path`, the failed step and strerror, and leaves no
// temporary file behind.
Result<void> write_file_atomically(const std::string& path, const std::string& data);

// Whether a profile can be written at `path` (its directory exists and takes
// a new file; `path` is not a directory), by creating and removing a
// temporary file there: `record` checks this before sampling.
Result<void> check_profile_writable(const std::string& path);

}  // namespace omniprof
