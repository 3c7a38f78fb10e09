// The native unwinder plugin: fills the NATIVE tail-call slot with its BPF
// walker, and keeps the unwind table of every executable some process maps
// in the host's unwind maps (load_executable / unload_executable). Its
// frames are instruction addresses, which the host names from ELF symbol
// tables (so it has no symbolize_frame hook), and every process is its own
// (so it has no detect_process hook). Where no symbol names a frame, the host
// asks function_bounds for the function around it, from the file's unwind
// information (FunctionRangesCache).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <omniprof/plugin.hpp>

#include <memory>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "function_ranges_cache.h"
#include "native.skel.h"
#include "unwind/unwind_table.h"
#include "unwind_table_store.h"

namespace {

using omniprof::native::BpfUnwindMaps;
using omniprof::native::FunctionRangesCache;
using omniprof::native::StoreStatus;
using omniprof::native::UnwindTableStore;

// The bpf_loop walk where the kernel has it (5.17+), else the unrolled one.
const omniprof_program_slot kPrograms[] = {
    {"native_unwind_loop", OMNIPROF_SLOT_NATIVE, OMNIPROF_PROGRAM_NEEDS_BPF_LOOP},
    {"native_unwind", OMNIPROF_SLOT_NATIVE, 0},
};

// In the order of enum omniprof_native_stat (bpf/include/omniprof/bpf/abi.h).
const char* const kStatNames[] = {
    "frames",
    "stop_outermost",
    "stop_read_failed",
    "stop_zero_return",
    "stop_fp_not_ascending",
    "stop_max_depth",
    "dwarf_frames",
    "frame_pointer_frames",
    "no_mapping",
    "no_table",
    "no_row",
    "unsupported_rule",
    "stop_sp_not_ascending",
    "no_shard",
    "unwind_rows_stored",
    "unwind_tables_stored",
    "walks_table_building",
};
static_assert(sizeof(kStatNames) / sizeof(kStatNames[0]) ==
              OMNIPROF_STAT_NATIVE_END - OMNIPROF_STATS_BASE(OMNIPROF_SLOT_NATIVE));

const char* const kDebugCommands[] = {"unwind-table"};

struct NativeUnwinder {
  omniprof::sdk::HostLog log;
  std::unique_ptr<BpfUnwindMaps> maps;  // null without BPF (omniprof debug)
  std::unique_ptr<UnwindTableStore> store;
  int stats_fd = -1;
  // Also without BPF: it only reads files.
  FunctionRangesCache function_ranges{};
};

// "N malformed FDEs skipped (first: where: why)" for a table some of whose
// CFI was left out, "" for a whole one.
std::string skipped_cfi(const omniprof::unwind::UnwindTable& table) {
  const auto& stats = table.stats;
  if (stats.fdes_malformed == 0 && stats.sections_cut_short == 0) return "";
  std::string summary = std::to_string(stats.fdes_malformed) + " malformed FDE" + (stats.fdes_malformed == 1 ? "" : "s") +
                        " skipped";
  if (stats.sections_cut_short > 0) {
    summary += ", " + std::to_string(stats.sections_cut_short) + " section" + (stats.sections_cut_short == 1 ? "" : "s") +
               " cut short";
  }
  return summary + " (first: " + table.first_problem + ")";
}

// Builds the table of `path`; what of its CFI was left out is returned in
// `skipped` ("" for a whole table).
omniprof::Result<omniprof::unwind::UnwindTable> build_table(const char* path, std::string& skipped) {
  auto table = omniprof::unwind::UnwindTableBuilder::build(path, {});
  if (table) skipped = skipped_cfi(*table);
  return table;
}

// Hands what print_unwind_table writes to the host's `write` as it comes,
// so printing a large table holds no copy of its text.
class HostWriteBuffer : public std::streambuf {
 public:
  HostWriteBuffer(void (*write)(void*, const char*, size_t), void* context) : write_(write), context_(context) {}

 protected:
  std::streamsize xsputn(const char* text, std::streamsize size) override {
    write_(context_, text, static_cast<size_t>(size));
    return size;
  }
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    write_(context_, &ch, 1);
    return c;
  }

 private:
  void (*write_)(void*, const char*, size_t);
  void* context_;
};

// What the store holds, as gauges in the plugin's own percpu_stats range
// (summed over CPUs by the host, so the value goes in CPU 0's slot): the
// host prints them with every other counter.
void publish_store_gauges(const NativeUnwinder& self) {
  if (self.stats_fd < 0 || !self.store) return;
  static const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return;
  std::vector<uint64_t> values(static_cast<size_t>(cpus), 0);
  auto set = [&](uint32_t stat, uint64_t value) {
    values[0] = value;
    bpf_map_update_elem(self.stats_fd, &stat, values.data(), BPF_ANY);
  };
  set(OMNIPROF_STAT_NATIVE_ROWS_STORED, self.store->rows_used());
  set(OMNIPROF_STAT_NATIVE_TABLES_STORED, self.store->executables());
}

uint32_t map_max_entries(int fd) {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.max_entries;
}

omniprof_status create(const omniprof_host_api* host, const char* /*data_dir*/,
                       uint32_t /*assigned_slot*/, void** instance, char* error) {
  return omniprof::sdk::guarded(error, [&] {
    auto unwinder = std::make_unique<NativeUnwinder>(NativeUnwinder{omniprof::sdk::HostLog(host), nullptr, nullptr});
    int shards = host->map_fd(host->host, OMNIPROF_MAP_UNWIND_SHARDS);
    int rules = host->map_fd(host->host, OMNIPROF_MAP_UNWIND_RULES);
    int info = host->map_fd(host->host, OMNIPROF_MAP_UNWIND_INFO);
    if (shards >= 0 && rules >= 0 && info >= 0) {
      if (!host->create_inner_map) {
        omniprof::sdk::set_error(error, "the host cannot create unwind shards (no create_inner_map)");
        return OMNIPROF_ERR_UNSUPPORTED;
      }
      // The host sized unwind_shards to its budget (maps.unwind_memory_mb).
      uint32_t max_shards = map_max_entries(shards);
      if (max_shards == 0) {
        omniprof::sdk::set_error(error, "unwind_shards has room for no shard");
        return OMNIPROF_ERR_INVALID_ARGUMENT;
      }
      unwinder->maps = std::make_unique<BpfUnwindMaps>(host, rules, info);
      unwinder->store = std::make_unique<UnwindTableStore>(*unwinder->maps, max_shards);
      unwinder->stats_fd = host->map_fd(host->host, OMNIPROF_MAP_PERCPU_STATS);
    }
    *instance = unwinder.release();
    return OMNIPROF_OK;
  });
}

void destroy(void* instance) { delete static_cast<NativeUnwinder*>(instance); }

omniprof_status load_executable(void* instance, uint64_t file_id, const char* path, char* error) {
  auto* self = static_cast<NativeUnwinder*>(instance);
  return omniprof::sdk::guarded(error, [&] {
    if (!self->store) return OMNIPROF_OK;
    std::string skipped;
    auto table = build_table(path, skipped);
    if (!table) {
      omniprof::sdk::set_error(error, table.error().message);
      return OMNIPROF_ERR_PARSE;
    }
    // Loaded, but not whole: the status message of a successful load says
    // so; the host logs it with the file's name (`path` is a descriptor's)
    // and counts it.
    omniprof::sdk::set_error(error, skipped);
    // No call-frame information: frame pointers are all there is for it.
    if (table->rows.empty()) return OMNIPROF_OK;
    auto stored = self->store->add(file_id, table->rows);
    publish_store_gauges(*self);
    switch (stored.status) {
      case StoreStatus::kOk:
        return OMNIPROF_OK;
      case StoreStatus::kNoSpace:
      case StoreStatus::kTooManyChunks:
        omniprof::sdk::set_error(error, stored.message + " (raise maps.unwind_memory_mb)");
        return OMNIPROF_ERR_NO_SPACE;
      case StoreStatus::kTooLarge:
        // No amount of room makes it fit: retrying or evicting others for
        // it would only churn.
        omniprof::sdk::set_error(error, stored.message + " (" + std::to_string(table->rows.size()) + " rows)");
        return OMNIPROF_ERR_TOO_LARGE;
      case StoreStatus::kMapError:
        break;
    }
    omniprof::sdk::set_error(error, stored.message);
    return OMNIPROF_ERR_IO;
  });
}

void unload_executable(void* instance, uint64_t file_id) {
  auto* self = static_cast<NativeUnwinder*>(instance);
  self->function_ranges.forget(file_id);
  if (!self->store) return;
  self->store->remove(file_id);
  publish_store_gauges(*self);
}

omniprof_status function_bounds(void* instance, uint64_t file_id, const char* path, uint64_t address,
                                uint64_t* start, uint64_t* end, char* error) {
  auto* self = static_cast<NativeUnwinder*>(instance);
  return omniprof::sdk::guarded(error, [&] {
    auto found = self->function_ranges.find(file_id, path, address);
    if (!found) {
      omniprof::sdk::set_error(error, found.error().message);
      return OMNIPROF_ERR_PARSE;
    }
    if (!*found) return OMNIPROF_NOT_MINE;
    *start = (*found)->start;
    *end = (*found)->end;
    return OMNIPROF_OK;
  });
}

omniprof_status debug_command(void* instance, const char* command, const char* argument,
                              void (*write)(void*, const char*, size_t), void* context, char* error) {
  auto* self = static_cast<NativeUnwinder*>(instance);
  return omniprof::sdk::guarded(error, [&] {
    if (std::string(command) != "unwind-table") return OMNIPROF_ERR_INVALID_ARGUMENT;
    std::string skipped;
    auto table = build_table(argument, skipped);
    if (!table) {
      omniprof::sdk::set_error(error, table.error().message);
      return OMNIPROF_ERR_PARSE;
    }
    if (!skipped.empty()) self->log.warn(std::string(argument) + ": " + skipped + "; the other FDEs are used");
    HostWriteBuffer buffer(write, context);
    std::ostream out(&buffer);
    omniprof::unwind::print_unwind_table(*table, out);
    return OMNIPROF_OK;
  });
}

omniprof_plugin make_entry() {
  omniprof_plugin entry =
      omniprof::sdk::make_plugin_entry("native", "0.3.0", "native", OMNIPROF_MODULE_NATIVE, native_bpf__elf_bytes, kPrograms, kStatNames);
  entry.create = create;
  entry.destroy = destroy;
  entry.load_executable = load_executable;
  entry.unload_executable = unload_executable;
  entry.debug_commands = kDebugCommands;
  entry.num_debug_commands = 1;
  entry.debug_command = debug_command;
  entry.function_bounds = function_bounds;
  return entry;
}

const omniprof_plugin kEntry = make_entry();

}  // namespace

OMNIPROF_DEFINE_PLUGIN(&kEntry)
