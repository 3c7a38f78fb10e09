#include "agent/stack_folding.h"

#include <cstddef>

namespace omniprof {

void fold_interpreter_frames(const std::vector<FrameRole>& roles, std::vector<uint32_t>& keep) {
  keep.clear();
  size_t outermost = roles.size();  // none
  for (size_t i = roles.size(); i-- > 0;) {
    if (roles[i] == FrameRole::kInterpreter) {
      outermost = i;
      break;
    }
  }
  for (size_t i = 0; i < roles.size(); ++i) {
    if (i < outermost && outermost != roles.size() && roles[i] == FrameRole::kInterpreterNative) continue;
    keep.push_back(static_cast<uint32_t>(i));
  }
}

}  // namespace omniprof
