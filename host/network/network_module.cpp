#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include "common/install_layout.h"
#include "network/transport.h"

namespace omniprof::network {

Result<const NetworkModule*> load_network_module(const std::string& path) {
  // A module, once loaded, stays for the life of the process (its code runs
  // on the exporters' and the page server's threads); a failure is not
  // remembered, so a file put in place later is found.
  static std::mutex mutex;
  static std::map<std::string, const NetworkModule*> loaded;
  std::lock_guard lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  const std::string what = "the network module " + path + " (needed for export and /metrics)";
  if (access(path.c_str(), R_OK) != 0) {
    return make_error(what + " cannot be read: " + std::strerror(errno) +
                      "; it is installed with omniprof, beside its plugins");
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return make_error(what + " cannot be loaded: " + dlerror());
  using Entry = const NetworkModule* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kNetworkModuleEntry));
  const NetworkModule* module = entry ? entry() : nullptr;
  if (!module) {
    dlclose(handle);
    return make_error(what + " has no " + kNetworkModuleEntry + ": not omniprof's network module");
  }
  if (std::strcmp(module->version, OMNIPROF_VERSION) != 0) {
    std::string version = module->version;
    dlclose(handle);
    return make_error(what + " is from omniprof " + version + ", this agent is " OMNIPROF_VERSION +
                      "; the two are installed together");
  }
  loaded.emplace(path, module);
  return module;
}

Result<const NetworkModule*> installed_network_module() {
  return load_network_module(InstallLayout::from_executable().network_module);
}

}  // namespace omniprof::network
