#include "ruby_shapes.h"

#include <cstring>
#include <vector>

namespace omniprof::ruby {
namespace {

constexpr uint32_t kInvalidShapeId = 0xffffffffu;  // INVALID_SHAPE_ID with 32-bit shape ids: the root's parent
constexpr int kMaxShapeDepth = 1024;                // ivars (and transitions) of one class
constexpr uint32_t kMaxShapeId = 1u << 24;          // 3.2's shape_list holds at most SHAPE_BUFFER_SIZE (2^19)

}  // namespace

std::optional<uint32_t> shape_ivar_index(const ReadMemory& read, const RubyReaderOffsets& offsets, uint64_t shape_list,
                                         uint32_t shape_id, const std::function<bool(uint64_t id)>& is_name) {
  const int64_t size = offsets.shape_size;
  if (size <= 0 || size > 256 || shape_list == 0) return std::nullopt;
  std::vector<uint8_t> shape(static_cast<std::size_t>(size));
  auto field_u32 = [&](int64_t offset) {
    uint32_t value = 0;
    std::memcpy(&value, shape.data() + offset, sizeof(value));
    return value;
  };
  for (int depth = 0; depth < kMaxShapeDepth && shape_id < kMaxShapeId; ++depth) {
    if (!read(shape_list + static_cast<uint64_t>(shape_id) * static_cast<uint64_t>(size), shape.data(), shape.size())) {
      return std::nullopt;
    }
    const uint32_t parent = field_u32(offsets.shape_parent_id);
    if (parent == kInvalidShapeId) return std::nullopt;  // the root shape: no ivar
    uint64_t edge = 0;
    std::memcpy(&edge, shape.data() + offsets.shape_edge_name, sizeof(edge));
    if (is_name(edge)) {
      // Another transition on this name (the ivar removed, ...) hides it.
      if (shape[static_cast<std::size_t>(offsets.shape_type)] != offsets.shape_type_ivar) return std::nullopt;
      const uint32_t next_index = field_u32(offsets.shape_next_iv_index);
      if (next_index == 0) return std::nullopt;
      return next_index - 1;
    }
    shape_id = parent;
  }
  return std::nullopt;
}

}  // namespace omniprof::ruby
