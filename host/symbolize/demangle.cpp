#include "symbolize/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace omniprof {

std::string demangle(const std::string& name) {
  // Only "_Z" names are mangled; C names such as "_start" must not be fed to
  // the demangler, which would accept some of them as types.
  if (name.size() < 3 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || demangled == nullptr) return name;
  return demangled.get();
}

}  // namespace omniprof
