// Listing a directory without throwing: std::filesystem's range-for over a
// directory_iterator throws when advancing fails (a descriptor closed under
// it, an I/O error), even when it was built with an error_code.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "omniprof/support/result.h"

namespace omniprof {

// The entries of `directory` (paths, in the order the kernel gives them), or
// an error naming the directory and why opening or reading it failed.
Result<std::vector<std::filesystem::path>> list_directory(const std::string& directory);

}  // namespace omniprof
