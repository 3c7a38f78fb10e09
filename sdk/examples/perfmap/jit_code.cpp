#include "jit_code.h"

#include <algorithm>
#include <charconv>

namespace omniprof::perfmap {

namespace {

bool parse_hex_field(std::string_view text, uint64_t& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

bool ProcMapsEntry::anonymous() const { return path.empty() || path.rfind("[anon:", 0) == 0; }

Result<std::vector<ProcMapsEntry>> parse_proc_maps(std::string_view text) {
  std::vector<ProcMapsEntry> out;
  size_t line_number = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (line.empty()) continue;
    auto bad = [&](const char* why) {
      return make_error("maps line " + std::to_string(line_number) + ": " + why + ": '" + std::string(line) + "'");
    };
    // START-END PERMS OFFSET DEV INODE [PATH]
    size_t dash = line.find('-');
    size_t space = line.find(' ');
    if (dash == std::string_view::npos || space == std::string_view::npos || dash > space) return bad("no range");
    ProcMapsEntry entry;
    if (!parse_hex_field(line.substr(0, dash), entry.start) ||
        !parse_hex_field(line.substr(dash + 1, space - dash - 1), entry.end) || entry.end < entry.start) {
      return bad("bad range");
    }
    std::string_view rest = line.substr(space + 1);
    if (rest.size() < 4) return bad("no permissions");
    entry.executable = rest[2] == 'x';
    // Skip permissions, offset, device, inode; the path is what follows.
    for (int field = 0; field < 4; ++field) {
      size_t next = rest.find(' ');
      if (next == std::string_view::npos) {
        if (field < 3) return bad("too few fields");
        rest = {};
        break;
      }
      rest.remove_prefix(next + 1);
    }
    size_t path_begin = rest.find_first_not_of(' ');
    if (path_begin != std::string_view::npos) entry.path = std::string(rest.substr(path_begin));
    out.push_back(std::move(entry));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  return out;
}

std::vector<CodeRange> jit_code_ranges(const std::vector<ProcMapsEntry>& maps, size_t max_ranges,
                                       size_t* left_out) {
  if (left_out) *left_out = 0;
  std::vector<CodeRange> ranges;
  std::vector<CodeRange> file_code;  // file-backed (and [vdso]) executable mappings: never covered
  for (size_t i = 0; i < maps.size();) {
    if (!maps[i].anonymous()) {
      if (maps[i].executable) file_code.push_back({maps[i].start, maps[i].end});
      ++i;
      continue;
    }
    // A run of adjacent anonymous mappings.
    CodeRange run{maps[i].start, maps[i].end};
    bool executable = maps[i].executable;
    size_t j = i + 1;
    for (; j < maps.size() && maps[j].anonymous() && maps[j].start == run.end; ++j) {
      run.end = maps[j].end;
      executable = executable || maps[j].executable;
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
