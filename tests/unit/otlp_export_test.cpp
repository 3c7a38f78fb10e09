// OTLP and Pyroscope export without a kernel: the protos' field numbers
// against opentelemetry-proto 1.11.0, a round's OTLP request against its
// pprof (the same samples, frames and labels), and delivery through real
// gRPC and HTTP servers on 127.0.0.1: retries with backoff through an
// outage, Retry-After, rejection, partial success, a backend that never
// answers (bounded queue, counted drops, bounded shutdown).
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "common/gzip.h"
#include "export/destinations.h"
#include "export/exporter.h"
#include "export/otlp_profile.h"
#include "google/rpc/status.pb.h"
#include "profile/pprof_reader.h"
#include "omniprof/support/unique_fd.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.grpc.pb.h"
#include "otlp_compare.h"
#include "otlp_receiver.h"

namespace omniprof {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace otlp_common = opentelemetry::proto::common::v1;

// Every field of the messages omniprof sends, as release 1.11.0 of
// opentelemetry-proto numbers them (profiles.proto, common.proto,
// resource.proto, profiles_service.proto).
TEST(OtlpSchema, FieldNumbersAreThoseOfTheRelease) {
  struct Field {
    const google::protobuf::Descriptor* message;
    const char* name;
    int number;
  };
  const Field fields[] = {
      {otlp_profiles::ProfilesData::descriptor(), "resource_profiles", 1},
      {otlp_profiles::ProfilesData::descriptor(), "dictionary", 2},
      {otlp_profiles::ProfilesDictionary::descriptor(), "mapping_table", 1},
      {otlp_profiles::ProfilesDictionary::descriptor(), "location_table", 2},
      {otlp_profiles::ProfilesDictionary::descriptor(), "function_table", 3},
      {otlp_profiles::ProfilesDictionary::descriptor(), "link_table", 4},
      {otlp_profiles::ProfilesDictionary::descriptor(), "string_table", 5},
      {otlp_profiles::ProfilesDictionary::descriptor(), "attribute_table", 6},
      {otlp_profiles::ProfilesDictionary::descriptor(), "stack_table", 7},
      {otlp_profiles::ResourceProfiles::descriptor(), "resource", 1},
      {otlp_profiles::ResourceProfiles::descriptor(), "scope_profiles", 2},
      {otlp_profiles::ResourceProfiles::descriptor(), "schema_url", 3},
      {otlp_profiles::ScopeProfiles::descriptor(), "scope", 1},
      {otlp_profiles::ScopeProfiles::descriptor(), "profiles", 2},
      {otlp_profiles::ScopeProfiles::descriptor(), "schema_url", 3},
      {otlp_profiles::Profile::descriptor(), "sample_type", 1},
      {otlp_profiles::Profile::descriptor(), "samples", 2},
      {otlp_profiles::Profile::descriptor(), "time_unix_nano", 3},
      {otlp_profiles::Profile::descriptor(), "duration_nano", 4},
      {otlp_profiles::Profile::descriptor(), "period_type", 5},
      {otlp_profiles::Profile::descriptor(), "period", 6},
      {otlp_profiles::Profile::descriptor(), "profile_id", 7},
      {otlp_profiles::Profile::descriptor(), "dropped_attributes_count", 8},
      {otlp_profiles::Profile::descriptor(), "original_payload_format", 9},
      {otlp_profiles::Profile::descriptor(), "original_payload", 10},
      {otlp_profiles::Profile::descriptor(), "attribute_indices", 11},
      {otlp_profiles::Link::descriptor(), "trace_id", 1},
      {otlp_profiles::Link::descriptor(), "span_id", 2},
      {otlp_profiles::ValueType::descriptor(), "type_strindex", 1},
      {otlp_profiles::ValueType::descriptor(), "unit_strindex", 2},
      {otlp_profiles::Sample::descriptor(), "stack_index", 1},
      {otlp_profiles::Sample::descriptor(), "attribute_indices", 2},
      {otlp_profiles::Sample::descriptor(), "link_index", 3},
      {otlp_profiles::Sample::descriptor(), "values", 4},
      {otlp_profiles::Sample::descriptor(), "timestamps_unix_nano", 5},
      {otlp_profiles::Mapping::descriptor(), "memory_start", 1},
      {otlp_profiles::Mapping::descriptor(), "memory_limit", 2},
      {otlp_profiles::Mapping::descriptor(), "file_offset", 3},
      {otlp_profiles::Mapping::descriptor(), "filename_strindex", 4},
      {otlp_profiles::Mapping::descriptor(), "attribute_indices", 5},
      {otlp_profiles::Stack::descriptor(), "location_indices", 1},
      {otlp_profiles::Location::descriptor(), "mapping_index", 1},
      {otlp_profiles::Location::descriptor(), "address", 2},
      {otlp_profiles::Location::descriptor(), "lines", 3},
      {otlp_profiles::Location::descriptor(), "attribute_indices", 4},
      {otlp_profiles::Line::descriptor(), "function_index", 1},
      {otlp_profiles::Line::descriptor(), "line", 2},
      {otlp_profiles::Line::descriptor(), "column", 3},
      {otlp_profiles::Function::descriptor(), "name_strindex", 1},
      {otlp_profiles::Function::descriptor(), "system_name_strindex", 2},
      {otlp_profiles::Function::descriptor(), "filename_strindex", 3},
      {otlp_profiles::Function::descriptor(), "start_line", 4},
      {otlp_profiles::KeyValueAndUnit::descriptor(), "key_strindex", 1},
      {otlp_profiles::KeyValueAndUnit::descriptor(), "value", 2},
      {otlp_profiles::KeyValueAndUnit::descriptor(), "unit_strindex", 3},
      {otlp_common::AnyValue::descriptor(), "string_value", 1},
      {otlp_common::AnyValue::descriptor(), "bool_value", 2},
      {otlp_common::AnyValue::descriptor(), "int_value", 3},
      {otlp_common::AnyValue::descriptor(), "double_value", 4},
      {otlp_common::AnyValue::descriptor(), "array_value", 5},
      {otlp_common::AnyValue::descriptor(), "kvlist_value", 6},
      {otlp_common::AnyValue::descriptor(), "bytes_value", 7},
      {otlp_common::AnyValue::descriptor(), "string_value_strindex", 8},
      {otlp_common::KeyValue::descriptor(), "key", 1},
      {otlp_common::KeyValue::descriptor(), "value", 2},
      {otlp_common::KeyValue::descriptor(), "key_strindex", 3},
      {otlp_common::InstrumentationScope::descriptor(), "name", 1},
      {otlp_common::InstrumentationScope::descriptor(), "version", 2},
      {otlp_common::InstrumentationScope::descriptor(), "attributes", 3},
      {opentelemetry::proto::resource::v1::Resource::descriptor(), "attributes", 1},
      {opentelemetry::proto::resource::v1::Resource::descriptor(), "dropped_attributes_count", 2},
      {opentelemetry::proto::resource::v1::Resource::descriptor(), "entity_refs", 3},
      {otlp_collector::ExportProfilesServiceRequest::descriptor(), "resource_profiles", 1},
      {otlp_collector::ExportProfilesServiceRequest::descriptor(), "dictionary", 2},
      {otlp_collector::ExportProfilesServiceResponse::descriptor(), "partial_success", 1},
      {otlp_collector::ExportProfilesPartialSuccess::descriptor(), "rejected_profiles", 1},
      {otlp_collector::ExportProfilesPartialSuccess::descriptor(), "error_message", 2},
      // googleapis' google/rpc/status.proto and error_details.proto.
      {google::rpc::Status::descriptor(), "code", 1},
      {google::rpc::Status::descriptor(), "message", 2},
      {google::rpc::Status::descriptor(), "details", 3},
      {google::rpc::RetryInfo::descriptor(), "retry_delay", 1},
  };
  for (const Field& f : fields) {
    const auto* field = f.message->FindFieldByName(f.name);
    ASSERT_NE(field, nullptr) << f.message->full_name() << "." << f.name << " is missing";
    EXPECT_EQ(field->number(), f.number) << f.message->full_name() << "." << f.name;
  }
  EXPECT_EQ(otlp_profiles::Profile::descriptor()->FindFieldByName("time_unix_nano")->type(),
            google::protobuf::FieldDescriptor::TYPE_FIXED64);
  EXPECT_EQ(otlp_profiles::Sample::descriptor()->FindFieldByName("timestamps_unix_nano")->type(),
            google::protobuf::FieldDescriptor::TYPE_FIXED64);
  EXPECT_EQ(otlp_collector::ProfilesService::service_full_name(),
            std::string("opentelemetry.proto.collector.profiles.v1development.ProfilesService"));
}

// Two processes: a native one (a mapping with a build id, an inlined call,
// a kernel frame) and a Python one (typed frames, a plugin's label).
ProfileBuilder two_process_round() {
  ProfileBuilder builder(10101010, 1700000000123456789);
  builder.set_duration_ns(2000000000);
  uint64_t app = builder.add_mapping({0x400000, 0x500000, 0x1000, "/usr/bin/app", "abcdef0123", true});
  uint64_t kernel = builder.add_mapping({0xffffffff81000000, 0xffffffff82000000, 0, "[kernel.kallsyms]", "", true});
  uint64_t python = builder.add_mapping({0x7f0000000000, 0x7f0000100000, 0, "/usr/bin/python3.11", "", true});
  uint64_t leaf = builder.add_location(app, 0x401000, {{"leaf", "_Z4leafv", "app.cc", 10}});
  uint64_t inlined = builder.add_location(app, 0x402000, {{"helper", "", "app.cc", 20}, {"main", "", "app.cc", 30}});
  uint64_t syscall = builder.add_location(kernel, 0xffffffff81001000, {{"do_syscall_64", "", "", 0}});
  uint64_t py_f = builder.add_location(python, 0, {{"f", typed_system_name("python", "f"), "/srv/app.py", 7}});
  uint64_t py_module = builder.add_location(python, 0, {{"<module>", typed_system_name("python", "<module>"), "/srv/app.py", 12}});
  auto resource_a = std::make_shared<const std::vector<std::pair<std::string, std::string>>>(
      std::vector<std::pair<std::string, std::string>>{{"service.name", "app"}, {"host.name", "box"}});
  auto resource_b = std::make_shared<const std::vector<std::pair<std::string, std::string>>>(
      std::vector<std::pair<std::string, std::string>>{{"service.name", "web"}, {"container.id", "c0ffee"}});
  builder.add_sample({syscall, leaf, inlined}, 5, SampleLabels{100, 101, "app", "worker", "", "", resource_a});
  builder.add_sample({leaf, inlined}, 3, SampleLabels{100, 100, "app", "app", "", "", resource_a});
  builder.add_sample({py_f, py_module}, 7, SampleLabels{200, 200, "python3", "MainThread", "python_gil", "held", resource_b});
  return builder;
}

TEST(OtlpRequest, SaysWhatThePprofSays) {
  ProfileBuilder round = two_process_round();
  auto request = otlp_request(round.build(), round.resource_keys(), OtlpScope{"omniprof", "test"});
  EXPECT_EQ(otlp_compare::from_otlp(request), otlp_compare::from_pprof(round.build()));
  EXPECT_EQ(otlp_compare::from_pprof(round.build()).size(), 3u);

  // One ResourceProfiles per process, its resource the process's.
  ASSERT_EQ(request.resource_profiles_size(), 2);
  std::set<std::string> resources;
  for (const auto& rp : request.resource_profiles()) {
    std::vector<std::string> attributes;
    for (const auto& kv : rp.resource().attributes()) {
      attributes.push_back(kv.key() + "=" + (kv.value().has_int_value() ? std::to_string(kv.value().int_value())
                                                                        : kv.value().string_value()));
    }
    resources.insert(fmt::format("{}", fmt::join(attributes, ",")));
    ASSERT_EQ(rp.scope_profiles_size(), 1);
    EXPECT_EQ(rp.scope_profiles(0).scope().name(), "omniprof");
    ASSERT_EQ(rp.scope_profiles(0).profiles_size(), 1);
    const auto& profile = rp.scope_profiles(0).profiles(0);
    const auto& d = request.dictionary();
    EXPECT_EQ(d.string_table(profile.sample_type().type_strindex()), "samples");
    EXPECT_EQ(d.string_table(profile.sample_type().unit_strindex()), "count");
    EXPECT_EQ(d.string_table(profile.period_type().type_strindex()), "cpu");
    EXPECT_EQ(d.string_table(profile.period_type().unit_strindex()), "nanoseconds");
    EXPECT_EQ(profile.period(), 10101010);
    EXPECT_EQ(profile.time_unix_nano(), 1700000000123456789u);
    EXPECT_EQ(profile.duration_nano(), 2000000000u);
    EXPECT_EQ(profile.profile_id().size(), 16u);
  }
  EXPECT_EQ(resources, (std::set<std::string>{"process.pid=100,process.command=app,service.name=app,host.name=box",
                                              "process.pid=200,process.command=python3,service.name=web,container.id=c0ffee"}));

  // Every table starts with its zero value and holds nothing twice.
  const auto& d = request.dictionary();
  EXPECT_EQ(d.string_table(0), "");
  EXPECT_EQ(d.mapping_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.location_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.function_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.link_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.attribute_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.stack_table(0).ByteSizeLong(), 0u);
  auto unique = [](const auto& table) {
    std::set<std::string> seen;
    for (const auto& entry : table) {
      if (!seen.insert(entry.SerializeAsString()).second) return false;
    }
    return true;
  };
  EXPECT_TRUE(unique(d.attribute_table()));
  EXPECT_TRUE(unique(d.stack_table()));
  EXPECT_TRUE(unique(d.function_table()));
  EXPECT_EQ(std::set<std::string>(d.string_table().begin(), d.string_table().end()).size(),
            static_cast<size_t>(d.string_table_size()));
  // Python's frames name themselves without pprof's "python:" prefix.
  for (const auto& f : d.function_table()) {
    EXPECT_EQ(d.string_table(f.system_name_strindex()).find("python:"), std::string::npos);
  }
}

ProfileBuilder round_numbered(int n) {
  ProfileBuilder builder(10000000, 1700000000000000000 + n);
  uint64_t m = builder.add_mapping({0x400000, 0x500000, 0, "/usr/bin/app", "", true});
  uint64_t l = builder.add_location(m, 0x401000, {{"work", "", "app.c", n}});
  builder.add_sample({l}, n, SampleLabels{1, 1, "app", "app", "", "", nullptr});
  return builder;
}

std::unique_ptr<Exporter> exporter_to(const std::string& endpoint, const std::string& protocol,
                                      ExporterSettings settings) {
  OtlpSettings otlp;
  otlp.endpoint = endpoint;
  otlp.protocol = protocol;
  auto destination = make_otlp_destination(otlp);
  EXPECT_TRUE(destination) << destination.error().message;
  return std::make_unique<Exporter>(std::move(*destination), settings);
}

class OtlpDelivery : public ::testing::TestWithParam<std::string> {
 protected:
  std::string endpoint() const { return GetParam() == "grpc" ? receiver_.grpc_endpoint() : receiver_.http_endpoint(); }
  // An exporter whose one round was refused once (UNAVAILABLE / 503 until
  // `outage` from the receiver's start), now in a backoff of 10-30 s.
  std::unique_ptr<Exporter> refused_once_then_backing_off(std::chrono::milliseconds outage) {
    receiver_.answer = [outage](std::chrono::milliseconds at) {
      testing_support::Receiver::Answer a;
      if (at < outage) {
        a.http_status = 503;
        a.grpc_code = grpc::StatusCode::UNAVAILABLE;
      }
      return a;
    };
    ExporterSettings settings;
    settings.backoff_initial = 20s;
    auto exporter = exporter_to(endpoint(), GetParam(), settings);
    exporter->submit(round_numbered(1));
    const auto began = Clock::now();
    while (exporter->stats().send_failures < 1 && Clock::now() - began < 10s) std::this_thread::sleep_for(10ms);
    return exporter;
  }
  testing_support::Receiver receiver_;
};

TEST_P(OtlpDelivery, EachRoundArrivesGzipdAndEqualToItsPprof) {
  auto exporter = exporter_to(endpoint(), GetParam(), {});
  ProfileBuilder round = two_process_round();
  exporter->submit(round);
  exporter->shutdown(10s);
  auto arrivals = receiver_.arrivals();
  ASSERT_EQ(arrivals.size(), 1u);
  EXPECT_EQ(otlp_compare::from_otlp(arrivals[0].request), otlp_compare::from_pprof(round.build()));
  EXPECT_EQ(exporter->stats().rounds_sent, 1u);
  if (GetParam() == "grpc") {
    // A server that takes no gzip refuses what the exporter sends.
    testing_support::Receiver no_gzip(true);
    auto refused = exporter_to(no_gzip.grpc_endpoint(), "grpc", {});
    refused->submit(round);
    refused->shutdown(10s);
    EXPECT_EQ(refused->stats().dropped_rejected, 1u);
    EXPECT_EQ(no_gzip.arrivals().size(), 0u);
  } else {
    EXPECT_EQ(arrivals[0].encoding, "gzip");
  }
}

// An outage: UNAVAILABLE (503) for 5 s, then OK. Every round within the
// queue arrives, in order, and the attempts are spaced as the backoff says
// (0.4 s doubling, at most 1.6 s here; jitter 0.5-1.5x). The agent through
// a 20 s outage: tests/e2e/export_test.cpp.
TEST_P(OtlpDelivery, AnOutageLosesNoRoundWithinTheQueue) {
  receiver_.answer = [](std::chrono::milliseconds at) {
    testing_support::Receiver::Answer a;
    if (at < 5s) {
      a.http_status = 503;
      a.grpc_code = grpc::StatusCode::UNAVAILABLE;
    }
    return a;
  };
  ExporterSettings settings;
  settings.queue_rounds = 5;
  settings.backoff_initial = 400ms;
  settings.backoff_max = 1600ms;
  auto exporter = exporter_to(endpoint(), GetParam(), settings);
  for (int n = 1; n <= 5; ++n) exporter->submit(round_numbered(n));
  const auto began = Clock::now();
  while (exporter->stats().rounds_sent < 5 && Clock::now() - began < 60s) std::this_thread::sleep_for(100ms);
  exporter->shutdown(1s);
  ExporterStats stats = exporter->stats();
  EXPECT_EQ(stats.rounds_sent, 5u);
  EXPECT_EQ(stats.dropped_queue_full + stats.dropped_retries_exhausted + stats.dropped_shutdown, 0u);
  auto arrivals = receiver_.arrivals();
  std::vector<int64_t> delivered;
  std::vector<std::chrono::milliseconds> failed_at;
  for (const auto& a : arrivals) {
    if (a.answered_ok) {
      delivered.push_back(static_cast<int64_t>(a.request.resource_profiles(0).scope_profiles(0).profiles(0).time_unix_nano() -
                                               1700000000000000000));
    } else {
      failed_at.push_back(a.at);
    }
  }
  EXPECT_EQ(delivered, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  // The gaps between attempts: 0.4, 0.8, 1.6, 1.6, ... s, each within jitter.
  ASSERT_GE(failed_at.size(), 4u);
  for (size_t i = 1; i < failed_at.size(); ++i) {
    const double step = std::min(400.0 * (1 << std::min<size_t>(i - 1, 10)), 1600.0);
    const double gap = static_cast<double>((failed_at[i] - failed_at[i - 1]).count());
    EXPECT_GE(gap, 0.5 * step - 50) << "attempt " << i;
    EXPECT_LE(gap, 1.5 * step + 1000) << "attempt " << i;
  }
  EXPECT_EQ(stats.retries, failed_at.size());
}

// A stop while the exporter sleeps a long backoff: it tries at once, then
// every half of the time left, so a backend back before the deadline gets
// the round (a sleep of 10-30 s here would otherwise outlast the 4 s wait
// and drop it).
TEST_P(OtlpDelivery, AStopDuringABackoffKeepsTryingUntilItsDeadline) {
  auto exporter = refused_once_then_backing_off(1500ms);
  ASSERT_EQ(exporter->stats().send_failures, 1u);
  const auto stopping = Clock::now();
  exporter->shutdown(4s);
  EXPECT_LT(Clock::now() - stopping, 4s);
  ExporterStats stats = exporter->stats();
  EXPECT_EQ(stats.rounds_sent, 1u);
  EXPECT_EQ(stats.dropped_shutdown, 0u);
  // The first attempt, one at the stop (still in the outage), one after.
  EXPECT_EQ(receiver_.arrivals().size(), 3u);
}

// A backend that stays down through a stop: a handful of attempts spread
// over the wait (not a spin), then the round is counted as lost at the stop.
TEST_P(OtlpDelivery, AStopWithTheBackendDownEndsAtItsDeadlineAfterAFewAttempts) {
  auto exporter = refused_once_then_backing_off(std::chrono::hours(1));
  ASSERT_EQ(exporter->stats().send_failures, 1u);
  const auto stopping = Clock::now();
  exporter->shutdown(2s);
  const auto took = Clock::now() - stopping;
  EXPECT_GE(took, 1500ms);
  EXPECT_LT(took, 2500ms);
  ExporterStats stats = exporter->stats();
  EXPECT_EQ(stats.rounds_sent, 0u);
  EXPECT_EQ(stats.dropped_shutdown, 1u);
  // At the stop, then 1, 0.5 and 0.25 s later (half the time left each).
  const size_t after_stop = receiver_.arrivals().size() - 1;
  EXPECT_GE(after_stop, 3u);
  EXPECT_LE(after_stop, 5u);
}

TEST_P(OtlpDelivery, APermanentRefusalDropsTheRoundAndCountsIt) {
  receiver_.answer = [](auto) {
    testing_support::Receiver::Answer a;
    a.http_status = 400;
    a.grpc_code = grpc::StatusCode::INVALID_ARGUMENT;
    return a;
  };
  auto exporter = exporter_to(endpoint(), GetParam(), {});
  exporter->submit(round_numbered(1));
  exporter->submit(round_numbered(2));
  exporter->shutdown(10s);
  EXPECT_EQ(receiver_.arrivals().size(), 2u);  // no retry
  EXPECT_EQ(exporter->stats().dropped_rejected, 2u);
  EXPECT_EQ(exporter->stats().rounds_sent, 0u);
}

TEST_P(OtlpDelivery, PartialSuccessIsCounted) {
  receiver_.answer = [](auto) {
    testing_support::Receiver::Answer a;
    a.rejected = 1;
    return a;
  };
  auto exporter = exporter_to(endpoint(), GetParam(), {});
  exporter->submit(round_numbered(1));
  exporter->shutdown(10s);
  EXPECT_EQ(exporter->stats().rounds_sent, 1u);
  EXPECT_EQ(exporter->stats().rejected_items, 1u);
}

INSTANTIATE_TEST_SUITE_P(Transports, OtlpDelivery, ::testing::Values("grpc", "http/protobuf"),
                         [](const auto& info) { return info.param == "grpc" ? "grpc" : "http"; });

TEST(OtlpHttpDelivery, RetryAfterIsHonoured) {
  testing_support::Receiver receiver;
  receiver.answer = [](std::chrono::milliseconds at) {
    testing_support::Receiver::Answer a;
    if (at < 500ms) {
      a.http_status = 429;
      a.retry_after = "3";
    }
    return a;
  };
  ExporterSettings settings;
  settings.backoff_initial = 100ms;
  auto exporter = exporter_to(receiver.http_endpoint(), "http/protobuf", settings);
  exporter->submit(round_numbered(1));
  const auto began = Clock::now();
  while (exporter->stats().rounds_sent < 1 && Clock::now() - began < 20s) std::this_thread::sleep_for(50ms);
  exporter->shutdown(1s);
  auto arrivals = receiver.arrivals();
  ASSERT_EQ(arrivals.size(), 2u);
  EXPECT_GE((arrivals[1].at - arrivals[0].at).count(), 2900);
}

// RESOURCE_EXHAUSTED is retried only when the server sends a RetryInfo, after
// its delay; without one the round is dropped as rejected.
TEST(OtlpGrpcDelivery, ResourceExhaustedIsRetriedAfterItsRetryInfoOnly) {
  testing_support::Receiver receiver;
  receiver.answer = [](std::chrono::milliseconds at) {
    testing_support::Receiver::Answer a;
    if (at < 500ms) {
      a.grpc_code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      a.retry_info_ms = 2500;
    }
    return a;
  };
  ExporterSettings settings;
  settings.backoff_initial = 100ms;
  auto exporter = exporter_to(receiver.grpc_endpoint(), "grpc", settings);
  exporter->submit(round_numbered(1));
  const auto began = Clock::now();
  while (exporter->stats().rounds_sent < 1 && Clock::now() - began < 20s) std::this_thread::sleep_for(50ms);
  exporter->shutdown(1s);
  auto arrivals = receiver.arrivals();
  ASSERT_EQ(arrivals.size(), 2u);
  EXPECT_GE((arrivals[1].at - arrivals[0].at).count(), 2400);
  EXPECT_EQ(exporter->stats().rounds_sent, 1u);

  testing_support::Receiver without;
  without.answer = [](auto) {
    testing_support::Receiver::Answer a;
    a.grpc_code = grpc::StatusCode::RESOURCE_EXHAUSTED;
    return a;
  };
  auto refused = exporter_to(without.grpc_endpoint(), "grpc", settings);
  refused->submit(round_numbered(1));
  refused->shutdown(5s);
  EXPECT_EQ(without.arrivals().size(), 1u);
  EXPECT_EQ(refused->stats().dropped_rejected, 1u);
}

// A backend that never answers: submit() never waits, the queue stays at
// its bound, every round pushed out is counted, and shutdown ends within its
// wait (plus one send's timeout at most).
TEST(OtlpHttpDelivery, ABackendThatNeverAnswersCostsABoundedQueue) {
  testing_support::SilentServer silent;
  ExporterSettings settings;
  settings.queue_rounds = 3;
  settings.timeout = 1000ms;
  auto exporter = exporter_to(fmt::format("http://127.0.0.1:{}", silent.port()), "http/protobuf", settings);
  const auto began = Clock::now();
  for (int n = 1; n <= 20; ++n) exporter->submit(round_numbered(n));
  EXPECT_LT(Clock::now() - began, 1s) << "submit waited for the network";
  ExporterStats stats = exporter->stats();
  EXPECT_LE(stats.queue_depth, 3u);
  EXPECT_EQ(stats.dropped_queue_full, 17u);
  const auto stopping = Clock::now();
  exporter->shutdown(500ms);
  EXPECT_LT(Clock::now() - stopping, 2500ms);
  stats = exporter->stats();
  EXPECT_EQ(stats.rounds_sent, 0u);
  EXPECT_EQ(stats.dropped_queue_full + stats.dropped_shutdown, 20u);
  EXPECT_EQ(stats.queue_depth, 0u);
}

TEST(ExportEndpoints, BadSettingsAreClearErrors) {
  OtlpSettings otlp;
  otlp.protocol = "http/protobuf";
  otlp.endpoint = "collector:4318";
  auto r = make_otlp_destination(otlp);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("needs an http:// or https:// URL"), std::string::npos) << r.error().message;
  otlp.endpoint = "http://collector:99999";
  r = make_otlp_destination(otlp);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("port must be 1 to 65535"), std::string::npos) << r.error().message;
  otlp.protocol = "grpc";
  otlp.endpoint = "http://collector:4317/v1development/profiles";
  r = make_otlp_destination(otlp);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("without a path"), std::string::npos) << r.error().message;
  otlp.endpoint = "collector:4317";
  otlp.certificate = "/nonexistent/ca.pem";
  r = make_otlp_destination(otlp);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/ca.pem"), std::string::npos) << r.error().message;

  auto url = parse_endpoint("https://[::1]:4318/base/");
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_EQ(url->scheme, "https");
  EXPECT_EQ(url->host, "[::1]");
  EXPECT_EQ(url->port, 4318);
  EXPECT_EQ(url->path, "/base/");
  EXPECT_FALSE(parse_endpoint("ftp://x:1"));
}

// One upload per service.name, each a valid pprof (the checks go tool pprof
// applies) holding that service's samples, frames and labels and no other's.
TEST(PyroscopeUploads, OnePprofPerServiceWithOnlyItsSamples) {
  PyroscopeSettings settings;
  settings.url = "http://127.0.0.1:1";
  auto destination = make_pyroscope_destination(settings, {{"host_name", "box"}});
  ASSERT_TRUE(destination) << destination.error().message;
  ProfileBuilder round = two_process_round();
  auto payloads = (*destination)->encode(round);
  ASSERT_TRUE(payloads) << payloads.error().message;
  ASSERT_EQ(payloads->size(), 2u);
  const otlp_compare::Samples all = otlp_compare::from_pprof(round.build());
  otlp_compare::Samples together;
  const std::string dir = ::testing::TempDir();
  for (size_t i = 0; i < payloads->size(); ++i) {
    const ExportPayload& payload = (*payloads)[i];
    const std::string service = i == 0 ? "app" : "web";
    EXPECT_EQ(payload.query.find("name=" + service + "%7Bhost_name%3Dbox%7D&format=pprof&from=1700000000&until=1700000002"),
              0u)
        << payload.query;
    const std::string path = dir + "/pyroscope-" + service + ".pb.gz";
    ASSERT_TRUE(write_file_atomically(path, payload.body));
    auto profile = read_pprof_file(path);
    ASSERT_TRUE(profile) << profile.error().message;
    for (const auto& [line, count] : otlp_compare::from_pprof(*profile)) {
      EXPECT_NE(line.find("service.name=" + service), std::string::npos) << line;
      together[line] += count;
    }
    // Only what its samples reach: the other process's functions are not in it.
    for (const std::string& name : profile->string_table()) {
      EXPECT_NE(name, service == "app" ? "<module>" : "leaf");
    }
  }
  EXPECT_EQ(together, all);
}

TEST(PyroscopeName, ServiceAndLabelsAsPyroscopeReadsThem) {
  EXPECT_EQ(pyroscope_application_name("checkout", {{"host_name", "box-1"}, {"deployment.environment", "prod"}}),
            "checkout{host_name=box-1,deployment_environment=prod}");
  EXPECT_EQ(pyroscope_application_name("a{b}", {{"k", "v,=}"}}), "ab{k=v}");
}

}  // namespace
}  // namespace omniprof
