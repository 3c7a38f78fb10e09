// CRuby 3.2's object shapes, as far as naming a class needs them. 3.2 keeps
// a class's instance variables (among them __classpath__ and __attached__,
// which name it) in an array, RCLASS_IVPTR, at the index the class's shape
// gives: the shape id is in the upper half of the class's flags, the shape
// is vm->shape_list[id], and the shape and its ancestors are the ivars set
// on the class, newest first (shape.c rb_shape_get_iv_index). 3.3 moved the
// class path out of the ivars; up to 3.1 they were an st_table.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "ruby_frame_reader.h"
#include "ruby_offsets_table.h"

namespace omniprof::ruby {

// The ivar index of the ivar whose name `is_name` accepts (given the
// edge's ID), on the shape `shape_id` of shape_list (an address in the
// process); nullopt when the chain does not set it, says it was removed, is
// unreadable, or is longer than any real class's.
std::optional<uint32_t> shape_ivar_index(const ReadMemory& read, const RubyReaderOffsets& offsets, uint64_t shape_list,
                                         uint32_t shape_id, const std::function<bool(uint64_t id)>& is_name);

}  // namespace omniprof::ruby
