#include "symbolize/elf_symbolizer.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "symbolize/demangle.h"
#include "omniprof/support/elf_file.h"

namespace omniprof {
namespace {

// A symbol whose address range nests inside a bigger one (an assembler label
// typed as a function inside its parent) hides the parent from a plain
// "closest start below" search; looking back a few entries finds the parent.
constexpr size_t kMaxNestedSymbolLookback = 8;

bool is_function(uint8_t type) { return type == STT_FUNC || type == STT_GNU_IFUNC; }

int binding_rank(uint8_t binding) {
  switch (binding) {
    case STB_GLOBAL:
    case STB_GNU_UNIQUE:
      return 0;
    case STB_WEAK:
      return 1;
    case STB_LOCAL:
      return 2;
    default:
      return 3;
  }
}

size_t leading_underscores(std::string_view name) {
  size_t count = 0;
  while (count < name.size() && name[count] == '_') ++count;
  return count;
}

// End of a sized symbol; a corrupt size that would wrap around is clamped.
uint64_t sized_end(uint64_t start, uint64_t size) {
  return size > ~uint64_t{0} - start ? ~uint64_t{0} : start + size;
}

uint64_t page_size() {
  static const uint64_t size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// Splits "/proc/PID/root/usr/lib/x.so" into ("/proc/PID/root",
// "/usr/lib/x.so"), so that callers which pass host paths of containerized
// processes still get debug files looked up inside the container's root.
std::pair<std::string, std::string> split_proc_root(const std::string& path) {
  constexpr std::string_view kProc = "/proc/";
  constexpr std::string_view kRoot = "/root";
  if (!path.starts_with(kProc)) return {"", path};
  const size_t digits_end = path.find_first_not_of("0123456789", kProc.size());
  if (digits_end == kProc.size() || digits_end == std::string::npos) return {"", path};
  if (path.compare(digits_end, kRoot.size(), kRoot) != 0 || path.size() <= digits_end + kRoot.size() ||
      path[digits_end + kRoot.size()] != '/') {
    return {"", path};
  }
  return {path.substr(0, digits_end + kRoot.size()), path.substr(digits_end + kRoot.size())};
}

}  // namespace

// One symbol, its name stored in LoadedFile::names so that a library with a
// few hundred thousand symbols costs one allocation for all of them.
struct ElfSymbolizer::LoadedFile {
  struct Entry {
    uint64_t start = 0;
    uint64_t end = 0;   // exclusive; for size-0 symbols, up to the next symbol
    uint64_t size = 0;  // st_size
    uint64_t section_end = 0;
    uint32_t name_offset = 0;
    uint32_t name_length = 0;
    uint8_t binding = 0;
    uint8_t type = 0;
  };

  std::optional<Error> error;  // the file itself is unusable
  uint16_t elf_type = 0;
  std::vector<LoadSegment> segments;
  std::string build_id;
  std::optional<std::string> debug_file;
  std::optional<Error> symbols_error;  // segments are usable, symbols are not
  std::string names;
  std::vector<Entry> functions;  // sorted by start, one entry per address
  std::vector<Entry> by_name;    // functions and objects, sorted by name

  std::string_view name(const Entry& entry) const {
    return std::string_view(names).substr(entry.name_offset, entry.name_length);
  }

  // Deterministic choice among aliases: global over weak over local, real
  // functions over IFUNC resolvers, sized over unsized, then the plainest
  // name (fewest leading underscores, shortest, alphabetical), e.g. "malloc"
  // rather than "__libc_malloc".
  auto preference_key(const Entry& entry) const {
    const std::string_view n = name(entry);
    return std::make_tuple(binding_rank(entry.binding), entry.type == STT_FUNC ? 0 : 1, entry.size > 0 ? 0 : 1,
                           leading_underscores(n), n.size(), n);
  }

  void add_symbols(const std::vector<ElfSymbol>& symbols) {
    // Sized once: a big symbol table (node: 185k symbols) must not leave a
    // vector and a string at up to twice their size through doubling.
    size_t name_bytes = 0;
    for (const ElfSymbol& symbol : symbols) name_bytes += symbol.name.size();
    names.reserve(names.size() + name_bytes);
    by_name.reserve(by_name.size() + symbols.size());
    for (const ElfSymbol& symbol : symbols) {
      Entry entry;
      entry.start = symbol.value;
      entry.size = symbol.size;
      entry.section_end = symbol.section_end;
      entry.binding = symbol.binding;
      entry.type = symbol.type;
      entry.name_offset = static_cast<uint32_t>(names.size());
      entry.name_length = static_cast<uint32_t>(symbol.name.size());
      names += symbol.name;
      by_name.push_back(entry);
    }
  }

  // Builds `functions` from all collected symbols and sorts `by_name`.
  void build_indexes() {
    std::vector<Entry> candidates;
    candidates.reserve(static_cast<size_t>(
        std::count_if(by_name.begin(), by_name.end(), [](const Entry& entry) { return is_function(entry.type); })));
    for (const Entry& entry : by_name) {
      if (is_function(entry.type)) candidates.push_back(entry);
    }
    std::sort(candidates.begin(), candidates.end(), [this](const Entry& a, const Entry& b) {
      if (a.start != b.start) return a.start < b.start;
      return preference_key(a) < preference_key(b);
    });

    // Collapse aliases (and the copies .symtab and .dynsym both hold) into
    // the preferred symbol at each address.
    for (size_t i = 0; i < candidates.size();) {
      size_t group_end = i;
      uint64_t longest_sized_end = 0;
      while (group_end < candidates.size() && candidates[group_end].start == candidates[i].start) {
        const Entry& alias = candidates[group_end];
        if (alias.size > 0) longest_sized_end = std::max(longest_sized_end, sized_end(alias.start, alias.size));
        ++group_end;
      }
      Entry chosen = candidates[i];
      chosen.end = chosen.size > 0 ? sized_end(chosen.start, chosen.size) : longest_sized_end;
      functions.push_back(chosen);
      i = group_end;
    }
    functions.shrink_to_fit();  // kept for the file's life in the cache
    // Symbols without any size extend to the next symbol, but not past the
    // end of their section.
    for (size_t i = 0; i < functions.size(); ++i) {
      Entry& entry = functions[i];
      if (entry.end != 0) continue;
      uint64_t end = i + 1 < functions.size() ? functions[i + 1].start : 0;
      if (entry.section_end > entry.start && (end == 0 || entry.section_end < end)) end = entry.section_end;
      entry.end = end > entry.start ? end : entry.start + 1;
    }

    std::sort(by_name.begin(), by_name.end(), [this](const Entry& a, const Entry& b) {
      const std::string_view na = name(a);
      const std::string_view nb = name(b);
      if (na != nb) return na < nb;
      if (binding_rank(a.binding) != binding_rank(b.binding)) return binding_rank(a.binding) < binding_rank(b.binding);
      return a.start < b.start;
    });
  }

  const Entry* function_at(uint64_t address) const {
    auto after = std::upper_bound(functions.begin(), functions.end(), address,
                                  [](uint64_t addr, const Entry& entry) { return addr < entry.start; });
    for (size_t steps = 0; after != functions.begin() && steps < kMaxNestedSymbolLookback; ++steps) {
      --after;
      if (address < after->end) return &*after;
    }
    return nullptr;
  }

  const Entry* symbol_named(std::string_view wanted) const {
    auto found = std::lower_bound(by_name.begin(), by_name.end(), wanted,
                                  [this](const Entry& entry, std::string_view n) { return name(entry) < n; });
    if (found == by_name.end() || name(*found) != wanted) return nullptr;
    return &*found;
  }
};

size_t ElfSymbolizer::FileKeyHash::operator()(const FileKey& key) const {
  size_t hash = std::hash<uint64_t>{}(key.inode);
  for (uint64_t part : {key.file_id, key.device, static_cast<uint64_t>(key.mtime_sec), static_cast<uint64_t>(key.mtime_nsec),
                        key.size}) {
    hash ^= std::hash<uint64_t>{}(part) + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
  }
  return hash;
}

ElfSymbolizer::ElfSymbolizer(DebugFileFinder debug_file_finder, size_t max_cached_files)
    : debug_file_finder_(std::move(debug_file_finder)), max_cached_files_(std::max<size_t>(max_cached_files, 1)) {}

ElfSymbolizer::~ElfSymbolizer() = default;

std::shared_ptr<const ElfSymbolizer::LoadedFile> ElfSymbolizer::load(const std::string& path,
                                                                     const DebugLookup& debug) const {
  auto loaded = std::make_shared<LoadedFile>();
  auto file = ElfFile::open(path);
  if (!file) {
    loaded->error = file.error();
    return loaded;
  }
  loaded->elf_type = file->elf_type();
  loaded->segments = file->load_segments();
  loaded->build_id = file->build_id();

  auto symbols = file->symbols(SymbolKinds::kFunctionsAndObjects);
  if (!symbols) {
    loaded->symbols_error = symbols.error();
    return loaded;
  }
  loaded->add_symbols(*symbols);

  // A stripped file keeps only .dynsym (exported functions); the debug file
  // has the full .symtab with the same addresses.
  if (!file->has_symtab()) {
    // Without a name in the process (a descriptor), only the build ID can
    // find the debug file.
    const std::string root_prefix(debug.root_prefix);
    std::optional<std::string> debug_path =
        debug.path_in_process.empty()
            ? debug_file_finder_.find("", file->build_id(), std::nullopt, root_prefix)
            : debug_file_finder_.find(*file, std::string(debug.path_in_process), root_prefix);
    if (debug_path) {
      auto debug_file = ElfFile::open(*debug_path);
      auto debug_symbols = debug_file ? debug_file->symbols(SymbolKinds::kFunctionsAndObjects)
                                      : Result<std::vector<ElfSymbol>>(debug_file.error());
      // A broken debug file is not an error of the file being symbolized:
      // .dynsym still names what it can.
      if (debug_symbols) {
        loaded->add_symbols(*debug_symbols);
        loaded->debug_file = *debug_path;
      }
    }
  }
  loaded->build_indexes();
  return loaded;
}

Result<std::shared_ptr<const ElfSymbolizer::LoadedFile>> ElfSymbolizer::get(const std::string& path,
                                                                            const std::string& root_prefix) {
  const std::string full_path = root_prefix + path;
  struct stat st {};
  if (::stat(full_path.c_str(), &st) != 0) {
    return make_error(fmt::format("{}: {}", full_path, std::strerror(errno)));
  }
  const FileKey key{0,
                    static_cast<uint64_t>(st.st_dev),
                    static_cast<uint64_t>(st.st_ino),
                    static_cast<int64_t>(st.st_mtim.tv_sec),
                    static_cast<int64_t>(st.st_mtim.tv_nsec),
                    static_cast<uint64_t>(st.st_size)};
  const auto [debug_root_prefix, namespace_path] =
      root_prefix.empty() ? split_proc_root(path) : std::make_pair(root_prefix, path);
  return get(key, full_path, DebugLookup{namespace_path, debug_root_prefix}, true);
}

Result<std::shared_ptr<const ElfSymbolizer::LoadedFile>> ElfSymbolizer::get(uint64_t file_id, const std::string& path,
                                                                            const DebugLookup& debug) {
  FileKey key;
  key.file_id = file_id;
  return get(key, path, debug, false);
}

Result<std::shared_ptr<const ElfSymbolizer::LoadedFile>> ElfSymbolizer::get(const FileKey& key,
                                                                            const std::string& path,
                                                                            const DebugLookup& debug,
                                                                            bool cache_errors) {
  std::shared_ptr<const LoadedFile> file;
  {
    std::lock_guard lock(mutex_);
    if (auto found = cache_.find(key); found != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, found->second.lru_position);
      file = found->second.file;
    }
  }
  if (!file) {
    // Parsing (and CRC-checking debug files) happens outside the lock so one
    // big library does not stall every other lookup. Two threads may load the
    // same file at once; the first to finish wins.
    auto loaded = load(path, debug);
    if (loaded->error && !cache_errors) return *loaded->error;
    std::lock_guard lock(mutex_);
    auto [slot, inserted] = cache_.try_emplace(key);
    if (inserted) {
      lru_.push_front(key);
      slot->second = CacheSlot{std::move(loaded), lru_.begin()};
      while (cache_.size() > max_cached_files_) {
        cache_.erase(lru_.back());
        lru_.pop_back();
      }
    }
    file = slot->second.file;
  }
  if (file->error) return *file->error;
  return file;
}

Result<std::optional<ElfSymbolizer::Symbol>> ElfSymbolizer::symbolize(uint64_t file_id, const std::string& path,
                                                                      uint64_t elf_vaddr, const DebugLookup& debug) {
  auto file = get(file_id, path, debug);
  if (!file) return file.error();
  const LoadedFile& loaded = **file;
  if (loaded.symbols_error) return *loaded.symbols_error;
  const LoadedFile::Entry* entry = loaded.function_at(elf_vaddr);
  if (entry == nullptr) return std::optional<Symbol>();
  Symbol symbol;
  symbol.system_name = std::string(loaded.name(*entry));
  symbol.name = demangle(symbol.system_name);
  symbol.start = entry->start;
  symbol.size = entry->size;
  return std::optional<Symbol>(std::move(symbol));
}

Result<uint64_t> ElfSymbolizer::runtime_to_elf_vaddr(uint64_t file_id, const std::string& path,
                                                      uint64_t runtime_addr, uint64_t map_start,
                                                      uint64_t map_file_offset, const DebugLookup& debug) {
  auto file = get(file_id, path, debug);
  if (!file) return file.error();
  if (runtime_addr < map_start) {
    return make_error(fmt::format("{}: address {:#x} is below its mapping start {:#x}", path,
                                  runtime_addr, map_start));
  }
  // The loader maps each PT_LOAD from its page-aligned file offset, so a
  // mapping's offset may lie a little below p_offset; and mprotect (RELRO)
  // may split one segment's mapping, giving offsets inside it. When two
  // segments share a file page, the one starting closest below the mapping's
  // offset is the one that was mapped there.
  const uint64_t page_mask = ~(page_size() - 1);
  const LoadSegment* segment = nullptr;
  for (const LoadSegment& candidate : (*file)->segments) {
    const uint64_t mapped_from = candidate.offset & page_mask;
    if (map_file_offset < mapped_from || map_file_offset >= candidate.offset + candidate.filesz) continue;
    if (segment == nullptr || mapped_from > (segment->offset & page_mask)) segment = &candidate;
  }
  if (segment == nullptr) {
    return make_error(fmt::format("{}: no PT_LOAD segment contains file offset {:#x}", path,
                                  map_file_offset));
  }
  // Unsigned wrap-around is intended: the intermediate terms may underflow,
  // the sum is exact.
  return runtime_addr - map_start + map_file_offset - segment->offset + segment->vaddr;
}

Result<std::string> ElfSymbolizer::build_id(uint64_t file_id, const std::string& path, const DebugLookup& debug) {
  auto file = get(file_id, path, debug);
  if (!file) return file.error();
  return (*file)->build_id;
}

void ElfSymbolizer::forget(uint64_t file_id) {
  FileKey key;
  key.file_id = file_id;
  std::lock_guard lock(mutex_);
  auto found = cache_.find(key);
  if (found == cache_.end()) return;
  lru_.erase(found->second.lru_position);
  cache_.erase(found);
}

void ElfSymbolizer::forget_if(const std::function<bool(uint64_t file_id)>& gone) {
  std::lock_guard lock(mutex_);
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (it->first.file_id != 0 && gone(it->first.file_id)) {
      lru_.erase(it->second.lru_position);
      it = cache_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<std::optional<std::pair<uint64_t, uint64_t>>> ElfSymbolizer::find_symbol(const std::string& path,
                                                                                 const std::string& name,
                                                                                 const std::string& root_prefix) {
  using Found = std::optional<std::pair<uint64_t, uint64_t>>;
  auto file = get(path, root_prefix);
  if (!file) return file.error();
  const LoadedFile& loaded = **file;
  if (loaded.symbols_error) return *loaded.symbols_error;
  const LoadedFile::Entry* entry = loaded.symbol_named(name);
  if (entry == nullptr) return Found();
  return Found(std::make_pair(entry->start, entry->size));
}

Result<std::optional<std::string>> ElfSymbolizer::debug_file(const std::string& path,
                                                             const std::string& root_prefix) {
  auto file = get(path, root_prefix);
  if (!file) return file.error();
  return (*file)->debug_file;
}

size_t ElfSymbolizer::cached_file_count() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

}  // namespace omniprof
