#include "executables/file_id.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>


namespace omniprof {

namespace {

constexpr size_t kSampleBytes = 4096;

Result<size_t> read_at(int fd, uint8_t* buffer, size_t len, off_t offset, const std::string& path) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, buffer + done, len - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(fmt::format("{}: read failed: {}", path, strerror(errno)));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

Result<uint64_t> compute_file_id(const std::string& path) {
  auto file = open_regular_file(path);
  if (!file) return file.error();
  return compute_file_id(*file, path);
}

Result<uint64_t> compute_file_id(const RegularFile& file, const std::string& path) {
  const int fd = file.fd.get();
  uint64_t size = static_cast<uint64_t>(file.st.st_size);

  uint8_t buffer[2 * kSampleBytes + sizeof(uint64_t)];
  auto head = read_at(fd, buffer, kSampleBytes, 0, path);
  if (!head) return head.error();
  size_t used = *head;
  if (size > kSampleBytes) {
    off_t tail_offset = static_cast<off_t>(size > 2 * kSampleBytes ? size - kSampleBytes : kSampleBytes);
    auto tail = read_at(fd, buffer + used, kSampleBytes, tail_offset, path);
    if (!tail) return tail.error();
    used += *tail;
  }
  std::memcpy(buffer + used, &size, sizeof(size));
  used += sizeof(size);
  uint64_t id = XXH3_64bits(buffer, used);
  return id == 0 ? 1 : id;
}

size_t FileIdCache::KeyHash::operator()(const Key& k) const {
  return XXH3_64bits(&k, sizeof(k));
}

Result<uint64_t> FileIdCache::file_id(const std::string& path) {
  auto file = open_regular_file(path);
  if (!file) return file.error();
  return file_id(*file, path);
}

Result<uint64_t> FileIdCache::file_id(const RegularFile& file, const std::string& path) {
  const struct stat& st = file.st;
  Key key{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
  }
  auto id = compute_file_id(file, path);
  if (!id) return id;
  std::lock_guard<std::mutex> lock(mutex_);
  ids_.emplace(key, *id);
  return *id;
}

size_t FileIdCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ids_.size();
}

}  // namespace omniprof
