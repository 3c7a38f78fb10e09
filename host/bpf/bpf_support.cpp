#include "bpf/bpf_support.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <vector>

#include "bpf/perf_sampler.h"
#include "log/logger.h"
#include "omniprof/plugin.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {

namespace {

bool has_capability(int cap) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}

std::mutex g_log_mutex;
std::deque<std::string> g_log_tail;

int libbpf_print(enum libbpf_print_level level, const char* format, va_list args) {
  // One call can carry a whole verifier log: split it into lines.
  char* text = nullptr;
  if (vasprintf(&text, format, args) < 0) return 0;
  std::string message(text);
  free(text);
  size_t start = 0;
  while (start < message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    std::string line = message.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    {
      std::lock_guard<std::mutex> lock(g_log_mutex);
      g_log_tail.push_back(line);
      if (g_log_tail.size() > 64) g_log_tail.pop_front();
    }
    if (level == LIBBPF_WARN) {
      log().debug("libbpf: {}", line);  // surfaced by the caller with its context
    } else {
      log().trace("libbpf: {}", line);
    }
  }
  return 0;
}

}  // namespace

void install_libbpf_logging() { libbpf_set_print(libbpf_print); }

std::string take_libbpf_log_tail(size_t max_lines) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  // Keep what explains the failure: the verifier's verdict sits just above
  // its statistics and the end marker, which say nothing about the cause.
  std::vector<std::string> useful;
  for (const auto& line : g_log_tail) {
    if (line.empty() || line.rfind("processed ", 0) == 0 || line.find("-- END PROG LOAD LOG --") != std::string::npos ||
        line.rfind("verification time", 0) == 0 || line.rfind("stack depth", 0) == 0) {
      continue;
    }
    useful.push_back(line);
  }
  g_log_tail.clear();
  std::string out;
  size_t start = useful.size() > max_lines ? useful.size() - max_lines : 0;
  for (size_t i = start; i < useful.size(); ++i) {
    if (!out.empty()) out += " | ";
    out += useful[i];
  }
  return out;
}

Result<void> check_bpf_usable() {
  constexpr int kCapPerfmon = 38, kCapBpf = 39;
  if (geteuid() != 0 && !(has_capability(kCapBpf) && has_capability(kCapPerfmon))) {
    return make_error(
        "omniprof needs root (or CAP_BPF and CAP_PERFMON) to load BPF programs: run it with sudo");
  }
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
    return make_error(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): omniprof needs a kernel "
        "built with CONFIG_DEBUG_INFO_BTF=y (5.10 or later)");
  }
  if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, nullptr) != 1) {
    return make_error(
        "BPF perf_event programs cannot be loaded here (seccomp, a container without CAP_BPF, or "
        "kernel.unprivileged_bpf_disabled): run omniprof as root on the host");
  }
  auto cpus = online_cpus();
  if (!cpus) return cpus.error();
  auto event = open_cpu_clock_event(cpus->front(), 1);
  if (!event) {
    std::string paranoid;
    std::ifstream("/proc/sys/kernel/perf_event_paranoid") >> paranoid;
    return make_error(fmt::format(
        "perf events are unavailable: {} (kernel.perf_event_paranoid={}); run as root, or lower "
        "it with sysctl kernel.perf_event_paranoid=-1",
        event.error().message, paranoid.empty() ? "?" : paranoid));
  }
  return ok();
}

bool set_rodata_u32(bpf_object* object, const char* variable, uint32_t value) {
  bpf_map* rodata = nullptr;
  bpf_map* map = nullptr;
  bpf_object__for_each_map(map, object) {
    const char* name = bpf_map__name(map);
    size_t len = strlen(name);
    if (len >= 7 && strcmp(name + len - 7, ".rodata") == 0) rodata = map;
  }
  btf* types = bpf_object__btf(object);
  if (!rodata || !types) return false;
  int sec_id = btf__find_by_name_kind(types, ".rodata", BTF_KIND_DATASEC);
  if (sec_id < 0) return false;
  const btf_type* sec = btf__type_by_id(types, sec_id);
  const btf_var_secinfo* vars = btf_var_secinfos(sec);
  size_t size = 0;
  auto* data = static_cast<uint8_t*>(const_cast<void*>(bpf_map__initial_value(rodata, &size)));
  for (int i = 0; i < btf_vlen(sec); ++i) {
    const btf_type* var = btf__type_by_id(types, vars[i].type);
    if (strcmp(btf__name_by_offset(types, var->name_off), variable) != 0) continue;
    if (vars[i].size != sizeof(uint32_t) || vars[i].offset + sizeof(uint32_t) > size) return false;
    memcpy(data + vars[i].offset, &value, sizeof(value));
    return true;
  }
  return false;
}

bool perf_event_programs_take_unpreallocated_maps() {
  static const bool taken = [] {
    if (kernel_feature_hidden("unpreallocated_maps")) return false;
    LIBBPF_OPTS(bpf_map_create_opts, map_opts, .map_flags = BPF_F_NO_PREALLOC);
    UniqueFd map(bpf_map_create(BPF_MAP_TYPE_HASH, "omniprof_probe", 4, 8, 1, &map_opts));
    if (!map.valid()) return false;
    // *(u32 *)(r10 - 4) = 0; bpf_map_lookup_elem(map, r10 - 4); return 0.
    const bpf_insn program[] = {
        {.code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .src_reg = 0, .off = -4, .imm = 0},
        {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10, .off = 0, .imm = 0},
        {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .src_reg = 0, .off = 0, .imm = -4},
        {.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD, .off = 0,
         .imm = map.get()},
        {.code = 0, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
        {.code = BPF_JMP | BPF_CALL, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = BPF_FUNC_map_lookup_elem},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    UniqueFd loaded(bpf_prog_load(BPF_PROG_TYPE_PERF_EVENT, "omniprof_probe", "GPL", program,
                                  sizeof(program) / sizeof(program[0]), nullptr));
    return loaded.valid();
  }();
  return taken;
}

bool kernel_feature_hidden(const char* feature) {
  const char* hidden = std::getenv("OMNIPROF_HIDE_BPF_FEATURES");
  return hidden && std::strstr(hidden, feature);
}

uint32_t kernel_features() {
  static const uint32_t features = [] {
    uint32_t f = 0;
    if (!kernel_feature_hidden("bpf_loop") && libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, nullptr) == 1) {
      f |= OMNIPROF_PROGRAM_NEEDS_BPF_LOOP;
    }
    return f;
  }();
  return features;
}

}  // namespace omniprof
