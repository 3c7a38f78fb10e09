// Folding the interpreter's own native frames into the interpreter frames
// they serve: what a profile reader wants to see of a Python or Ruby program.
//
// A CPython or CRuby stack, as the walkers record it, holds the interpreter's
// C functions around every Python/Ruby frame: the evaluation loop the frame
// runs in, the call machinery between two frames, and whatever the running
// line calls (allocation, long arithmetic, dict lookups). Left in, the
// interpreter's C functions take the self time that belongs to the Python
// function running them (`PyObject_Free` 27%, the function itself nowhere).
// Folded, a sample whose leaf is interpreter code counts as self time of the
// innermost Python/Ruby frame, at its current line.
//
// Which code is "the interpreter's own" is the plugin's answer
// (omniprof_process_attach.interpreter_file_ids: the python or ruby
// executable, libpython, libruby); the host only applies it here, so a third
// party's runtime plugin gets the same folding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace omniprof {

enum class FrameRole : uint8_t {
  kKernel,
  kNative,             // native code of any other file: kept in place
  kInterpreterNative,  // native code of a file the process's plugin names as its own
  kInterpreter,        // a frame a plugin's BPF program produced (Python, Ruby, JIT)
};

// Leaf first. Drops every kInterpreterNative frame that lies leafward of the
// outermost kInterpreter frame: those leafward of the innermost one (their
// samples become its self time) and those between two interpreter frames
// (the evaluation loop and call machinery one runs in). Frames rootward of
// the outermost interpreter frame (main, Py_RunMain, ruby_run_node) stay, as
// do kernel frames and native frames of other files (a C extension, libc,
// libcrypto). A stack without an interpreter frame is left as it is.
// `keep` gets, in order, the indexes of the frames that stay.
void fold_interpreter_frames(const std::vector<FrameRole>& roles, std::vector<uint32_t>& keep);

}  // namespace omniprof
