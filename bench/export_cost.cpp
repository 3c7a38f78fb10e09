// What exporting a round costs, beside writing its pprof file in the same
// run: CPU milliseconds per round on the agent's side and bytes on the wire,
// for a 50-process machine at 19 Hz with 10 s rounds, on 2 CPUs (this
// machine) and 32 CPUs (a fleet host), every CPU busy.
//
//   pprof file   ProfileBuilder::encode_gzip + write_file_atomically (today's round)
//   gzip alone   the compression of the round's encoding, at the level used
//                (1) and at zlib's default (6), the level used before
//   OTLP encode  otlp_request + serialize + gzip (Exporter::submit's work)
//   OTLP grpc    submit and delivery to a receiver on 127.0.0.1 (process CPU:
//   OTLP http    the receiver's decoding is counted too, so an upper bound)
//   Pyroscope    one pprof per service.name, gzip'd (encode only)
//
// The round is synthetic but shaped like a real one: each process maps its
// executable, libc, libstdc++ and one of three interpreters' libraries, with
// C++-length names, stacks 12-40 deep, 1-8 threads, and the resource labels
// the host gives every process.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../tests/unit/otlp_receiver.h"
#include "common/gzip.h"
#include "export/destinations.h"
#include "export/exporter.h"
#include "export/otlp_profile.h"
#include "profile/profile_builder.h"

namespace omniprof {
namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

ProfileBuilder synthetic_round(int cpus, uint32_t seed) {
  constexpr int kProcesses = 50;
  constexpr int64_t kPeriod = 1000000000 / 19;
  const int samples = 19 * 10 * cpus;
  std::mt19937 random(seed);
  const int64_t start_ns = 1764633600000000000, duration_ns = 10000000000;
  ProfileBuilder builder(kPeriod, start_ns);
  builder.set_duration_ns(duration_ns);
  auto name = [](const char* space, int i) {
    return fmt::format("{}::detail::basic_handler<std::__cxx11::basic_string<char>>::operation_{}", space, i);
  };
  // A library's locations are made when a sample first reaches them, as a
  // real round holds only the addresses its samples hit.
  struct Library {
    uint64_t mapping;
    uint64_t base;
    std::string file;
    const char* space;
    int functions;
  };
  auto library = [&](uint64_t base, const std::string& file, const std::string& build_id, const char* space,
                     int functions) {
    return Library{builder.add_mapping({base, base + 0x1000000, 0, file, build_id, true}), base, file, space, functions};
  };
  auto location = [&](const Library& lib) {
    const int i = static_cast<int>(random() % static_cast<uint32_t>(lib.functions));
    return builder.add_location(lib.mapping, lib.base + 0x1000 + 16 * i,
                                {{name(lib.space, i), "", "/usr/src" + lib.file + ".cc", 10 + i}});
  };
  std::vector<Library> shared = {
      library(0x7f0000000000, "/usr/lib/x86_64-linux-gnu/libc.so.6", "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", "glibc", 800),
      library(0x7f1000000000, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "b1b2c3d4e5f60718293a4b5c6d7e8f9012345678", "std",
              1200),
      library(0x7f2000000000, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", "c1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
              "cpython", 600),
  };
  std::vector<Library> executables;
  std::vector<std::shared_ptr<const std::vector<std::pair<std::string, std::string>>>> resources;
  for (int p = 0; p < kProcesses; ++p) {
    executables.push_back(library(0x400000 + 0x10000000ull * p, fmt::format("/srv/service-{}/bin/server", p % 20),
                                  fmt::format("{:040x}", p + 1), "app", 300));
    resources.push_back(std::make_shared<const std::vector<std::pair<std::string, std::string>>>(
        std::vector<std::pair<std::string, std::string>>{
            {"service.name", fmt::format("service-{}", p % 20)},
            {"process.executable.name", "server"},
            {"process.executable.path", fmt::format("/srv/service-{}/bin/server", p % 20)},
            {"container.id", fmt::format("{:064x}", 0xc0ffee00 + p)},
            {"container.runtime", "containerd"},
            {"host.name", "fleet-host-17"},
            {"host.id", "4c4c4544003957108052b4c04f384833"}}));
  }
  for (int s = 0; s < samples; ++s) {
    const int p = static_cast<int>(random() % kProcesses);
    const int depth = 12 + static_cast<int>(random() % 29);
    std::vector<uint64_t> stack;
    for (int d = 0; d < depth; ++d) {
      const Library& lib = d < depth / 2 ? shared[random() % shared.size()] : executables[p];
      stack.push_back(location(lib));
    }
    const int tid = 1000 * (p + 1) + static_cast<int>(random() % 8);
    // Each sample's time, as OTLP export records them (profile_builder.h).
    const std::vector<uint64_t> time{static_cast<uint64_t>(start_ns + s * (duration_ns / samples))};
    builder.add_sample(stack, 1, SampleLabels{1000 * (p + 1), tid, "server", fmt::format("worker-{}", tid % 8), "", "",
                                              resources[p]}, &time);
  }
  return builder;
}

struct Figures {
  double cpu_ms = 0;
  double wall_ms = 0;
  size_t bytes = 0;
};

template <typename Run>
Figures median_of(int runs, Run run) {
  std::vector<Figures> all;
  for (int i = 0; i < runs; ++i) all.push_back(run());
  auto median = [&](auto field) {
    std::vector<double> values;
    for (const Figures& f : all) values.push_back(field(f));
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  return Figures{median([](const Figures& f) { return f.cpu_ms; }), median([](const Figures& f) { return f.wall_ms; }),
                 static_cast<size_t>(median([](const Figures& f) { return static_cast<double>(f.bytes); }))};
}

Figures deliver(testing_support::Receiver& receiver, const std::string& endpoint, const std::string& protocol,
                const ProfileBuilder& round) {
  OtlpSettings otlp;
  otlp.endpoint = endpoint;
  otlp.protocol = protocol;
  auto destination = make_otlp_destination(otlp);
  if (!destination) {
    std::fprintf(stderr, "%s\n", destination.error().message.c_str());
    std::exit(1);
  }
  Exporter exporter(std::move(*destination), ExporterSettings{});
  // One round first: connection set-up is not a round's cost.
  exporter.submit(round);
  while (exporter.stats().rounds_sent < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  (void)receiver;
  return median_of(9, [&] {
    const uint64_t before = exporter.stats().rounds_sent;
    const uint64_t bytes_before = exporter.stats().bytes_sent;
    const double cpu = process_cpu_ms();
    const auto began = Clock::now();
    exporter.submit(round);
    while (exporter.stats().rounds_sent == before) std::this_thread::sleep_for(std::chrono::microseconds(200));
    return Figures{process_cpu_ms() - cpu, std::chrono::duration<double, std::milli>(Clock::now() - began).count(),
                   static_cast<size_t>(exporter.stats().bytes_sent - bytes_before)};
  });
}

void print(const char* what, const Figures& f, const Figures& baseline) {
  std::printf("  %-34s %9.2f CPU ms %9.2f ms wall %10zu bytes   (x%.2f CPU, x%.2f bytes of the pprof file)\n", what,
              f.cpu_ms, f.wall_ms, f.bytes, baseline.cpu_ms > 0 ? f.cpu_ms / baseline.cpu_ms : 0.0,
              baseline.bytes ? static_cast<double>(f.bytes) / static_cast<double>(baseline.bytes) : 0.0);
}

}  // namespace
}  // namespace omniprof

int main() {
  using namespace omniprof;
  const std::string dir = std::filesystem::temp_directory_path() / ("omniprof-export-cost-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  testing_support::Receiver receiver;
  std::printf("export cost per round: 50 processes, 19 Hz, 10 s rounds, every CPU busy (median of 9-15 runs)\n");
  for (int cpus : {2, 32}) {
    ProfileBuilder round = synthetic_round(cpus, 17);
    std::printf("\n%d CPUs: %lld samples, %zu distinct stacks, %zu locations, %zu functions\n", cpus,
                static_cast<long long>(round.total_samples()), round.num_samples(), round.num_locations(),
                round.num_functions());
    const Figures file = median_of(15, [&] {
      const double cpu = thread_cpu_ms();
      const auto began = Clock::now();
      auto gzipped = round.encode_gzip();
      (void)write_file_atomically(dir + "/round.pb.gz", *gzipped);
      return Figures{thread_cpu_ms() - cpu, std::chrono::duration<double, std::milli>(Clock::now() - began).count(),
                     gzipped->size()};
    });
    print("baseline: pprof file (gzip, write)", file, file);
    // The compression alone: at the level files and payloads are written
    // with, and at zlib's default, what they were written with before.
    const std::string encoded = round.build().SerializeAsString();
    for (int level : {kGzipLevelDefault, kGzipLevel}) {
      const Figures gzip = median_of(15, [&] {
        const double cpu = thread_cpu_ms();
        const auto began = Clock::now();
        auto gzipped = gzip_compress(encoded, level);
        return Figures{thread_cpu_ms() - cpu, std::chrono::duration<double, std::milli>(Clock::now() - began).count(),
                       gzipped->size()};
      });
      print(level == kGzipLevel ? "gzip alone, level 1 (what is written)" : "gzip alone, level 6 (zlib's default)",
            gzip, file);
    }
    OtlpSettings otlp;
    otlp.endpoint = receiver.http_endpoint();
    otlp.protocol = "http/protobuf";
    auto otlp_destination = make_otlp_destination(otlp);
    const Figures encode = median_of(15, [&] {
      const double cpu = thread_cpu_ms();
      const auto began = Clock::now();
      auto payloads = (*otlp_destination)->encode(round);
      return Figures{thread_cpu_ms() - cpu, std::chrono::duration<double, std::milli>(Clock::now() - began).count(),
                     payloads->front().body.size()};
    });
    print("OTLP encode (request, gzip)", encode, file);
    print("OTLP grpc: submit + delivered", deliver(receiver, receiver.grpc_endpoint(), "grpc", round), file);
    print("OTLP http/protobuf: submit + delivered", deliver(receiver, receiver.http_endpoint(), "http/protobuf", round),
          file);
    PyroscopeSettings pyroscope;
    pyroscope.url = receiver.http_endpoint();
    auto pyroscope_destination = make_pyroscope_destination(pyroscope, {{"host_name", "fleet-host-17"}});
    const Figures per_service = median_of(15, [&] {
      const double cpu = thread_cpu_ms();
      const auto began = Clock::now();
      auto payloads = (*pyroscope_destination)->encode(round);
      size_t bytes = 0;
      for (const auto& p : *payloads) bytes += p.body.size();
      return Figures{thread_cpu_ms() - cpu, std::chrono::duration<double, std::milli>(Clock::now() - began).count(),
                     bytes};
    });
    print("Pyroscope encode (20 services)", per_service, file);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
