#include "executables/open_executables.h"

#include <fmt/format.h>

namespace omniprof {

void OpenExecutables::sweep() {
  for (auto it = open_.begin(); it != open_.end();) {
    it = it->second.expired() ? open_.erase(it) : std::next(it);
  }
}

Result<OpenExecutables::Identified> OpenExecutables::identify(RegularFile file, const std::string& path) {
  auto id = ids_.file_id(file, path);
  if (!id) return id.error();
  std::lock_guard lock(mutex_);
  if (auto found = open_.find(*id); found != open_.end()) {
    if (auto held = found->second.lock()) {
      stats_.reused++;
      return Identified{*id, std::move(held)};
    }
    open_.erase(found);
  }
  if (open_.size() >= max_open_) sweep();
  if (open_.size() >= max_open_) {
    stats_.not_kept++;
    return Identified{*id, nullptr};
  }
  auto kept = std::make_shared<OpenExecutable>();
  kept->file_id = *id;
  kept->path = fmt::format("/proc/self/fd/{}", file.fd.get());
  kept->fd = std::move(file.fd);
  open_[*id] = kept;
  stats_.opened++;
  return Identified{*id, std::move(kept)};
}

OpenExecutableStats OpenExecutables::stats() const {
  std::lock_guard lock(mutex_);
  OpenExecutableStats s = stats_;
  s.open = 0;
  for (const auto& [id, file] : open_) s.open += file.expired() ? 0 : 1;
  return s;
}

}  // namespace omniprof
