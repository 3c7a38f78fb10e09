#include "process/process_snapshot.h"

#include <functional>

namespace omniprof {

const ProcMapping* ProcessSnapshot::mapping_for(uint64_t address) const {
  return find_mapping(mappings, address);
}

const ExecutableRef* ProcessSnapshot::executable_for(const ProcMapping& mapping) const {
  // std::less: a total order even for a pointer into another snapshot.
  const std::less<const ProcMapping*> before;
  const ProcMapping* first = mappings.data();
  if (before(&mapping, first) || !before(&mapping, first + mappings.size())) return nullptr;
  const size_t index = static_cast<size_t>(&mapping - first);
  return index < executables.size() ? &executables[index] : nullptr;
}

std::string ProcessSnapshot::host_path(const ProcMapping& mapping) const {
  if (mapping.path == "[vdso]") return vdso_path;
  const ExecutableRef* ref = executable_for(mapping);
  if (!ref) return {};
  if (ref->file) return ref->path;
  // map_files (or /proc/PID/root) of a process that exited names nothing.
  return exited ? std::string() : ref->path;
}

const ProcessSnapshot* KnownProcesses::find(int32_t pid) const {
  auto it = by_pid.find(pid);
  return it == by_pid.end() ? nullptr : it->second.get();
}

}  // namespace omniprof
