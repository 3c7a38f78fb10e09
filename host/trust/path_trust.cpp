#include "trust/path_trust.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace omniprof {

PathTrustPolicy PathTrustPolicy::for_this_process() {
  PathTrustPolicy policy;
  policy.trusted_owners.push_back(0);
  if (geteuid() != 0) policy.trusted_owners.push_back(geteuid());
  return policy;
}

namespace {

bool trusted_owner(uid_t uid, const PathTrustPolicy& policy) {
  return std::find(policy.trusted_owners.begin(), policy.trusted_owners.end(), uid) !=
         policy.trusted_owners.end();
}

std::string mode_text(mode_t mode) { return fmt::format("mode {:04o}", mode & 07777); }

// Why `st` (of a directory if `is_directory`) is untrusted, or empty. The
// walk goes from the file up, so when a directory is checked, everything
// below it on the path already has a trusted owner: that is what makes a
// root-owned sticky world-writable directory (/tmp) safe to pass through.
std::string fault(const struct stat& st, bool is_directory, const PathTrustPolicy& policy) {
  const char* what = is_directory ? "directory" : "file";
  if (!trusted_owner(st.st_uid, policy)) {
    return fmt::format("{} is owned by uid {}, not by root", what, st.st_uid);
  }
  bool sticky_root_dir = is_directory && (st.st_mode & S_ISVTX) && st.st_uid == 0;
  if ((st.st_mode & S_IWOTH) && !sticky_root_dir) {
    return fmt::format("{} is world-writable ({})", what, mode_text(st.st_mode));
  }
  if ((st.st_mode & S_IWGRP) && !sticky_root_dir) {
    return fmt::format("{} is group-writable ({})", what, mode_text(st.st_mode));
  }
  return "";
}

}  // namespace

Result<void> check_trusted_path(const std::string& path, const PathTrustPolicy& policy) {
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr), &std::free);
  if (!resolved) return make_error(fmt::format("{}: {}", path, std::strerror(errno)));
  std::string canonical = resolved.get();
  bool is_directory = false;
  std::string current = canonical;
  while (true) {
    struct stat st{};
    if (::lstat(current.c_str(), &st) != 0) {
      return make_error(fmt::format("{}: {}", current, std::strerror(errno)));
    }
    if (std::string why = fault(st, is_directory, policy); !why.empty()) {
      // The caller names `path`; name the component at fault when it is
      // another one (a directory, or the target of a symlink).
      if (current != canonical) return make_error(fmt::format("{}: {}", current, why));
      struct stat link{};
      bool through_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
      return make_error(through_link ? fmt::format("its target {}: {}", current, why) : why);
    }
    if (current == "/") break;
    is_directory = true;
    size_t slash = current.find_last_of('/');
    current = slash == 0 ? "/" : current.substr(0, slash);
  }
  return ok();
}

Result<void> check_trusted_path(const std::string& path) {
  return check_trusted_path(path, PathTrustPolicy::for_this_process());
}

}  // namespace omniprof
