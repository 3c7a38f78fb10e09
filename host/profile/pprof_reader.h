// Reads a pprof profile back from disk: omniprof re-reads its own output
// (e.g. to print a summary of a saved profile), and tests check what was
// written through the same path a pprof consumer takes.
#pragma once

#include <string>

#include "omniprof/support/result.h"
#include "profile/profile.pb.h"

namespace omniprof {

// Reads a pprof file, gzip'd (.pb.gz, detected by the gzip magic) or plain
// protobuf, and checks it the way `go tool pprof` does (string_table[0] is "",
// string indexes in range, ids non-zero, unique and resolvable, one value per
// sample type). Errors name the path and what failed: the file could not be
// read, the gzip data is corrupt or truncated, the bytes are not a protobuf
// Profile, or the Profile is inconsistent.
Result<perftools::profiles::Profile> read_pprof_file(const std::string& path);

}  // namespace omniprof
