// Where an installed (or built) tree keeps its parts, found from the path of
// the running binary: <prefix>/bin/omniprof -> <prefix>/lib/omniprof/plugins.
// The build tree has the same shape (build/bin, build/lib/omniprof/...), so
// a binary run from it finds the parts built beside it.
#pragma once

#include <string>

namespace omniprof {

struct InstallLayout {
  std::string prefix;
  std::string plugin_dir;
  std::string data_dir;
  std::string network_module;  // lib/omniprof/network.so (network/transport.h)
  static InstallLayout from_executable();
};

}  // namespace omniprof
