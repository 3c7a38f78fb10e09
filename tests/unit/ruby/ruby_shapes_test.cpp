// shape_ivar_index (plugins/ruby/ruby_shapes.h) on a shape list laid out in
// memory as CRuby 3.2 lays it out: no 3.2 process runs on this machine, so
// the chain walk is checked on memory built here. The memory is built from
// an oracle independent of the shipped offsets (ruby.yaml's "3.2" entry):
// struct rb_shape as Ruby 3.2's shape.h declares it, laid out by this
// compiler for x86-64 LP64, and read back by the walk through the shipped
// offsets. Shipped offsets that disagree with the declaration fail here.
#include "ruby_shapes.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace omniprof::ruby {
namespace {

// The oracle: a source reading of Ruby 3.2's shape.h (v3_2_0 to the 3.2
// branch; the struct did not change within 3.2), written down here
// independently of ruby.yaml. On LP64 SIZEOF_SHAPE_T is 4, so attr_index_t
// and shape_id_t are uint32_t and SHAPE_ID_NUM_BITS is 32:
//
//   struct rb_shape {
//       struct rb_id_table * edges; // id_table from ID (ivar) to next shape
//       ID edge_name; // ID (ivar) for transition from parent to rb_shape
//       attr_index_t next_iv_index;
//       uint32_t capacity; // Total capacity of the object with this shape
//       uint8_t type;
//       uint8_t size_pool_index;
//       shape_id_t parent_id;
//   };
//
// (3.3 appends redblack_node_t *ancestor_index, which 3.2 does not have.)
struct Ruby32Shape {
  uint64_t edges;  // struct rb_id_table *
  uint64_t edge_name;  // ID
  uint32_t next_iv_index;  // attr_index_t
  uint32_t capacity;
  uint8_t type;
  uint8_t size_pool_index;
  uint32_t parent_id;  // shape_id_t
};
static_assert(sizeof(Ruby32Shape) == 32, "rb_shape_t is 32 bytes on LP64");
// shape.h, enum shape_type: SHAPE_ROOT, SHAPE_IVAR, SHAPE_FROZEN,
// SHAPE_CAPACITY_CHANGE, ... (the values the walk meets here).
constexpr uint8_t kTypeRoot = 0;
constexpr uint8_t kTypeIvar = 1;
constexpr uint8_t kTypeCapacityChange = 3;
// shape.h: SHAPE_FLAG_SHIFT is (SIZEOF_VALUE * 8) - SHAPE_ID_NUM_BITS, the
// shape id in the upper half of an object's flags; INVALID_SHAPE_ID is
// SHAPE_MASK, all 32 bits set; ROOT_SHAPE_ID is 0.
constexpr int64_t kShapeFlagShift = 64 - 32;
constexpr uint32_t kInvalid = 0xffffffffu;
constexpr uint32_t kRoot = 0;

constexpr uint64_t kShapeList = 0x7f0000100000;
// IDs of the edges (what the reader would name through the ID table).
constexpr uint64_t kClasspathId = 0x1234a;
constexpr uint64_t kOtherId = 0x2222a;
constexpr uint64_t kAttachedId = 0x3333a;

// vm->shape_list as the oracle lays it out: an array of Ruby32Shape. The
// fields the walk does not read hold a pattern, so that reading one of them
// in place of a field it needs gives nonsense rather than a plausible zero.
class ShapeList {
 public:
  void set(uint32_t id, uint64_t edge, uint32_t next_iv_index, uint8_t type, uint32_t parent) {
    Ruby32Shape shape;
    std::memset(&shape, 0xcc, sizeof(shape));
    shape.edge_name = edge;
    shape.next_iv_index = next_iv_index;
    shape.type = type;
    shape.parent_id = parent;
    shapes_[id] = shape;
  }
  // Reads whole shapes only, at their place in the array.
  ReadMemory reader() const {
    return [this](uint64_t address, void* buffer, std::size_t size) {
      if (address < kShapeList || (address - kShapeList) % sizeof(Ruby32Shape) != 0) return false;
      auto it = shapes_.find(static_cast<uint32_t>((address - kShapeList) / sizeof(Ruby32Shape)));
      if (it == shapes_.end() || size != sizeof(Ruby32Shape)) return false;
      std::memcpy(buffer, &it->second, size);
      return true;
    };
  }

 private:
  std::map<uint32_t, Ruby32Shape> shapes_;
};

RubyReaderOffsets shipped_32() {
  std::ifstream in(OMNIPROF_RUBY_YAML);
  std::stringstream text;
  text << in.rdbuf();
  RubyOffsetsTable table = RubyOffsetsTable::parse(text.str(), OMNIPROF_RUBY_YAML);
  return table.find(3, 2)->reader;
}

TEST(RubyShapes, ShippedShapeOffsetsAreRuby32sDeclaration) {
  const RubyReaderOffsets offsets = shipped_32();
  EXPECT_EQ(offsets.shape_size, static_cast<int64_t>(sizeof(Ruby32Shape)));
  EXPECT_EQ(offsets.shape_edge_name, static_cast<int64_t>(offsetof(Ruby32Shape, edge_name)));
  EXPECT_EQ(offsets.shape_next_iv_index, static_cast<int64_t>(offsetof(Ruby32Shape, next_iv_index)));
  EXPECT_EQ(offsets.shape_type, static_cast<int64_t>(offsetof(Ruby32Shape, type)));
  EXPECT_EQ(offsets.shape_parent_id, static_cast<int64_t>(offsetof(Ruby32Shape, parent_id)));
  EXPECT_EQ(offsets.shape_type_ivar, kTypeIvar);
  EXPECT_EQ(offsets.shape_id_shift, kShapeFlagShift);
}

TEST(RubyShapes, FindsTheIvarIndexAlongTheChainNewestFirst) {
  const RubyReaderOffsets offsets = shipped_32();
  ShapeList list;
  // root <- capacity change <- @other (index 0) <- __classpath__ (1) <- __attached__ (2)
  list.set(kRoot, 0, 0, kTypeRoot, kInvalid);
  list.set(7, 0, 0, kTypeCapacityChange, kRoot);
  list.set(8, kOtherId, 1, kTypeIvar, 7);
  list.set(9, kClasspathId, 2, kTypeIvar, 8);
  list.set(12, kAttachedId, 3, kTypeIvar, 9);
  auto is = [](uint64_t wanted) { return [wanted](uint64_t id) { return id == wanted; }; };
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 12, is(kClasspathId)), 1u);
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 12, is(kAttachedId)), 2u);
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 12, is(kOtherId)), 0u);
  // A shape from before the ivar was set does not have it.
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 8, is(kClasspathId)), std::nullopt);
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, kRoot, is(kClasspathId)), std::nullopt);
}

TEST(RubyShapes, ABrokenChainEndsWithNothingNotALoop) {
  const RubyReaderOffsets offsets = shipped_32();
  ShapeList list;
  auto is_classpath = [](uint64_t id) { return id == kClasspathId; };
  // A cycle (garbage or a shape list being rebuilt under us).
  list.set(3, kOtherId, 1, kTypeIvar, 4);
  list.set(4, kOtherId, 2, kTypeIvar, 3);
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 3, is_classpath), std::nullopt);
  // An unreadable parent.
  list.set(5, kOtherId, 1, kTypeIvar, 99);
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 5, is_classpath), std::nullopt);
  // The name on a transition that is not an ivar (removed): not found.
  list.set(0, 0, 0, kTypeRoot, kInvalid);
  list.set(6, kClasspathId, 1, kTypeCapacityChange, 0);
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 6, is_classpath), std::nullopt);
  // An ivar shape with no index.
  list.set(10, kClasspathId, 0, kTypeIvar, 0);
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 10, is_classpath), std::nullopt);
  // An implausible shape id, no shape list.
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, kShapeList, 0x7fffffff, is_classpath), std::nullopt);
  EXPECT_EQ(shape_ivar_index(list.reader(), offsets, 0, 3, is_classpath), std::nullopt);
}

}  // namespace
}  // namespace omniprof::ruby
