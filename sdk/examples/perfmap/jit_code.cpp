#include "jit_code.h"

#include <algorithm>
#include <charconv>

namespace omniprof::perfmap {

bool anonymous(const ProcMapping& mapping) {
  return mapping.path.empty() || mapping.path.rfind("[anon:", 0) == 0;
}

std::vector<CodeRange> jit_code_ranges(const std::vector<ProcMapping>& maps, size_t max_ranges,
                                       size_t* left_out) {
  if (left_out) *left_out = 0;
  std::vector<CodeRange> ranges;
  std::vector<CodeRange> file_code;  // file-backed (and [vdso]) executable mappings: never covered
  for (size_t i = 0; i < maps.size();) {
    if (!anonymous(maps[i])) {
      if (maps[i].executable()) file_code.push_back({maps[i].start, maps[i].end});
      ++i;
      continue;
    }
    // A run of adjacent anonymous mappings.
    CodeRange run{maps[i].start, maps[i].end};
    bool executable = maps[i].executable();
    size_t j = i + 1;
    for (; j < maps.size() && anonymous(maps[j]) && maps[j].start == run.end; ++j) {
      run.end = maps[j].end;
      executable = executable || maps[j].executable();
    }
    if (executable) ranges.push_back(run);
    i = j;
  }
  auto covers_file_code = [&](uint64_t from, uint64_t to) {
    return std::any_of(file_code.begin(), file_code.end(),
                       [&](const CodeRange& f) { return f.start < to && f.end > from; });
  };
  while (ranges.size() > max_ranges) {
    // The closest neighbours with no file code between them.
    size_t best = ranges.size();
    uint64_t best_gap = UINT64_MAX;
    for (size_t k = 0; k + 1 < ranges.size(); ++k) {
      uint64_t gap = ranges[k + 1].start - ranges[k].end;
      if (gap < best_gap && !covers_file_code(ranges[k].end, ranges[k + 1].start)) {
        best = k;
        best_gap = gap;
      }
    }
    if (best < ranges.size()) {
      ranges[best].end = ranges[best + 1].end;
      ranges.erase(ranges.begin() + static_cast<std::ptrdiff_t>(best) + 1);
      continue;
    }
    auto smallest = std::min_element(ranges.begin(), ranges.end(), [](const CodeRange& a, const CodeRange& b) {
      return a.end - a.start < b.end - b.start;
    });
    ranges.erase(smallest);
    if (left_out) ++*left_out;
  }
  return ranges;
}

int32_t namespace_pid(std::string_view status_text, int32_t pid) {
  size_t at = status_text.find("\nNSpid:");
  if (at == std::string_view::npos) return pid;
  std::string_view line = status_text.substr(at + 7);
  line = line.substr(0, line.find('\n'));
  size_t end = line.find_last_not_of(" \t");
  if (end == std::string_view::npos) return pid;
  line = line.substr(0, end + 1);
  size_t begin = line.find_last_of(" \t");
  std::string_view last = begin == std::string_view::npos ? line : line.substr(begin + 1);
  int32_t value = 0;
  auto [ptr, ec] = std::from_chars(last.data(), last.data() + last.size(), value);
  if (ec != std::errc() || ptr != last.data() + last.size() || value <= 0) return pid;
  return value;
}

std::vector<std::string> perf_map_candidates(int32_t pid, int32_t ns_pid) {
  return {"/proc/" + std::to_string(pid) + "/root/tmp/perf-" + std::to_string(ns_pid) + ".map",
          "/tmp/perf-" + std::to_string(pid) + ".map"};
}

}  // namespace omniprof::perfmap
