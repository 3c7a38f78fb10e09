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

std::shared_ptr<const ProcessSnapshot> KnownProcesses::image_for(int32_t pid, std::string_view thread_name,
                                                                 const std::vector<uint64_t>& pcs) const {
  auto current = by_pid.find(pid);
  std::shared_ptr<const ProcessSnapshot> fallback = current == by_pid.end() ? nullptr : current->second;
  auto earlier = earlier_by_pid.find(pid);
  if (earlier == earlier_by_pid.end() || pcs.empty()) return fallback;
  std::vector<std::shared_ptr<const ProcessSnapshot>> images;
  if (fallback) images.push_back(fallback);
  images.insert(images.end(), earlier->second.rbegin(), earlier->second.rend());
  auto maps_all = [&](const ProcessSnapshot& image) {
    for (uint64_t pc : pcs) {
      if (!image.mapping_for(pc)) return false;
    }
    return true;
  };
  // The kernel's name is at most 15 bytes: so is the thread's.
  auto named = [&](const ProcessSnapshot& image) {
    return std::string_view(image.comm).substr(0, 15) == thread_name.substr(0, 15);
  };
  std::shared_ptr<const ProcessSnapshot> mapping_all;
  for (const auto& image : images) {
    if (!maps_all(*image)) continue;
    if (named(*image)) return image;
    if (!mapping_all) mapping_all = image;
  }
  return mapping_all ? mapping_all : fallback;
}

}  // namespace omniprof
