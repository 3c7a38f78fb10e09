// The two things every libelf user here needs: declaring the ELF version
// (libelf refuses to work until the application has, once per process) and
// libelf's last error as text.
#pragma once

#include <libelf.h>

#include <string>

namespace omniprof {

inline bool libelf_ready() {
  static const bool ready = elf_version(EV_CURRENT) != EV_NONE;
  return ready;
}

inline std::string libelf_error() {
  const char* message = elf_errmsg(-1);
  return message != nullptr ? message : "unknown libelf error";
}

}  // namespace omniprof
