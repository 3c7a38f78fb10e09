// Whether a file the agent loads (a plugin .so, a config file, a drop-in) is
// trusted: the agent runs as root and runs what it loads, so a file that
// someone other than root could have written, or replaced through a
// directory they can write, must not be loaded.
//
// The rule, checked on the canonical path (symlinks resolved; the caller
// opens that path, so a link cannot point the check at one file and the
// load at another) for the file and each directory up to `/`, and, when the
// path is a symlink, for the directories the link itself sits in:
//   - its owner is a trusted user (root, and the agent's own effective uid:
//     an unprivileged user running omniprof trusts their own files anyway);
//   - it is not group-writable and not world-writable;
//   - except: a directory with the sticky bit that root owns (/tmp, mode
//     1777) is accepted, since the file or directory below it on the path
//     has a trusted owner (checked first) and the sticky bit stops anyone
//     but that owner and root from removing or renaming it: nobody else can
//     swap it. A world-writable directory without the sticky bit is refused.
// Since no directory on the path can be written by an untrusted user, the
// file cannot change between this check and the load.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "omniprof/support/result.h"

namespace omniprof {

struct PathTrustPolicy {
  // Owners accepted for the file and its directories.
  std::vector<uid_t> trusted_owners;
  // Root and the effective uid of this process.
  static PathTrustPolicy for_this_process();
};

// The canonical path, which is what the caller must open (a symlink on the
// way may sit in a directory nobody checked, so opening `path` again could
// reach another file). Or why not, for the caller to put after `path`: "file is
// group-writable by gid 50 (mode 0664)" when the file itself is at fault, else naming
// the component that is: "/opt/p: directory is world-writable (mode 0777)",
// "its target /opt/p/x.so: file is owned by uid 1000, not by root".
Result<std::string> check_trusted_path(const std::string& path, const PathTrustPolicy& policy);
Result<std::string> check_trusted_path(const std::string& path);

}  // namespace omniprof
