// pyperf: the Python plugin. Its BPF program (pyperf.bpf.c) walks the
// sampled thread's CPython frames; this side finds CPython in a process
// (the executable or a libpython it maps), gives the walk the addresses and
// offsets of that version, reads the code objects the walk met while the
// process lives (tick), and names the frames (symbolize_frame).
//
// Threading: the host holds this instance's lock for every hook call
// (plugin.h), so nothing here takes a lock of its own beyond what the
// reader's cache does.
#include <bpf/bpf.h>
#include <elf.h>
#include <omniprof/interpreter_plugin.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "omniprof/offsets.hpp"
#include "omniprof/private_maps.hpp"
#include "omniprof/support/elf_file.h"
#include "pyperf.h"
#include "python.skel.h"
#include "python_code_reader.h"
#include "python_debug_offsets.h"
#include "python_eval_loop.h"
#include "python_offsets.h"
#include "python_offsets_table.h"
#include "python_version.h"

namespace {

using omniprof::python::PythonVersionOffsets;
namespace py = omniprof::python;

// bpf_loop walk where the kernel has it (5.17+), else the tail-call one.
const omniprof_program_slot kPrograms[] = {
    {"python_unwind_loop", OMNIPROF_SLOT_PYTHON, OMNIPROF_PROGRAM_NEEDS_BPF_LOOP},
    {"python_unwind", OMNIPROF_SLOT_PYTHON, 0},
};

// In the order of enum pyperf_stat.
const char* const kStatNames[] = {
    "samples",        "frames",        "no_offsets",        "no_thread_state",     "read_failed",
    "truncated",      "gil_held",      "gil_released",      "code_seen_full",
};
static_assert(sizeof(kStatNames) / sizeof(kStatNames[0]) == PYPERF_STAT_END - PYPERF_STAT_SAMPLES);

const char* const kLabelValues[] = {nullptr, "held", "released"};

// What one file (by file id) says about CPython: nothing, or where its
// interpreter lives. Read once per file.
struct PythonFile {
  bool is_python = false;
  std::string why_not;  // for a python-named file that is not usable
  py::PythonVersion version;
  std::vector<std::pair<uint64_t, uint64_t>> eval_ranges;  // ELF vaddr [start, end)
  std::optional<uint64_t> runtime;                         // _PyRuntime (3.7+)
  std::optional<uint64_t> interp_head;                     // interp_head (2.7, 3.6)
  std::optional<uint64_t> current_tstate;                  // _PyThreadState_Current (2.7, 3.6)
  std::optional<uint64_t> gil_locked, gil_last_holder;     // 3.6 statics
};

struct PythonProcess {
  PythonVersionOffsets offsets;
  std::string version;
};

// A name the process gives a CPython file: libpython3.11.so.1.0,
// libpython2.7.so, python3.11, python2.7, python3.
constexpr const char* kPythonFileName = R"(^(lib)?python[23](\.[0-9]+)?[a-z]*(\.so.*|-.*)?$)";

class PythonPlugin
    : public omniprof::sdk::InterpreterPlugin<PythonPlugin, PythonFile, PythonProcess, py::PythonOffsetsTable> {
 public:
  static constexpr const char* kRuntime = "python";

  // Layouts in python_offsets: the slot is the key the walk reads.
  PythonPlugin(const omniprof_host_api* host, py::PythonOffsetsTable table)
      : InterpreterPlugin(host, kPythonFileName, std::move(table), "python_offsets", PYTHON_MAX_VERSIONS),
        code_seen_fd_(host->private_map_fd(host->host, "python_code_seen")),
        code_fresh_fd_(host->private_map_fd(host->host, "python_code_seen_fresh")) {}

  static PythonFile read_file(const std::string& path, const std::string& name);
  omniprof_status detect(const omniprof_process& process, omniprof_process_attach& attach, char* error);
  omniprof::Result<omniprof::sdk::FrameName> name_frame(int32_t pid, const PythonProcess& process,
                                                        const omniprof_frame_data& frame) {
    return cache_.name_frame(static_cast<uint32_t>(pid), reader(pid), process.offsets, frame.address, frame.detail);
  }
  void forget_process(int32_t pid) {
    cache_.drop_pid(static_cast<uint32_t>(pid));
    trusted_logged_.erase(pid);
  }
  void tick();

 private:
  using Files = omniprof::sdk::DescribedFiles<PythonFile>;

  // The newest MAJOR.MINOR python.yaml has ({3, 15}).
  std::pair<int, int> newest_known_version() const {
    std::pair<int, int> newest{0, 0};
    for (const auto& entry : offsets_table().versions()) newest = std::max(newest, {entry.major, entry.minor});
    return newest;
  }
  std::string newest_known() const {
    const auto [major, minor] = newest_known_version();
    return std::to_string(major) + "." + std::to_string(minor);
  }
  bool is_newer_than_known(const py::PythonVersion& version) const {
    return std::make_pair(version.major, version.minor) > newest_known_version();
  }
  // The entry of the version the _Py_DebugOffsets at `runtime` (in pid)
  // declare, if python.yaml has it with debug_* positions; else nullptr and
  // `why` says what was found.
  const PythonVersionOffsets* declared_layout(int32_t pid, uint64_t runtime, std::string& why) {
    why = "newer than " + newest_known();
    uint8_t head[py::kPyDebugOffsetsVersionAt + 8];
    if (runtime == 0) {
      why += ", and no _PyRuntime to read its _Py_DebugOffsets from";
      return nullptr;
    }
    if (!reader(pid)(runtime, head, sizeof head)) {
      why += ", and its _Py_DebugOffsets cannot be read";
      return nullptr;
    }
    if (std::memcmp(head, "xdebugpy", 8) != 0) {
      why += ", and _PyRuntime starts with no _Py_DebugOffsets";
      return nullptr;
    }
    uint64_t declared;
    std::memcpy(&declared, head + py::kPyDebugOffsetsVersionAt, sizeof declared);
    const int major = static_cast<int>(declared >> 24 & 0xff), minor = static_cast<int>(declared >> 16 & 0xff);
    const PythonVersionOffsets* entry = offsets_table().find(major, minor);
    if (!entry || entry->reader.debug_offsets_size <= 0) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%08llx", static_cast<unsigned long long>(declared));
      why += ", and its _Py_DebugOffsets declare version " + std::to_string(major) + "." + std::to_string(minor) +
             " (" + hex + "), not a layout this plugin reads";
      return nullptr;
    }
    return entry;
  }

  int code_seen_fd_ = -1;   // every code object the walk met (OMNIPROF_SEEN_MAP)
  int code_fresh_fd_ = -1;  // those met first since the last tick
  py::PythonCodeCache cache_;
  std::set<int32_t> trusted_logged_;  // pids of newer versions said to be profiled on trust
};

// The symbols read_file looks for, by name: one pass over the file's symbol
// tables rather than one per name.
const char* const kWantedSymbols[] = {
    "_PyEval_EvalFrameDefault", "_PyEval_EvalFrameDefault.cold", "PyEval_EvalFrameEx", "PyEval_EvalFrameEx.cold",
    "_PyRuntime", "interp_head", "_PyThreadState_Current", "gil_locked", "gil_last_holder",
};

// Fills `info` from the ELF file at `path` (named `name` in the process);
// returns why it is not a usable CPython, empty when it is.
std::string read_python_file(const std::string& path, const std::string& name, PythonFile& info) {
  auto elf = omniprof::ElfFile::open(path);
  if (!elf) return elf.error().message;
  std::map<std::string, omniprof::ElfSymbol, std::less<>> found;
  std::vector<uint64_t> function_starts;  // for a stripped loop's unnamed cold part, below
  auto visited = elf->for_each_symbol(omniprof::SymbolKinds::kFunctionsAndObjects, [&](const omniprof::ElfSymbol& s) {
    for (const char* wanted : kWantedSymbols) {
      if (s.name == wanted) found.try_emplace(s.name, s);  // the first (.symtab or .dynsym) wins
    }
    if (s.type == STT_FUNC || s.type == STT_GNU_IFUNC) function_starts.push_back(s.value);
    return true;
  });
  if (!visited) return visited.error().message;
  auto symbol = [&](const std::string& wanted) -> const omniprof::ElfSymbol* {
    auto it = found.find(wanted);
    return it == found.end() ? nullptr : &it->second;
  };
  // 2.7 has only PyEval_EvalFrameEx, the loop itself; in 3.x it just calls
  // _PyEval_EvalFrameDefault: marking both would give one Python frame two marks.
  const std::string loop = symbol("_PyEval_EvalFrameDefault") ? "_PyEval_EvalFrameDefault" : "PyEval_EvalFrameEx";
  const omniprof::ElfSymbol* eval = symbol(loop);
  if (!eval) return name + ": no CPython evaluation loop symbol";
  auto version = py::read_python_version(*elf);
  if (!version) return version.error().message;
  info.is_python = true;
  info.version = *version;
  info.eval_ranges.push_back({eval->value, eval->value + std::max<uint64_t>(eval->size, 1)});
  // GCC moves the loop's unlikely paths into a .cold part, named in .symtab
  // only: a stripped build's is found from the loop's branches into it
  // (python_eval_loop.h).
  if (const auto* cold = symbol(loop + ".cold")) {
    info.eval_ranges.push_back({cold->value, cold->value + std::max<uint64_t>(cold->size, 1)});
  } else if (eval->size > 0) {
    std::sort(function_starts.begin(), function_starts.end());
    auto parts = py::unnamed_cold_parts(*elf, path, eval->value, eval->size, [&](uint64_t address) {
      return std::binary_search(function_starts.begin(), function_starts.end(), address);
    });
    if (!parts) return name + ": " + parts.error().message;
    for (const py::CodeRange& part : *parts) info.eval_ranges.push_back({part.begin, part.end});
  }
  if (const auto* s = symbol("_PyRuntime")) info.runtime = s->value;
  if (const auto* s = symbol("interp_head")) info.interp_head = s->value;
  if (const auto* s = symbol("_PyThreadState_Current")) info.current_tstate = s->value;
  if (const auto* s = symbol("gil_locked")) info.gil_locked = s->value;
  if (const auto* s = symbol("gil_last_holder")) info.gil_last_holder = s->value;
  return "";
}

PythonFile PythonPlugin::read_file(const std::string& path, const std::string& name) {
  PythonFile info;
  info.why_not = read_python_file(path, name, info);
  return info;
}

omniprof_status PythonPlugin::detect(const omniprof_process& process, omniprof_process_attach& attach,
                                     char* error) {
  const omniprof_mapping* found = nullptr;
  const PythonFile* info = nullptr;
  for (size_t i = 0; i < process.num_mappings; ++i) {
    const PythonFile* candidate = Files::of(process, i);  // described: a python-named file
    if (!candidate || !candidate->is_python) continue;  // pyenv's python3.X executable: the loop is in libpython
    found = &process.mappings[i];
    info = candidate;
    const char* name = process.mapping_names ? process.mapping_names[i] : process.mappings[i].path;
    // A libpython wins over the executable that maps it (there is only one
    // interpreter loop per process in practice).
    if (name && std::string(name).find("libpython") != std::string::npos) break;
  }
  if (!found) return OMNIPROF_NOT_MINE;

  const int32_t pid = process.pid;
  const std::string version = info->version.to_string();
  const uint64_t bias = found->load_bias;
  const PythonVersionOffsets* shipped = offsets_table().find(info->version.major, info->version.minor);
  // Newer than every entry (3.16 and on): profiled only with the layout its
  // own _Py_DebugOffsets declare, when that is one the YAML has (the struct
  // changes with each minor version, so a declared 3.16 is refused).
  const bool newer = !shipped && is_newer_than_known(info->version);
  if (!shipped) {
    std::string why = "no offsets for " + std::to_string(info->version.major) + "." +
                      std::to_string(info->version.minor);
    if (newer) shipped = declared_layout(pid, info->runtime ? *info->runtime + bias : 0, why);
    if (!shipped) {
      log_unsupported(process, "CPython " + version + " is not supported (" + why + ")");
      return OMNIPROF_NOT_MINE;
    }
  }
  PythonVersionOffsets offsets = *shipped;
  // 3.13+: the process says its own layout (_Py_DebugOffsets at the start of
  // _PyRuntime, read with the shipped entry's debug_* positions); the
  // shipped table is the fallback, but not for a newer version.
  bool from_process = false;
  std::string unusable = "no _PyRuntime";
  if (shipped->reader.debug_offsets_size > 0 && info->runtime) {
    std::vector<uint8_t> image(static_cast<std::size_t>(
        std::min<int64_t>(shipped->reader.debug_offsets_size, py::kPyDebugOffsetsMaxSize)));
    unusable = "cannot be read";
    if (reader(pid)(*info->runtime + bias, image.data(), image.size())) {
      auto debug = py::parse_py_debug_offsets(image, *shipped);
      if (debug && py::apply_py_debug_offsets(*debug, offsets)) {
        from_process = true;
      } else if (debug) {
        unusable = "an offset does not fit its field";
      } else {
        unusable = debug.error().message;
        log_.debug("python: pid " + std::to_string(pid) + ": _Py_DebugOffsets unusable (" + unusable +
                   "), using the shipped offsets");
      }
    }
  }
  if (newer) {
    const std::string layout = std::to_string(shipped->major) + "." + std::to_string(shipped->minor);
    if (!from_process) {
      log_unsupported(process, "CPython " + version + " is not supported (newer than " + newest_known() +
                                   ", and its _Py_DebugOffsets, declared " + layout + "'s, are unusable: " +
                                   unusable + ")");
      return OMNIPROF_NOT_MINE;
    }
    if (trusted_logged_.insert(pid).second) {
      log_.info("python: pid " + std::to_string(pid) + " (" + (process.comm ? process.comm : "?") + "): CPython " +
                version + " is newer than the newest this plugin knows (" + newest_known() +
                "); profiled with the offsets its _Py_DebugOffsets give, trusted as " + layout + "'s layout");
    }
  }

  // Where the walk starts and how it reads the GIL.
  uint64_t interp_head = 0, gil_a = 0, gil_b = 0;
  if (info->runtime && offsets.reader.runtime_interpreters_head >= 0) {
    interp_head = *info->runtime + bias + offsets.reader.runtime_interpreters_head;
  } else if (info->interp_head) {
    interp_head = *info->interp_head + bias;
  }
  switch (offsets.bpf.gil_model) {
    case PYTHON_GIL_CURRENT_TSTATE:
      if (info->current_tstate) gil_a = *info->current_tstate + bias;
      break;
    case PYTHON_GIL_STATIC:
      if (info->runtime && offsets.reader.runtime_ceval_gil_locked >= 0) {
        gil_a = *info->runtime + bias + offsets.reader.runtime_ceval_gil_locked;
        gil_b = *info->runtime + bias + offsets.reader.runtime_ceval_gil_last_holder;
      } else if (info->gil_locked && info->gil_last_holder) {
        gil_a = *info->gil_locked + bias;
        gil_b = *info->gil_last_holder + bias;
      }
      break;
    default:
      break;
  }
  if (interp_head == 0) {
    log_unsupported(process, "CPython " + version + ": neither _PyRuntime nor interp_head found in " +
                        std::string(found->path));
    return OMNIPROF_NOT_MINE;
  }
  py::set_derived_offsets(offsets);
  if (!store_layout(offsets.bpf, &attach.interpreter_data[PYPERF_DATA_VERSION], error)) return OMNIPROF_ERR_NO_SPACE;
  attach.interpreter_data[PYPERF_DATA_INTERP_HEAD] = interp_head;
  attach.interpreter_data[PYPERF_DATA_GIL_A] = gil_a;
  attach.interpreter_data[PYPERF_DATA_GIL_B] = gil_b;
  attach.num_interpreter_ranges = 0;
  for (const auto& [start, end] : info->eval_ranges) {
    if (attach.num_interpreter_ranges == OMNIPROF_MAX_INTERPRETER_RANGES) break;
    attach.interpreter_ranges[attach.num_interpreter_ranges++] = {start + bias, end + bias};
  }
  std::snprintf(attach.runtime_version, sizeof(attach.runtime_version), "%s", version.c_str());
  // The interpreter's own native code: the python executable and libpython
  // (not extension modules, whose frames stay in the profile).
  for (size_t i = 0; i < process.num_mappings; ++i) {
    if (Files::of(process, i)) omniprof::sdk::add_interpreter_file(attach, process.mappings[i].file_id);
  }
  if (keep_process(pid, PythonProcess{offsets, version})) {
    log_.debug("python: pid " + std::to_string(pid) + " runs CPython " + version + " (" +
               (from_process ? "offsets from its _Py_DebugOffsets" : "shipped offsets") + ")");
  }
  return OMNIPROF_OK;
}

// Reads the code objects the walk met first since the last tick, while
// their processes live, so that symbolize_frame can name them after an exit.
void PythonPlugin::tick() {
  auto known = [this](const pyperf_code_key& k) { return process_of(static_cast<int32_t>(k.pid)) != nullptr; };
  for (const auto& [k, seen] : omniprof::sdk::take_fresh<pyperf_code_key, uint8_t>(
           code_seen_fd_, code_fresh_fd_, PYPERF_CODE_SEEN_ENTRIES, known)) {
    int32_t pid = static_cast<int32_t>(k.pid);
    // Reads and caches the code object; the line comes later, per frame.
    (void)cache_.name_frame(k.pid, reader(pid), process_of(pid)->offsets, k.code, 0);
  }
}

omniprof_plugin make_entry() {
  omniprof_plugin entry = omniprof::sdk::make_interpreter_plugin_entry<PythonPlugin>(
      "0.1.0", OMNIPROF_MODULE_PYPERF, python_bpf__elf_bytes, kPrograms, kStatNames);
  // tick reads only the code objects the walks noted: no call every second.
  entry.tick_flags = OMNIPROF_TICK_ON_NOTICE_ONLY;
  entry.label_key = "python_gil";
  entry.label_values = kLabelValues;
  entry.num_label_values = sizeof(kLabelValues) / sizeof(kLabelValues[0]);
  return entry;
}

const omniprof_plugin kEntry = make_entry();

}  // namespace

OMNIPROF_DEFINE_PLUGIN(&kEntry)
