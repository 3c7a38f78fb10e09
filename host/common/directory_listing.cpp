#include "common/directory_listing.h"

#include <fmt/format.h>

namespace omniprof {

namespace fs = std::filesystem;

Result<std::vector<fs::path>> list_directory(const std::string& directory) {
  std::vector<fs::path> entries;
  std::error_code ec;
  fs::directory_iterator it(directory, ec);
  if (ec) return make_error(fmt::format("cannot open directory {}: {}", directory, ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    entries.push_back(it->path());
  }
  // increment() leaves the iterator at its end when it fails.
  if (ec) return make_error(fmt::format("cannot read directory {}: {}", directory, ec.message()));
  return entries;
}

}  // namespace omniprof
