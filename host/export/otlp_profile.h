// The OTLP profiles message of a round: the pprof profile omniprof writes
// locally, said in OpenTelemetry's terms, with every frame named as the pprof
// file names it (the backend has nothing left to symbolize).
//
// The request holds one ResourceProfiles per process (its resource:
// process.pid, process.command and the process's resource labels:
// service.name, container.id, ...), each with one ScopeProfiles ("omniprof",
// its version) and one Profile: sample type samples/count, period type
// cpu/nanoseconds, the round's start and duration. All profiles share one
// ProfilesDictionary; every table starts with its zero value and holds no
// duplicates. Samples are counted by stack in the kernel; with the time of
// each (ProfileBuilder::sample_times) a Sample of count N carries N
// timestamps_unix_nano and N values of 1, the same event at the same index
// as the spec asks when both are set. A sample whose times are not all known
// carries its count alone, as one value; the round's time_unix_nano and
// duration_nano bound it.
//
// Where each pprof label goes is one table (kLabelAttributes below); a pprof
// label that is neither in it nor a resource label (a plugin's python_gil)
// becomes a sample attribute of the same name.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"
#include "profile/profile.pb.h"

namespace omniprof {

namespace otlp_collector = opentelemetry::proto::collector::profiles::v1development;
namespace otlp_profiles = opentelemetry::proto::profiles::v1development;

// The attribute keys omniprof sets, as OpenTelemetry's semantic conventions
// name them.
inline constexpr std::string_view kFrameTypeAttribute = "profile.frame.type";
inline constexpr std::string_view kBuildIdAttribute = "process.executable.build_id.gnu";

// A pprof label's place in OTLP.
struct LabelAttribute {
  std::string_view pprof_label;
  std::string_view attribute;
  bool resource;  // true: the process's resource; false: the sample's attributes
  bool numeric;   // a pprof num label (an int attribute), else a string
};
inline constexpr LabelAttribute kLabelAttributes[] = {
    {"pid", "process.pid", true, true},
    {"comm", "process.command", true, false},
    {"tid", "thread.id", false, true},
    {"thread_name", "thread.name", false, false},
};

struct OtlpScope {
  std::string name = "omniprof";
  std::string version;
};

// `resource_keys`: the pprof label keys that describe the process
// (ProfileBuilder::resource_keys()); `sample_times`: each pprof sample's
// times, by index (ProfileBuilder::sample_times(); empty: none).
otlp_collector::ExportProfilesServiceRequest otlp_request(const perftools::profiles::Profile& profile,
                                                          const std::set<std::string>& resource_keys,
                                                          const OtlpScope& scope,
                                                          const std::vector<std::vector<uint64_t>>& sample_times = {});

}  // namespace omniprof
