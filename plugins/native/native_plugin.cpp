// The native unwinder plugin: fills the NATIVE tail-call slot with its BPF
// walker, and keeps the unwind table of every executable some process maps
// in the host's unwind maps (load_executable / unload_executable). Its
// frames are instruction addresses, which the host names from ELF symbol
// tables (so it has no symbolize_frame hook), and every process is its own
// (so it has no detect_process hook).
#include <bpf/bpf.h>

#include <omniprof/plugin.hpp>

#include <memory>
#include <sstream>

#include "native.skel.h"
#include "unwind/unwind_table.h"
#include "unwind_table_store.h"

namespace {

using omniprof::native::BpfUnwindMaps;
using omniprof::native::StoreStatus;
using omniprof::native::UnwindTableStore;

const omniprof_program_slot kPrograms[] = {{"native_unwind", OMNIPROF_SLOT_NATIVE}};

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
};
static_assert(sizeof(kStatNames) / sizeof(kStatNames[0]) ==
              OMNIPROF_STAT_NATIVE_END - OMNIPROF_STATS_BASE(OMNIPROF_SLOT_NATIVE));

const char* const kDebugCommands[] = {"unwind-table"};

struct NativeUnwinder {
  omniprof::sdk::HostLog log;
  std::unique_ptr<BpfUnwindMaps> maps;  // null without BPF (omniprof debug)
  std::unique_ptr<UnwindTableStore> store;
};

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
    int rows = host->map_fd(host->host, OMNIPROF_MAP_UNWIND_ROWS);
    int rules = host->map_fd(host->host, OMNIPROF_MAP_UNWIND_RULES);
    int info = host->map_fd(host->host, OMNIPROF_MAP_UNWIND_INFO);
    if (rows >= 0 && rules >= 0 && info >= 0) {
      uint32_t shards = map_max_entries(rows) / OMNIPROF_ROWS_PER_SHARD;
      if (shards == 0) {
        omniprof::sdk::set_error(error, "unwind_rows holds less than one shard");
        return OMNIPROF_ERR_INVALID_ARGUMENT;
      }
      unwinder->maps = std::make_unique<BpfUnwindMaps>(rows, rules, info);
      unwinder->store = std::make_unique<UnwindTableStore>(*unwinder->maps, shards);
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
    auto table = omniprof::unwind::UnwindTableBuilder::build(path, {});
    if (!table) {
      omniprof::sdk::set_error(error, table.error().message);
      return OMNIPROF_ERR_PARSE;
    }
    // No call-frame information: frame pointers are all there is for it.
    if (table->rows.empty()) return OMNIPROF_OK;
    auto stored = self->store->add(file_id, table->rows);
    switch (stored.status) {
      case StoreStatus::kOk:
        return OMNIPROF_OK;
      case StoreStatus::kNoSpace:
      case StoreStatus::kTooManyChunks:
        omniprof::sdk::set_error(error, stored.message + " (raise maps.unwind_shards)");
        return OMNIPROF_ERR_NO_SPACE;
      case StoreStatus::kMapError:
        break;
    }
    omniprof::sdk::set_error(error, stored.message);
    return OMNIPROF_ERR_IO;
  });
}

void unload_executable(void* instance, uint64_t file_id) {
  auto* self = static_cast<NativeUnwinder*>(instance);
  if (self->store) self->store->remove(file_id);
}

omniprof_status debug_command(void* /*instance*/, const char* command, const char* argument,
                              void (*write)(void*, const char*, size_t), void* context, char* error) {
  return omniprof::sdk::guarded(error, [&] {
    if (std::string(command) != "unwind-table") return OMNIPROF_ERR_INVALID_ARGUMENT;
    auto table = omniprof::unwind::UnwindTableBuilder::build(argument, {});
    if (!table) {
      omniprof::sdk::set_error(error, table.error().message);
      return OMNIPROF_ERR_PARSE;
    }
    std::ostringstream out;
    omniprof::unwind::print_unwind_table(*table, out);
    std::string text = out.str();
    write(context, text.data(), text.size());
    return OMNIPROF_OK;
  });
}

omniprof_plugin make_entry() {
  omniprof_plugin entry = omniprof::sdk::make_plugin_entry();
  entry.name = "native";
  entry.version = "0.2.0";
  entry.runtime = "native";
  entry.module_type = OMNIPROF_MODULE_NATIVE;
  size_t size = 0;
  entry.bpf_object = native_bpf__elf_bytes(&size);
  entry.bpf_object_size = size;
  entry.programs = kPrograms;
  entry.num_programs = 1;
  entry.stat_names = kStatNames;
  entry.num_stat_names = sizeof(kStatNames) / sizeof(kStatNames[0]);
  entry.create = create;
  entry.destroy = destroy;
  entry.load_executable = load_executable;
  entry.unload_executable = unload_executable;
  entry.debug_commands = kDebugCommands;
  entry.num_debug_commands = 1;
  entry.debug_command = debug_command;
  return entry;
}

const omniprof_plugin kEntry = make_entry();

}  // namespace

OMNIPROF_DEFINE_PLUGIN(&kEntry)
