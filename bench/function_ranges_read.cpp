// Function ranges benchmark: what the native plugin's function_bounds costs
// on the first unnamed frame of a file (FunctionRanges::read: open the file,
// read .eh_frame and .debug_frame, walk every FDE, sort) and what it keeps
// (16 bytes per range), beside the unwind table build of the same file in
// the same run (UnwindTableBuilder::build, which every mapped file already
// pays at load_executable): reading the ranges must cost a fraction of it.
// Then the lookup: one binary search per question (the host asks once per
// unnamed function).
//
// Figures per file: median wall time of N=11 reads and of N=11 builds, each
// from scratch (the file is in the page cache after the first); ranges and
// their bytes; ns per find over 1M addresses spread over the file's code.
//
//   build/bench/function_ranges_read [FILE...]
//   (default: Debian's stripped python3.11, libc, libLLVM-14)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "omniprof/support/cfi/function_ranges.h"
#include "unwind/unwind_table.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files(argv + 1, argv + argc);
  if (files.empty()) {
    files = {"/usr/bin/python3.11", "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"};
  }
  constexpr int kRuns = 11;
  std::printf("%-45s %10s %10s %8s %9s %10s %8s\n", "file", "ranges ms", "table ms", "ratio", "ranges", "KiB",
              "ns/find");
  int status = 0;
  for (const std::string& file : files) {
    std::vector<double> read_ms, build_ms;
    omniprof::Result<omniprof::unwind::FunctionRanges> ranges = omniprof::make_error("not read");
    for (int i = 0; i < kRuns; ++i) {
      auto start = Clock::now();
      ranges = omniprof::unwind::FunctionRanges::read(file);
      read_ms.push_back(ms_since(start));
      start = Clock::now();
      auto table = omniprof::unwind::UnwindTableBuilder::build(file);
      build_ms.push_back(ms_since(start));
      if (!ranges || !table) break;
    }
    if (!ranges) {
      std::printf("%-45s %s\n", file.c_str(), ranges.error().message.c_str());
      status = 1;
      continue;
    }
    // 1M addresses spread evenly over the code the ranges cover (found by
    // probing every 4 KiB of the low 4 GiB, where ELF files link).
    double ns_per_find = 0;
    uint64_t low = UINT64_MAX, high = 0;
    for (uint64_t probe = 0; probe < (uint64_t{1} << 32); probe += 4096) {
      if (auto found = ranges->find(probe)) {
        low = std::min(low, found->start);
        high = std::max(high, found->end);
      }
    }
    if (low < high) {
      constexpr uint64_t kFinds = 1000000;
      const uint64_t step = std::max<uint64_t>(1, (high - low) / kFinds);
      uint64_t hits = 0;
      auto start = Clock::now();
      for (uint64_t i = 0; i < kFinds; ++i) hits += ranges->find(low + i * step) ? 1 : 0;
      ns_per_find = ms_since(start) * 1e6 / kFinds;
      if (hits == 0) std::printf("%s: no address found a range\n", file.c_str());
    }
    const double read = median(read_ms), build = median(build_ms);
    std::printf("%-45s %10.2f %10.2f %7.2fx %9zu %10.1f %8.1f\n", file.c_str(), read, build, read / build,
                ranges->size(), ranges->bytes() / 1024.0, ns_per_find);
  }
  return status;
}
