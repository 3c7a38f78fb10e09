#include "python_debug_offsets.h"

#include <cstdio>
#include <cstring>

namespace omniprof::python {
namespace {

// The 3.13 struct: after the cookie, uint64_t words in this order
// (Include/internal/pycore_runtime.h of 3.13).
enum Word : std::size_t {
  kVersion,
  kFreeThreaded,
  kRuntimeSize,
  kRuntimeFinalizing,
  kRuntimeInterpretersHead,
  kInterpSize,
  kInterpId,
  kInterpNext,
  kInterpThreadsHead,
  kInterpGc,
  kInterpImportsModules,
  kInterpSysdict,
  kInterpBuiltins,
  kInterpCevalGil,
  kInterpGilRuntimeState,
  kInterpGilRuntimeStateEnabled,
  kInterpGilRuntimeStateLocked,
  kInterpGilRuntimeStateHolder,
  kTstateSize,
  kTstatePrev,
  kTstateNext,
  kTstateInterp,
  kTstateCurrentFrame,
  kTstateThreadId,
  kTstateNativeThreadId,
  kTstateDatastackChunk,
  kTstateStatus,
  kFrameSize,
  kFramePrevious,
  kFrameExecutable,
  kFrameInstrPtr,
  kFrameLocalsplus,
  kFrameOwner,
  kCodeSize,
  kCodeFilename,
  kCodeName,
  kCodeQualname,
  kCodeLinetable,
  kCodeFirstlineno,
  kCodeArgcount,
  kCodeLocalsplusnames,
  kCodeLocalspluskinds,
  kCodeCoCodeAdaptive,
  kPyobjectSize,
  kPyobjectObType,
  kTypeSize,
  kTypeTpName,
  kTypeTpRepr,
  kTypeTpFlags,
  kTupleSize,
  kTupleObItem,
  kTupleObSize,
  kListSize,
  kListObItem,
  kListObSize,
  kDictSize,
  kDictMaKeys,
  kDictMaValues,
  kFloatSize,
  kFloatObFval,
  kLongSize,
  kLongLvTag,
  kLongObDigit,
  kBytesSize,
  kBytesObSize,
  kBytesObSval,
  kUnicodeSize,
  kUnicodeState,
  kUnicodeLength,
  kUnicodeAsciiobjectSize,
  kGcSize,
  kGcCollecting,
  kWordCount,
};
static_assert(8 + kWordCount * 8 == kPyDebugOffsets313Size);

}  // namespace

Result<PyDebugOffsets> parse_py_debug_offsets(std::span<const uint8_t> image) {
  if (image.size() < kPyDebugOffsets313Size) {
    return make_error("_Py_DebugOffsets: " + std::to_string(image.size()) + " bytes, expected " +
                      std::to_string(kPyDebugOffsets313Size));
  }
  if (std::memcmp(image.data(), "xdebugpy", 8) != 0) {
    return make_error("_Py_DebugOffsets: no \"xdebugpy\" cookie at the start of _PyRuntime");
  }
  auto word = [&](Word index) {
    uint64_t value;
    std::memcpy(&value, image.data() + 8 + index * 8, 8);
    return value;
  };
  PyDebugOffsets d;
  d.version = word(kVersion);
  if ((d.version >> 16) != 0x030d) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(d.version));
    return make_error(std::string("_Py_DebugOffsets: version ") + text +
                      " is not 3.13 (the struct's layout changes with each minor version)");
  }
  d.free_threaded = word(kFreeThreaded);
  if (d.free_threaded != 0)
    return make_error("_Py_DebugOffsets: free-threaded build, not supported");
  d.runtime_interpreters_head = word(kRuntimeInterpretersHead);
  d.interp_threads_head = word(kInterpThreadsHead);
  d.interp_ceval_gil = word(kInterpCevalGil);
  d.interp_gil_runtime_state = word(kInterpGilRuntimeState);
  d.interp_gil_locked = word(kInterpGilRuntimeStateLocked);
  d.interp_gil_holder = word(kInterpGilRuntimeStateHolder);
  d.tstate_next = word(kTstateNext);
  d.tstate_current_frame = word(kTstateCurrentFrame);
  d.tstate_thread_id = word(kTstateThreadId);
  d.frame_previous = word(kFramePrevious);
  d.frame_executable = word(kFrameExecutable);
  d.frame_instr_ptr = word(kFrameInstrPtr);
  d.frame_owner = word(kFrameOwner);
  d.code_filename = word(kCodeFilename);
  d.code_name = word(kCodeName);
  d.code_qualname = word(kCodeQualname);
  d.code_linetable = word(kCodeLinetable);
  d.code_firstlineno = word(kCodeFirstlineno);
  d.code_adaptive = word(kCodeCoCodeAdaptive);
  d.bytes_ob_size = word(kBytesObSize);
  d.bytes_ob_sval = word(kBytesObSval);
  d.unicode_state = word(kUnicodeState);
  d.unicode_length = word(kUnicodeLength);
  d.unicode_asciiobject_size = word(kUnicodeAsciiobjectSize);
  if (d.interp_gil_locked < d.interp_gil_runtime_state ||
      d.interp_gil_holder < d.interp_gil_runtime_state) {
    return make_error("_Py_DebugOffsets: the GIL's fields lie before the GIL");
  }
  PythonVersionOffsets probe;
  if (!apply_py_debug_offsets(d, probe))
    return make_error("_Py_DebugOffsets: an offset does not fit its field");
  return d;
}

bool apply_py_debug_offsets(const PyDebugOffsets& d, PythonVersionOffsets& offsets) {
  auto as_i64 = [](uint64_t value) {
    return value > 0xffffffffULL ? INT64_MIN : static_cast<int64_t>(value);
  };
  const std::pair<std::string_view, uint64_t> values[] = {
      {"runtime_interpreters_head", d.runtime_interpreters_head},
      {"interp_tstate_head", d.interp_threads_head},
      {"interp_ceval_gil", d.interp_ceval_gil},
      {"gil_locked", d.interp_gil_locked - d.interp_gil_runtime_state},
      {"gil_last_holder", d.interp_gil_holder - d.interp_gil_runtime_state},
      {"tstate_next", d.tstate_next},
      {"tstate_frame", d.tstate_current_frame},
      {"tstate_thread_id", d.tstate_thread_id},
      {"frame_back", d.frame_previous},
      {"frame_code", d.frame_executable},
      {"frame_lasti", d.frame_instr_ptr},
      {"frame_owner", d.frame_owner},
      {"code_adaptive", d.code_adaptive},
      {"co_filename", d.code_filename},
      {"co_name", d.code_name},
      {"co_qualname", d.code_qualname},
      {"co_linetable", d.code_linetable},
      {"co_firstlineno", d.code_firstlineno},
      {"bytes_size", d.bytes_ob_size},
      {"bytes_data", d.bytes_ob_sval},
      {"unicode_state", d.unicode_state},
      {"unicode_length", d.unicode_length},
      {"unicode_ascii_data", d.unicode_asciiobject_size},
  };
  for (const auto& [key, value] : values) {
    if (!kPythonOffsetSchema.set(offsets, key, as_i64(value))) return false;
  }
  return true;
}

}  // namespace omniprof::python
