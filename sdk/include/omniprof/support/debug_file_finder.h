// DebugFileFinder: locates the separate debug file (the one holding .symtab
// and DWARF) of a stripped ELF file, the way GDB and distributions lay them
// out:
//   1. <debug_root>/.build-id/xx/yyyy.debug, by build ID;
//   2. by .gnu_debuglink name, in <dir>/<name>, <dir>/.debug/<name> and
//      <debug_root>/<dir>/<name>, where <dir> is the directory of the ELF
//      file; a candidate must match the CRC32 recorded in the link.
// For a process in another mount namespace (a container) every path is looked
// up under a root prefix such as /proc/PID/root; build-ID lookups fall back to
// the host's debug root, since a build ID identifies the file wherever the
// debug file was installed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "omniprof/support/elf_file.h"

namespace omniprof {

class DebugFileFinder {
 public:
  explicit DebugFileFinder(std::string debug_root = "/usr/lib/debug");

  const std::string& debug_root() const { return debug_root_; }

  // `elf_path` is the path of the ELF file as seen under `root_prefix` ("" for
  // this mount namespace); `elf` is that file, already open. Returns the full
  // (prefixed) path of the debug file, or nullopt when there is none.
  std::optional<std::string> find(const ElfFile& elf, const std::string& elf_path,
                                  const std::string& root_prefix = "") const;

  // Same, from the identifying data directly.
  std::optional<std::string> find(const std::string& elf_path, const std::string& build_id,
                                  const std::optional<DebugLink>& debuglink,
                                  const std::string& root_prefix = "") const;

 private:
  std::optional<std::string> find_by_build_id(const std::string& build_id, const std::string& root_prefix) const;
  std::optional<std::string> find_by_debuglink(const std::string& elf_path, const DebugLink& debuglink,
                                               const std::string& root_prefix) const;

  std::string debug_root_;
};

// CRC32 (the zlib/IEEE polynomial used by .gnu_debuglink) of a whole file.
Result<uint32_t> file_crc32(const std::string& path);

}  // namespace omniprof
