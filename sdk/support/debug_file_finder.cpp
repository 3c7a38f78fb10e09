#include "omniprof/support/debug_file_finder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "omniprof/support/regular_file.h"

namespace omniprof {
namespace {

bool is_regular_file(const std::string& path, struct stat* st) {
  return ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode);
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool is_hex(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

Result<uint32_t> file_crc32(const std::string& path) {
  auto file = open_regular_file(path);
  if (!file) return file.error();
  const UniqueFd& fd = file->fd;
  std::vector<unsigned char> buffer(1 << 16);
  uLong crc = crc32(0L, Z_NULL, 0);
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    }
    if (n == 0) break;
    crc = crc32(crc, buffer.data(), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

DebugFileFinder::DebugFileFinder(std::string debug_root) : debug_root_(std::move(debug_root)) {
  while (debug_root_.size() > 1 && debug_root_.back() == '/') debug_root_.pop_back();
}

std::optional<std::string> DebugFileFinder::find(const ElfFile& elf, const std::string& elf_path,
                                                 const std::string& root_prefix) const {
  return find(elf_path, elf.build_id(), elf.debuglink(), root_prefix);
}

std::optional<std::string> DebugFileFinder::find(const std::string& elf_path, const std::string& build_id,
                                                 const std::optional<DebugLink>& debuglink,
                                                 const std::string& root_prefix) const {
  if (auto found = find_by_build_id(build_id, root_prefix)) return found;
  if (debuglink) return find_by_debuglink(elf_path, *debuglink, root_prefix);
  return std::nullopt;
}

std::optional<std::string> DebugFileFinder::find_by_build_id(const std::string& build_id,
                                                             const std::string& root_prefix) const {
  // Build IDs are at least a few bytes; anything else is not worth a lookup
  // (and must not turn into a path with '/' or "..").
  if (build_id.size() < 4 || !is_hex(build_id)) return std::nullopt;
  const std::string relative = fmt::format("/.build-id/{}/{}.debug", build_id.substr(0, 2), build_id.substr(2));

  std::vector<std::string> candidates{root_prefix + debug_root_ + relative};
  if (!root_prefix.empty()) candidates.push_back(debug_root_ + relative);
  for (const std::string& candidate : candidates) {
    struct stat st {};
    if (!is_regular_file(candidate, &st)) continue;
    // The .build-id tree is made of symlinks that package managers may leave
    // dangling or pointing at another version: check what we found.
    auto candidate_id = read_build_id(candidate);
    if (candidate_id && *candidate_id == build_id) return candidate;
  }
  return std::nullopt;
}

std::optional<std::string> DebugFileFinder::find_by_debuglink(const std::string& elf_path,
                                                              const DebugLink& debuglink,
                                                              const std::string& root_prefix) const {
  const std::string dir = directory_of(elf_path);
  std::vector<std::string> candidates{
      root_prefix + join(dir, debuglink.name),
      root_prefix + join(join(dir, ".debug"), debuglink.name),
      root_prefix + join(debug_root_ + dir, debuglink.name),
  };
  // The CRC check makes the host's debug tree safe to try as well.
  if (!root_prefix.empty()) candidates.push_back(join(debug_root_ + dir, debuglink.name));

  struct stat elf_stat {};
  const bool have_elf_stat = ::stat((root_prefix + elf_path).c_str(), &elf_stat) == 0;
  for (const std::string& candidate : candidates) {
    struct stat st {};
    if (!is_regular_file(candidate, &st)) continue;
    // A link naming the file itself (e.g. foo with debuglink "foo") is never
    // its own debug file.
    if (have_elf_stat && same_file(st, elf_stat)) continue;
    auto crc = file_crc32(candidate);
    if (crc && *crc == debuglink.crc) return candidate;
  }
  return std::nullopt;
}

}  // namespace omniprof
