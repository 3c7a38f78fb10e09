// shape_ivar_index (plugins/ruby/ruby_shapes.h) on a shape list laid out in
// memory as CRuby 3.2 lays it out (the shipped 3.2 offsets): no 3.2 process
// runs on this machine, so the chain walk is checked on memory built here.
#include "ruby_shapes.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace omniprof::ruby {
namespace {

constexpr uint64_t kShapeList = 0x7f0000100000;
constexpr uint32_t kRoot = 0;
constexpr uint32_t kInvalid = 0xffffffffu;
constexpr uint8_t kTypeRoot = 0;
constexpr uint8_t kTypeIvar = 1;
constexpr uint8_t kTypeCapacityChange = 3;
// IDs of the edges (what the reader would name through the ID table).
constexpr uint64_t kClasspathId = 0x1234a;
constexpr uint64_t kOtherId = 0x2222a;
constexpr uint64_t kAttachedId = 0x3333a;

class ShapeList {
 public:
  explicit ShapeList(const RubyReaderOffsets& offsets) : o_(offsets) {}
  void set(uint32_t id, uint64_t edge, uint32_t next_iv_index, uint8_t type, uint32_t parent) {
    std::vector<uint8_t> shape(static_cast<std::size_t>(o_.shape_size), 0xcc);
    std::memcpy(shape.data() + o_.shape_edge_name, &edge, 8);
    std::memcpy(shape.data() + o_.shape_next_iv_index, &next_iv_index, 4);
    shape[static_cast<std::size_t>(o_.shape_type)] = type;
    std::memcpy(shape.data() + o_.shape_parent_id, &parent, 4);
    shapes_[id] = shape;
  }
  ReadMemory reader() const {
    return [this](uint64_t address, void* buffer, std::size_t size) {
      if (address < kShapeList || (address - kShapeList) % o_.shape_size != 0) return false;
      auto it = shapes_.find(static_cast<uint32_t>((address - kShapeList) / o_.shape_size));
      if (it == shapes_.end() || size != it->second.size()) return false;
      std::memcpy(buffer, it->second.data(), size);
      return true;
    };
  }

 private:
  const RubyReaderOffsets& o_;
  std::map<uint32_t, std::vector<uint8_t>> shapes_;
};

RubyReaderOffsets shipped_32() {
  std::ifstream in(OMNIPROF_RUBY_YAML);
  std::stringstream text;
  text << in.rdbuf();
  RubyOffsetsTable table = RubyOffsetsTable::parse(text.str(), OMNIPROF_RUBY_YAML);
  return table.find(3, 2)->reader;
}

TEST(RubyShapes, FindsTheIvarIndexAlongTheChainNewestFirst) {
  const RubyReaderOffsets offsets = shipped_32();
  ASSERT_EQ(offsets.shape_size, 32);
  ShapeList list(offsets);
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
  ShapeList list(offsets);
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
