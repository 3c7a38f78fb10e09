#include "process/mapped_file.h"

#include <sys/sysmacros.h>

#include <fmt/format.h>

namespace omniprof {

std::string map_files_path(int32_t pid, const ProcMapping& mapping) {
  return fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, mapping.start, mapping.end);
}

std::vector<std::string> mapped_file_candidates(int32_t pid, const ProcMapping& mapping) {
  if (!mapping.is_file_backed()) return {};
  std::vector<std::string> candidates{map_files_path(pid, mapping)};
  if (!mapping.deleted) {
    candidates.push_back(fmt::format("/proc/{}/root{}", pid, mapping.path));
    // The process may be gone (described from the kernel's records after it
    // exited): the path in the host's own mount namespace, which the device
    // and inode check accepts only if it is the very file.
    candidates.push_back(mapping.path);
  }
  return candidates;
}

bool is_mapped_file(const struct stat& st, const ProcMapping& mapping, bool through_map_files) {
  if (static_cast<uint64_t>(st.st_ino) != mapping.inode) return false;
  return through_map_files ||
         (major(st.st_dev) == mapping.dev_major && minor(st.st_dev) == mapping.dev_minor);
}

Result<OpenedMapping> open_mapped_file(int32_t pid, const ProcMapping& mapping) {
  const std::vector<std::string> candidates = mapped_file_candidates(pid, mapping);
  if (candidates.empty()) return make_error(fmt::format("pid {}: {}: not a file", pid, mapping.path));
  std::string reasons;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& candidate = candidates[i];
    auto file = open_regular_file(candidate);
    std::string reason;
    if (!file) {
      reason = file.error().message;
    } else if (!is_mapped_file(file->st, mapping, i == 0)) {
      reason = fmt::format("{}: is device {:02x}:{:02x} inode {}, not the mapped {:02x}:{:02x} inode {} (replaced?)",
                           candidate, major(file->st.st_dev), minor(file->st.st_dev), file->st.st_ino,
                           mapping.dev_major, mapping.dev_minor, mapping.inode);
    } else {
      return OpenedMapping{std::move(*file), candidate};
    }
    reasons += reasons.empty() ? reason : "; " + reason;
  }
  return make_error(fmt::format("pid {}: {}{} at {:#x}: {}", pid, mapping.path, mapping.deleted ? " (deleted)" : "",
                                mapping.start, reasons));
}

}  // namespace omniprof
