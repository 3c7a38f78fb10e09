// rbperf: the Ruby plugin. Its BPF program (rbperf.bpf.c) walks the sampled
// thread's CRuby control frames; this side finds CRuby in a process (the
// ruby executable, or a libruby it maps), tells the walk how that thread
// reaches its execution context and which offsets its version has, reads
// the frames the walk met while the process lives (tick), and names them
// (symbolize_frame).
//
// Threading: the host holds this instance's lock for every hook call
// (plugin.h), so nothing here takes a lock of its own beyond what the
// reader's cache does.
#include <bpf/bpf.h>
#include <elf.h>
#include <omniprof/interpreter_plugin.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "omniprof/offsets.hpp"
#include "omniprof/private_maps.hpp"
#include "omniprof/support/elf_file.h"
#include "omniprof/support/tls_variable.h"
#include "rbperf.h"
#include "ruby.skel.h"
#include "ruby_frame_reader.h"
#include "ruby_offsets.h"
#include "ruby_offsets_table.h"
#include "ruby_version.h"

namespace {

namespace rb = omniprof::ruby;

// bpf_loop walk where the kernel has it (5.17+), else the tail-call one.
const omniprof_program_slot kPrograms[] = {
    {"ruby_unwind_loop", OMNIPROF_SLOT_RUBY, OMNIPROF_PROGRAM_NEEDS_BPF_LOOP},
    {"ruby_unwind", OMNIPROF_SLOT_RUBY, 0},
};

// In the order of enum rbperf_stat.
const char* const kStatNames[] = {
    "samples", "frames", "no_offsets", "no_ec", "read_failed", "truncated", "frames_seen_full", "ec_of_another_thread",
};
static_assert(sizeof(kStatNames) / sizeof(kStatNames[0]) == RBPERF_STAT_END - RBPERF_STAT_SAMPLES);

// How the file lets a thread reach its execution context (enum ruby_ec_model).
struct EcAccess {
  uint32_t model = 0;
  std::optional<omniprof::TlsVariableAccess> tls;  // RUBY_EC_TLS_*
  uint64_t global = 0;                             // GLOBAL_POINTER / MAIN_RACTOR: ELF vaddr
};

// What one file (by file id) says about CRuby: nothing, or where its VM
// lives. Read once per file.
struct RubyFile {
  bool is_ruby = false;
  // A CRuby that cannot be walked (a libruby, or an executable with a
  // ruby_version): worth a log line, unlike the small ruby executable of a
  // build against libruby.so, which has no VM of its own.
  bool unusable_ruby = false;
  std::string why_not;
  rb::RubyVersion version;
  std::string version_text;
  std::pair<uint64_t, uint64_t> vm_exec_range;  // ELF vaddr [start, end) of rb_vm_exec
  EcAccess ec;
  uint64_t global_symbols = 0;  // ELF vaddr, 0 if not found (C functions then go unnamed)
  uint64_t vm_pointer = 0;      // ELF vaddr of ruby_current_vm_ptr, 0 if not found (3.2 classes go unnamed)
};

struct RubyProcess {
  rb::RubyVersionOffsets offsets;
  rb::RubyProcessAddresses addresses;
  std::string version;
};

// A name the process gives a CRuby file: ruby, ruby3.1, libruby.so.3.1,
// libruby-3.1.so.3.1.2 (not ruby's extension libraries).
constexpr const char* kRubyFileName = R"(^(ruby([0-9]+(\.[0-9]+)*)?|libruby(-[0-9.]+)?\.so(\.[0-9]+)*)$)";

class RubyPlugin : public omniprof::sdk::InterpreterPlugin<RubyPlugin, RubyFile, RubyProcess, rb::RubyOffsetsTable> {
 public:
  static constexpr const char* kRuntime = "ruby";

  RubyPlugin(const omniprof_host_api* host, rb::RubyOffsetsTable table)
      : InterpreterPlugin(host, kRubyFileName, std::move(table), "ruby_offsets", RUBY_MAX_VERSIONS),
        frames_seen_fd_(host->private_map_fd(host->host, "ruby_frames_seen")),
        frames_fresh_fd_(host->private_map_fd(host->host, "ruby_frames_seen_fresh")) {}

  RubyFile read_file(const std::string& path, const std::string& name);
  omniprof_status detect(const omniprof_process& process, omniprof_process_attach& attach, char* error);
  omniprof::Result<omniprof::sdk::FrameName> name_frame(int32_t pid, const RubyProcess& process,
                                                        const omniprof_frame_data& frame);
  void forget_process(int32_t pid) {
    cache_.drop_pid(static_cast<uint32_t>(pid));
    for (auto it = method_entries_.lower_bound({pid, 0}); it != method_entries_.end() && it->first.first == pid;) {
      it = method_entries_.erase(it);
    }
  }
  void tick();

 private:
  using Files = omniprof::sdk::DescribedFiles<RubyFile>;

  bool ec_data(int32_t pid, const RubyFile& info, uint64_t bias, omniprof_process_attach& attach, std::string* why);
  struct SeenFrame {
    int32_t pid;
    uint64_t address, method_entry;
  };
  std::vector<SeenFrame> drain_frames_seen();

  int frames_seen_fd_ = -1;   // every frame the walk met (OMNIPROF_SEEN_MAP)
  int frames_fresh_fd_ = -1;  // those met first since the last drain
  // (pid, frame address) -> the method entry the walk saw with it (rbperf.h).
  std::map<std::pair<int32_t, uint64_t>, uint64_t> method_entries_;
  rb::RubyFrameCache cache_;
};

// A symbol the file itself lacks, from elsewhere: the host's lookup, which
// reads a stripped file's separate debug file (Debian's libruby3.3-dbgsym
// for a libruby that hides rb_vm_exec and ruby_current_ec). Value and size
// only: its type is STT_NOTYPE.
using SymbolElsewhere = std::function<std::optional<omniprof::ElfSymbol>(const char* name)>;

// Fills `info` from the ELF file at `path`; returns why it is not a usable
// CRuby, empty when it is.
std::string read_ruby_file(const std::string& path, const std::string& name, bool main_executable,
                           const SymbolElsewhere& elsewhere, RubyFile& info) {
  info.unusable_ruby = !main_executable;
  auto elf = omniprof::ElfFile::open(path);
  if (!elf) return elf.error().message;
  auto symbol = [&](const char* wanted) -> std::optional<omniprof::ElfSymbol> {
    auto found = elf->find_symbol(wanted);  // functions and objects: an STT_NOTYPE entry is not one
    if (found && *found) return *found;
    return elsewhere(wanted);
  };
  auto version = rb::read_ruby_version(*elf);
  if (version) info.unusable_ruby = true;
  if (!version) {
    // The ruby executable of a build against libruby.so has no VM of its
    // own: the library that follows it in the maps is the one.
    return name + ": " + version.error().message;
  }
  // 3.0+ exports rb_vm_exec; 2.6 and 2.7 call it vm_exec (in .symtab only).
  auto exec = symbol("rb_vm_exec");
  if (!exec) exec = symbol("vm_exec");
  if (!exec) return name + ": neither rb_vm_exec nor vm_exec found (a stripped build?)";
  info.version = *version;
  info.version_text = version->to_string();
  info.vm_exec_range = {exec->value, exec->value + std::max<uint64_t>(exec->size, 1)};

  // From the debug file it has no type: with a TLS segment (3.0.4+) it is
  // the thread-local one.
  if (auto tls = symbol("ruby_current_ec");
      tls && (tls->type == STT_TLS || (tls->type == STT_NOTYPE && elf->tls_segment()))) {
    auto access = omniprof::find_tls_variable(*elf, "ruby_current_ec", main_executable, tls->value);
    if (!access) return access.error().message;
    info.ec.tls = *access;
    info.ec.model = RUBY_EC_TLS_DTV;  // "TLS": ec_data picks the model from what the process's loader wrote
  } else if (auto global = symbol("ruby_current_execution_context_ptr")) {
    info.ec.model = RUBY_EC_GLOBAL_POINTER;
    info.ec.global = global->value;
  } else if (auto ractor = symbol("ruby_single_main_ractor")) {
    info.ec.model = RUBY_EC_MAIN_RACTOR;
    info.ec.global = ractor->value;
  } else {
    return name + ": no ruby_current_ec, ruby_current_execution_context_ptr or ruby_single_main_ractor";
  }
  if (auto symbols = rb::find_global_symbols(*elf)) info.global_symbols = *symbols;
  if (auto vm = symbol("ruby_current_vm_ptr")) info.vm_pointer = vm->value;
  info.is_ruby = true;
  return "";
}

RubyFile RubyPlugin::read_file(const std::string& path, const std::string& name) {
  // The ruby executable, or a libruby: where its TLS variable is reached from.
  const bool main_executable = name.find("libruby") == std::string::npos;
  RubyFile info;
  info.why_not = read_ruby_file(path, name, main_executable, [&](const char* wanted) -> std::optional<omniprof::ElfSymbol> {
    uint64_t value = 0, size = 0;
    if (!host_->elf_symbol || host_->elf_symbol(host_->host, path.c_str(), wanted, &value, &size) != OMNIPROF_OK) {
      return std::nullopt;
    }
    omniprof::ElfSymbol found;
    found.name = wanted;
    found.value = value;
    found.size = size;
    found.type = STT_NOTYPE;
    return found;
  }, info);
  return info;
}

// The process data that gets the walk to a thread's EC. For TLS, what the
// loader wrote in this process says which of the two TLS models the walk
// uses (a TLS descriptor can be either).
bool RubyPlugin::ec_data(int32_t pid, const RubyFile& info, uint64_t bias, omniprof_process_attach& attach,
                         std::string* why) {
  attach.interpreter_data[RBPERF_DATA_EC_MODEL] = info.ec.model;
  if (info.ec.tls) {
    auto location = omniprof::locate_tls_variable(*info.ec.tls, bias, reader(pid));
    if (!location) {
      *why = "ruby_current_ec: " + location.error().message;
      return false;
    }
    if (location->base == omniprof::TlsVariableLocation::Base::kDtv) {
      attach.interpreter_data[RBPERF_DATA_EC_MODEL] = RUBY_EC_TLS_DTV;
      attach.interpreter_data[RBPERF_DATA_EC_A] = location->module_id;
      attach.interpreter_data[RBPERF_DATA_EC_B] = static_cast<uint64_t>(location->offset);
    } else {
      attach.interpreter_data[RBPERF_DATA_EC_MODEL] = RUBY_EC_TLS_TP_OFFSET;
      attach.interpreter_data[RBPERF_DATA_EC_A] = static_cast<uint64_t>(location->offset);
    }
    return true;
  }
  attach.interpreter_data[RBPERF_DATA_EC_A] = info.ec.global + bias;
  return true;
}

omniprof_status RubyPlugin::detect(const omniprof_process& process, omniprof_process_attach& attach, char* error) {
  const omniprof_mapping* found = nullptr;
  const RubyFile* info = nullptr;
  const RubyFile* unusable = nullptr;
  for (size_t i = 0; i < process.num_mappings; ++i) {
    const RubyFile* candidate = Files::of(process, i);  // described: a ruby-named file
    if (!candidate) continue;
    if (!candidate->is_ruby) {  // e.g. a ruby executable whose VM is in libruby
      if (candidate->unusable_ruby && !unusable) unusable = candidate;
      continue;
    }
    found = &process.mappings[i];
    info = candidate;
    break;
  }
  const int32_t pid = process.pid;
  if (!found) {
    // A stripped or unknown CRuby: said once per process, and its native
    // frames are walked as any program's.
    if (unusable) log_unsupported(process, unusable->why_not);
    return OMNIPROF_NOT_MINE;
  }
  const rb::RubyVersionOffsets* shipped =
      offsets_table().find(info->version.major, info->version.minor, info->version.patch);
  if (!shipped) {
    log_unsupported(process,
                    "Ruby " + info->version_text + " is not supported (no offsets for " +
                        std::to_string(info->version.major) + "." + std::to_string(info->version.minor) + ")");
    return OMNIPROF_NOT_MINE;
  }
  // The file's symbols and the version's entry must agree on where the EC
  // is (a build with an odd configuration, or an entry that is wrong).
  const bool tls = info->ec.model == RUBY_EC_TLS_DTV || info->ec.model == RUBY_EC_TLS_TP_OFFSET;
  const int64_t expected = shipped->reader.ec_model;
  if (tls ? expected != RUBY_EC_TLS_DTV : expected != static_cast<int64_t>(info->ec.model)) {
    log_unsupported(process, "Ruby " + info->version_text + ": offsets/ruby.yaml says ec_model " +
                                   std::to_string(expected) + ", but " + found->path + " has " +
                                   (tls ? "the thread-local ruby_current_ec" : "no thread-local ruby_current_ec"));
    return OMNIPROF_NOT_MINE;
  }
  // rbperf.bpf.c reads a control frame's first 48 bytes in one go.
  const ruby_offsets& bpf = shipped->bpf;
  if (std::max({bpf.cfp_pc, bpf.cfp_iseq, bpf.cfp_ep}) + 8 > 48 || (bpf.cfp_pc | bpf.cfp_iseq | bpf.cfp_ep) % 8 != 0) {
    log_unsupported(process, "Ruby " + info->version_text + ": offsets/ruby.yaml puts a control frame field past "
                               "the 48 bytes the walk reads, or unaligned");
    return OMNIPROF_NOT_MINE;
  }
  const uint64_t bias = found->load_bias;
  std::string why;
  if (!ec_data(pid, *info, bias, attach, &why)) {
    log_unsupported(process, "Ruby " + info->version_text + ": " + why);
    return OMNIPROF_NOT_MINE;
  }
  if (!store_layout(shipped->bpf, &attach.interpreter_data[RBPERF_DATA_VERSION], error)) return OMNIPROF_ERR_NO_SPACE;
  attach.num_interpreter_ranges = 1;
  attach.interpreter_ranges[0] = {info->vm_exec_range.first + bias, info->vm_exec_range.second + bias};
  std::snprintf(attach.runtime_version, sizeof(attach.runtime_version), "%s", info->version_text.c_str());
  // The interpreter's own native code: the ruby executable and libruby (not
  // C extensions, whose frames stay in the profile).
  for (size_t i = 0; i < process.num_mappings; ++i) {
    if (Files::of(process, i)) omniprof::sdk::add_interpreter_file(attach, process.mappings[i].file_id);
  }
  RubyProcess ruby{*shipped, {}, info->version_text};
  if (info->global_symbols) ruby.addresses.global_symbols = info->global_symbols + bias;
  if (info->vm_pointer) ruby.addresses.vm_pointer = info->vm_pointer + bias;
  if (keep_process(pid, std::move(ruby))) {
    log_.debug("ruby: pid " + std::to_string(pid) + " runs Ruby " + info->version_text + " from " + found->path +
               (info->global_symbols ? "" : " (no ID table found: C functions go unnamed)"));
  }
  return OMNIPROF_OK;
}

omniprof::Result<omniprof::sdk::FrameName> RubyPlugin::name_frame(int32_t pid, const RubyProcess& process,
                                                                  const omniprof_frame_data& frame) {
  auto entry = method_entries_.find({pid, frame.address});
  if (entry == method_entries_.end()) {
    (void)drain_frames_seen();  // noted since the last tick
    entry = method_entries_.find({pid, frame.address});
  }
  rb::RubyFrameRecord record{frame.address, frame.detail, entry == method_entries_.end() ? 0 : entry->second};
  return cache_.name_frame(static_cast<uint32_t>(pid), reader(pid), process.offsets, process.addresses, record);
}

// Takes what the walk noted first since the last drain: (pid, address) and
// its method entry, for symbolize_frame; returns the frames not known before.
std::vector<RubyPlugin::SeenFrame> RubyPlugin::drain_frames_seen() {
  std::vector<SeenFrame> fresh;
  auto known = [this](const rbperf_frame_key& k) { return knows_process(static_cast<int32_t>(k.pid)); };
  for (const auto& [k, method_entry] : omniprof::sdk::take_fresh<rbperf_frame_key, uint64_t>(
           frames_seen_fd_, frames_fresh_fd_, RBPERF_FRAMES_SEEN_ENTRIES, known)) {
    int32_t pid = static_cast<int32_t>(k.pid);
    auto [it, inserted] = method_entries_.insert_or_assign({pid, k.address}, method_entry);
    if (inserted) fresh.push_back({pid, k.address, method_entry});
  }
  return fresh;
}

// Reads the frames the walk met since the last tick, while their processes
// live, so that symbolize_frame can name them after an exit.
void RubyPlugin::tick() {
  for (const SeenFrame& seen : drain_frames_seen()) {
    const RubyProcess* process = process_of(seen.pid);
    if (!process) continue;
    // Reads and caches the iseq or method entry; the line comes later, per
    // frame. The walk notes a C function frame with itself as its entry.
    bool cfunc = seen.address == seen.method_entry;
    rb::RubyFrameRecord record{seen.address, cfunc ? RBPERF_DETAIL_CFUNC : 0u, seen.method_entry};
    (void)cache_.name_frame(static_cast<uint32_t>(seen.pid), reader(seen.pid), process->offsets, process->addresses,
                            record);
  }
}

omniprof_plugin make_entry() {
  omniprof_plugin entry = omniprof::sdk::make_interpreter_plugin_entry<RubyPlugin>(
      "0.1.0", OMNIPROF_MODULE_RBPERF, ruby_bpf__elf_bytes, kPrograms, kStatNames);
  // tick reads only the frames the walks noted: no call every second.
  entry.tick_flags = OMNIPROF_TICK_ON_NOTICE_ONLY;
  return entry;
}

const omniprof_plugin kEntry = make_entry();

}  // namespace

OMNIPROF_DEFINE_PLUGIN(&kEntry)
