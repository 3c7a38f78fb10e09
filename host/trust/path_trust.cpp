#include "trust/path_trust.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

namespace omniprof {

namespace fs = std::filesystem;

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
  // Group root (gid 0) writing is root writing: a tree checked out or built
  // with umask 002 by root is group-writable by gid 0 and stays trusted.
  if ((st.st_mode & S_IWGRP) && st.st_gid != 0 && !sticky_root_dir) {
    return fmt::format("{} is group-writable by gid {} ({})", what, st.st_gid, mode_text(st.st_mode));
  }
  return "";
}

}  // namespace

namespace {

std::string parent_of(const std::string& canonical) {
  size_t slash = canonical.find_last_of('/');
  return slash == 0 ? "/" : canonical.substr(0, slash);
}

std::optional<std::string> canonical_path(const std::string& path, std::string& error) {
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr), &std::free);
  if (!resolved) {
    error = fmt::format("{}: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  return std::string(resolved.get());
}

// Checks `canonical` (a file unless `is_directory`) and every directory up
// to `/`; the component at fault and why, or nothing.
std::optional<std::pair<std::string, std::string>> first_fault(std::string canonical, bool is_directory,
                                                               const PathTrustPolicy& policy) {
  std::string current = std::move(canonical);
  while (true) {
    struct stat st{};
    if (::lstat(current.c_str(), &st) != 0) return std::make_pair(current, std::string(std::strerror(errno)));
    if (std::string why = fault(st, is_directory, policy); !why.empty()) return std::make_pair(current, why);
    if (current == "/") return std::nullopt;
    is_directory = true;
    current = parent_of(current);
  }
}

}  // namespace

Result<std::string> check_trusted_path(const std::string& path, const PathTrustPolicy& policy) {
  std::string error;
  auto canonical = canonical_path(path, error);
  if (!canonical) return make_error(error);
  struct stat link{};
  bool through_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  if (auto at_fault = first_fault(*canonical, false, policy)) {
    // The caller names `path`; name the component at fault when it is
    // another one (a directory, or the target of a symlink).
    const auto& [component, why] = *at_fault;
    if (component != *canonical) return make_error(fmt::format("{}: {}", component, why));
    return make_error(through_link ? fmt::format("its target {}: {}", component, why) : why);
  }
  // A symlink is also only as safe as the directories it sits in: someone
  // who can write those can point it at another file.
  if (through_link) {
    auto link_directory = canonical_path(fs::path(path).parent_path().string(), error);
    if (!link_directory) return make_error(error);
    if (auto at_fault = first_fault(*link_directory, true, policy)) {
      return make_error(fmt::format("{}: {}", at_fault->first, at_fault->second));
    }
  }
  return *canonical;
}

Result<std::string> check_trusted_path(const std::string& path) {
  return check_trusted_path(path, PathTrustPolicy::for_this_process());
}

}  // namespace omniprof
