#include "omniprof/support/proc_maps.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "omniprof/support/regular_file.h"
#include "omniprof/support/text_fields.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {
namespace {

constexpr std::string_view kDeletedSuffix = " (deleted)";

// Fields are space-separated: the kernel pads with spaces only.
constexpr std::string_view kFieldSeparators = " ";

template <typename Integer>
bool parse_number(std::string_view text, int base, Integer* value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value, base);
  return ec == std::errc() && end == text.data() + text.size();
}

bool valid_perms(std::string_view perms) {
  return perms.size() == 4 && (perms[0] == 'r' || perms[0] == '-') && (perms[1] == 'w' || perms[1] == '-') &&
         (perms[2] == 'x' || perms[2] == '-') && (perms[3] == 'p' || perms[3] == 's');
}

// One line: "start-end perms offset major:minor inode   [path]".
bool parse_line(std::string_view line, ProcMapping* mapping) {
  std::string_view rest = line;
  const std::string_view range = next_field(rest, kFieldSeparators);
  const std::string_view perms = next_field(rest, kFieldSeparators);
  const std::string_view offset = next_field(rest, kFieldSeparators);
  const std::string_view device = next_field(rest, kFieldSeparators);
  const std::string_view inode = next_field(rest, kFieldSeparators);

  const size_t dash = range.find('-');
  const size_t colon = device.find(':');
  if (dash == std::string_view::npos || colon == std::string_view::npos) return false;
  if (!parse_number(range.substr(0, dash), 16, &mapping->start) ||
      !parse_number(range.substr(dash + 1), 16, &mapping->end) || mapping->end < mapping->start ||
      !valid_perms(perms) || !parse_number(offset, 16, &mapping->offset) ||
      !parse_number(device.substr(0, colon), 16, &mapping->dev_major) ||
      !parse_number(device.substr(colon + 1), 16, &mapping->dev_minor) || !parse_number(inode, 10, &mapping->inode)) {
    return false;
  }
  mapping->perms = std::string(perms);

  // The path is everything after the padding; it may itself contain spaces.
  const size_t path_begin = rest.find_first_not_of(' ');
  std::string_view path = path_begin == std::string_view::npos ? std::string_view() : rest.substr(path_begin);
  if (path.size() > kDeletedSuffix.size() && path.ends_with(kDeletedSuffix)) {
    path.remove_suffix(kDeletedSuffix.size());
    mapping->deleted = true;
  }
  mapping->path = std::string(path);
  return true;
}

}  // namespace

Result<std::vector<ProcMapping>> parse_proc_maps(std::string_view text) {
  std::vector<ProcMapping> mappings;
  size_t line_number = 0;
  while (!text.empty()) {
    const std::string_view line = next_line(text);
    ++line_number;
    if (line.find_first_not_of(' ') == std::string_view::npos) continue;

    ProcMapping mapping;
    if (!parse_line(line, &mapping)) {
      return make_error(fmt::format("line {}: malformed maps entry: \"{}\"", line_number, line));
    }
    mappings.push_back(std::move(mapping));
  }
  return mappings;
}

Result<std::vector<ProcMapping>> read_proc_maps(int pid) {
  const std::string path = fmt::format("/proc/{}/maps", pid);
  auto exited_or = [&](int error) {
    if (error == ENOENT || error == ESRCH) return make_error(fmt::format("{}: process {} has exited", path, pid));
    return make_error(fmt::format("{}: {}", path, std::strerror(error)));
  };

  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return exited_or(errno);
  std::string text;
  if (int error = read_to_end(fd.get(), text); error != 0) return exited_or(error);
  auto mappings = parse_proc_maps(text);
  if (!mappings) return make_error(fmt::format("{}: {}", path, mappings.error().message));
  return mappings;
}

const ProcMapping* find_mapping(const std::vector<ProcMapping>& mappings, uint64_t address) {
  auto after = std::upper_bound(mappings.begin(), mappings.end(), address,
                                [](uint64_t addr, const ProcMapping& mapping) { return addr < mapping.start; });
  if (after == mappings.begin()) return nullptr;
  const ProcMapping& candidate = *(after - 1);
  return candidate.contains(address) ? &candidate : nullptr;
}

}  // namespace omniprof
