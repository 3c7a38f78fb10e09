// Header-only helpers for a plugin's own BPF maps (the host API's
// private_map_fd), on libbpf's syscall wrappers: what an interpreter plugin
// does with them, written once.
#pragma once

#include <bpf/bpf.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace omniprof::sdk {

// Takes up to `max_entries` entries out of a hash map the BPF side fills
// (e.g. "frames seen since the last tick"): reads each key and value, then
// deletes it. An entry the BPF side adds meanwhile stays for the next call.
template <typename Key, typename Value>
std::vector<std::pair<Key, Value>> drain_map(int fd, size_t max_entries) {
  std::vector<std::pair<Key, Value>> entries;
  if (fd < 0) return entries;
  Key key{}, next{};
  const Key* cursor = nullptr;
  while (entries.size() < max_entries && bpf_map_get_next_key(fd, cursor, &next) == 0) {
    Value value{};
    if (bpf_map_lookup_elem(fd, &next, &value) == 0) entries.push_back({next, value});
    key = next;
    cursor = &key;
  }
  for (const auto& entry : entries) bpf_map_delete_elem(fd, &entry.first);
  return entries;
}

// Takes the objects a walk met first since the last call, from the maps
// OMNIPROF_SEEN_MAP(NAME) defines (bpf/unwinder.bpf.h): drains NAME_fresh
// (`fresh_fd`) and returns the entries `wanted` accepts. One it refuses (a
// process the plugin does not know yet) is taken out of NAME (`seen_fd`)
// too, so that the walk notes it again the next time it meets it.
template <typename Key, typename Value, typename Wanted>
std::vector<std::pair<Key, Value>> take_fresh(int seen_fd, int fresh_fd, size_t max_entries, Wanted&& wanted) {
  std::vector<std::pair<Key, Value>> taken;
  for (auto& entry : drain_map<Key, Value>(fresh_fd, max_entries)) {
    if (wanted(entry.first)) {
      taken.push_back(entry);
    } else if (seen_fd >= 0) {
      bpf_map_delete_elem(seen_fd, &entry.first);
    }
  }
  return taken;
}

// The slots of an array map holding one layout struct per runtime version
// (python_offsets, ruby_offsets): the same layout shares a slot, a new one
// takes the next free slot. Not thread-safe (the host serializes a plugin's
// hooks).
template <typename Layout>
class LayoutSlots {
 public:
  LayoutSlots(int fd, uint32_t capacity, std::string map_name)
      : fd_(fd), capacity_(capacity), map_name_(std::move(map_name)) {}

  // The slot of `layout`, written to the map the first time; nullopt with
  // `*error` set when the map is full or cannot be written.
  std::optional<uint32_t> slot_of(const Layout& layout, std::string* error) {
    for (size_t i = 0; i < stored_.size(); ++i) {
      if (std::memcmp(&stored_[i], &layout, sizeof(Layout)) == 0) return static_cast<uint32_t>(i);
    }
    if (stored_.size() >= capacity_) {
      *error = map_name_ + " is full (" + std::to_string(capacity_) + " layouts)";
      return std::nullopt;
    }
    uint32_t slot = static_cast<uint32_t>(stored_.size());
    if (fd_ < 0 || bpf_map_update_elem(fd_, &slot, &layout, BPF_ANY) != 0) {
      *error = "cannot write " + map_name_ + "[" + std::to_string(slot) + "]: " + std::strerror(errno);
      return std::nullopt;
    }
    stored_.push_back(layout);
    return slot;
  }

 private:
  int fd_;
  uint32_t capacity_;
  std::string map_name_;
  std::vector<Layout> stored_;
};

}  // namespace omniprof::sdk
