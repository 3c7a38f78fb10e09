#include "bpf/map_memory.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace omniprof {

namespace {

// The memlock line of /proc/self/fdinfo/FD; false if the fd closed
// meanwhile or the line is missing.
bool read_memlock(int fd, uint64_t& memlock) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
  std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(path, "re"), &std::fclose);
  if (!in) return false;
  char line[256];
  while (std::fgets(line, sizeof(line), in.get())) {
    if (std::strncmp(line, "memlock:", 8) == 0) {
      memlock = std::strtoull(line + 8, nullptr, 10);
      return true;
    }
  }
  return false;
}

}  // namespace

Result<uint64_t> BpfMapMemory::measure() {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/fd"), &closedir);
  if (!dir) return make_error(fmt::format("cannot list /proc/self/fd: {}", strerror(errno)));
  const int dir_fd = dirfd(dir.get());
  std::unordered_map<uint32_t, uint64_t> held;
  while (const dirent* entry = readdir(dir.get())) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == dir_fd) continue;
    // Most descriptors are the executables held open: the link's target
    // tells a map from them (a prog's or a link's fd would answer bpf()'s
    // info call too, with another struct).
    char target[32];
    const ssize_t n = readlinkat(dir_fd, entry->d_name, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::strcmp(target, "anon_inode:bpf-map") != 0) continue;
    bpf_map_info info{};
    uint32_t size = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &size) != 0) continue;  // closed meanwhile
    if (held.count(info.id)) continue;
    if (auto known = memlock_by_id_.find(info.id); known != memlock_by_id_.end()) {
      held.emplace(info.id, known->second);
      continue;
    }
    uint64_t memlock = 0;
    if (!read_memlock(fd, memlock)) continue;
    ++fdinfo_reads_;
    held.emplace(info.id, memlock);
  }
  memlock_by_id_ = std::move(held);
  uint64_t total = 0;
  for (const auto& [id, bytes] : memlock_by_id_) total += bytes;
  return total;
}

}  // namespace omniprof
