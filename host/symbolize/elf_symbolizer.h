// ElfSymbolizer: turns addresses inside ELF files into function names.
//
// A whole-system profile sees the same libraries (libc, libstdc++, ...) mapped
// by hundreds of processes, so each file is parsed once and cached. Addresses
// are named by FileID (executables/file_id.h: the file's content identity,
// found when the process was read): the file is cached under it and read
// once however many paths reach it (a descriptor per process, a copy per
// container). find_symbol and debug_file take a path instead (plugins ask
// for a symbol by path) and cache under the identity stat() gives the file
// (device, inode, mtime, size), not its path: the same path may be a
// different file in another container, and an upgraded library gets a new
// entry instead of stale symbols. Thread-safe.
//
// Symbols come from .symtab and .dynsym; a stripped file (no .symtab) gets its
// .symtab from the separate debug file when DebugFileFinder finds one.
//
// Paths given to find_symbol and debug_file: `path` is the path as the
// process sees it (e.g. from /proc/PID/maps) and `root_prefix` is where that
// process's root is visible from here, e.g. "/proc/PID/root" for a process in
// a container ("" for this mount namespace). The file read is root_prefix +
// path. A path of the form /proc/PID/root/... given without a prefix is
// split the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "omniprof/support/result.h"
#include "omniprof/support/debug_file_finder.h"

namespace omniprof {

class ElfSymbolizer {
 public:
  struct Symbol {
    std::string name;         // demangled, for display
    std::string system_name;  // raw name from the symbol table
    uint64_t start = 0;       // ELF virtual address of the symbol
    uint64_t size = 0;        // st_size; 0 for symbols without a size
  };

  explicit ElfSymbolizer(DebugFileFinder debug_file_finder = DebugFileFinder(), size_t max_cached_files = 4096);
  ~ElfSymbolizer();
  ElfSymbolizer(const ElfSymbolizer&) = delete;
  ElfSymbolizer& operator=(const ElfSymbolizer&) = delete;

  // Where to look for the separate debug file of a file read through a
  // path that names nothing (a descriptor, /proc/self/fd/N): its path as the
  // process sees it and where that process's root is visible from here
  // ("/proc/PID/root"; "" for this mount namespace). Empty: look by build
  // ID in this namespace only. Views: read during the call only, and only
  // when the file is not cached yet.
  struct DebugLookup {
    std::string_view path_in_process;
    std::string_view root_prefix;
  };

  // By FileID: the file is cached under `file_id`; `path` (the file read,
  // named in errors) and `debug` are used on a miss only. A file that cannot
  // be read is not cached (the next call retries).
  //
  // The function containing `elf_vaddr` (an address in the file's own
  // virtual address space, see runtime_to_elf_vaddr), or nullopt when no
  // function symbol covers it. Errors: the file is missing or not ELF.
  Result<std::optional<Symbol>> symbolize(uint64_t file_id, const std::string& path, uint64_t elf_vaddr,
                                          const DebugLookup& debug = {});
  // Converts an address of a running process into the ELF virtual address of
  // the file mapped there. map_start and map_file_offset are the start and
  // file offset of the /proc/PID/maps entry containing runtime_addr. Works the
  // same for PIE executables, shared libraries (load bias = map_start -
  // (map_file_offset - p_offset + p_vaddr)) and non-PIE executables (bias 0).
  Result<uint64_t> runtime_to_elf_vaddr(uint64_t file_id, const std::string& path, uint64_t runtime_addr,
                                        uint64_t map_start, uint64_t map_file_offset, const DebugLookup& debug = {});
  // Build ID of the file (hex, "" when it has none).
  Result<std::string> build_id(uint64_t file_id, const std::string& path, const DebugLookup& debug = {});
  // Drops what is cached under `file_id` (no process maps it any more).
  void forget(uint64_t file_id);
  // forget() for every FileID cached for which `gone` is true.
  void forget_if(const std::function<bool(uint64_t file_id)>& gone);

  // By path (`path` and `root_prefix`: see the top of this file), cached
  // under the file's stat() identity, errors too (a broken file is not read
  // again until it changes).
  //
  // (value, size) of the symbol with this raw (mangled) name: functions and
  // data objects (STT_OBJECT, STT_TLS), global definitions preferred.
  Result<std::optional<std::pair<uint64_t, uint64_t>>> find_symbol(const std::string& path, const std::string& name,
                                                                   const std::string& root_prefix = "");
  // The separate debug file symbols were read from, if one was used.
  Result<std::optional<std::string>> debug_file(const std::string& path, const std::string& root_prefix = "");

  size_t cached_file_count() const;

 private:
  // Either a FileID (all else 0) or the identity stat() gives a path.
  struct FileKey {
    uint64_t file_id = 0;
    uint64_t device = 0;
    uint64_t inode = 0;
    int64_t mtime_sec = 0;
    int64_t mtime_nsec = 0;
    uint64_t size = 0;
    bool operator==(const FileKey&) const = default;
  };
  struct FileKeyHash {
    size_t operator()(const FileKey& key) const;
  };
  struct LoadedFile;  // parsed contents of one file, defined in the .cpp
  struct CacheSlot {
    std::shared_ptr<const LoadedFile> file;
    std::list<FileKey>::iterator lru_position;
  };

  // The cached contents of root_prefix + path, loading them on first use.
  // Errors: the file cannot be stat()ed, opened or parsed as ELF.
  Result<std::shared_ptr<const LoadedFile>> get(const std::string& path, const std::string& root_prefix);
  Result<std::shared_ptr<const LoadedFile>> get(uint64_t file_id, const std::string& path, const DebugLookup& debug);
  // `path` is the file read; `debug` where its debug file is looked for.
  Result<std::shared_ptr<const LoadedFile>> get(const FileKey& key, const std::string& path, const DebugLookup& debug,
                                                bool cache_errors);
  std::shared_ptr<const LoadedFile> load(const std::string& path, const DebugLookup& debug) const;

  const DebugFileFinder debug_file_finder_;
  const size_t max_cached_files_;
  mutable std::mutex mutex_;  // guards cache_ and lru_
  std::unordered_map<FileKey, CacheSlot, FileKeyHash> cache_;
  std::list<FileKey> lru_;  // most recently used first
};

}  // namespace omniprof
