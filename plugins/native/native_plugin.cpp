// The native unwinder plugin: fills the NATIVE tail-call slot with its BPF
// walker. Its frames are instruction addresses, which the host names from
// ELF symbol tables (so it has no symbolize_frame hook), and every process is
// its own (so it has no detect_process hook).
#include <omniprof/plugin.hpp>

#include "native.skel.h"

namespace {

const omniprof_program_slot kPrograms[] = {{"native_unwind", OMNIPROF_SLOT_NATIVE}};

// In the order of enum omniprof_native_stat (bpf/include/omniprof/bpf/abi.h).
const char* const kStatNames[] = {
    "frames",
    "stop_outermost",
    "stop_read_failed",
    "stop_zero_return",
    "stop_fp_not_ascending",
    "stop_max_depth",
};
static_assert(sizeof(kStatNames) / sizeof(kStatNames[0]) ==
              OMNIPROF_STAT_NATIVE_END - OMNIPROF_STATS_BASE(OMNIPROF_SLOT_NATIVE));

struct NativeUnwinder {
  omniprof::sdk::HostLog log;
};

omniprof_status create(const omniprof_host_api* host, const char* /*data_dir*/,
                       uint32_t /*assigned_slot*/, void** instance, char* error) {
  return omniprof::sdk::guarded(error, [&] {
    *instance = new NativeUnwinder{omniprof::sdk::HostLog(host)};
    return OMNIPROF_OK;
  });
}

void destroy(void* instance) { delete static_cast<NativeUnwinder*>(instance); }

omniprof_plugin make_entry() {
  omniprof_plugin entry = omniprof::sdk::make_plugin_entry();
  entry.name = "native";
  entry.version = "0.1.0-framepointer";
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
  return entry;
}

const omniprof_plugin kEntry = make_entry();

}  // namespace

OMNIPROF_DEFINE_PLUGIN(&kEntry)
