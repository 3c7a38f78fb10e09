#include "common/install_layout.h"

#include <filesystem>
#include <system_error>

namespace omniprof {

InstallLayout InstallLayout::from_executable() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  fs::path prefix = ec ? fs::path("/usr") : exe.parent_path().parent_path();
  return InstallLayout{prefix.string(), (prefix / OMNIPROF_PLUGIN_SUBDIR).string(),
                       (prefix / OMNIPROF_DATA_SUBDIR).string(), (prefix / OMNIPROF_NETWORK_MODULE_PATH).string()};
}

}  // namespace omniprof
