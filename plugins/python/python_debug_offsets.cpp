#include "python_debug_offsets.h"

#include <cstdio>
#include <cstring>

namespace omniprof::python {
namespace {

// Each field of PyDebugOffsets and the YAML key saying where it lies in a
// version's _Py_DebugOffsets.
struct Field {
  const char* key;
  uint64_t PyDebugOffsets::*value;
  int64_t PythonReaderOffsets::*at;
};
constexpr Field kFields[] = {
    {"debug_runtime_interpreters_head", &PyDebugOffsets::runtime_interpreters_head, &PythonReaderOffsets::debug_runtime_interpreters_head},
    {"debug_interp_threads_head", &PyDebugOffsets::interp_threads_head, &PythonReaderOffsets::debug_interp_threads_head},
    {"debug_interp_ceval_gil", &PyDebugOffsets::interp_ceval_gil, &PythonReaderOffsets::debug_interp_ceval_gil},
    {"debug_interp_gil_runtime_state", &PyDebugOffsets::interp_gil_runtime_state, &PythonReaderOffsets::debug_interp_gil_runtime_state},
    {"debug_interp_gil_locked", &PyDebugOffsets::interp_gil_locked, &PythonReaderOffsets::debug_interp_gil_locked},
    {"debug_interp_gil_holder", &PyDebugOffsets::interp_gil_holder, &PythonReaderOffsets::debug_interp_gil_holder},
    {"debug_tstate_next", &PyDebugOffsets::tstate_next, &PythonReaderOffsets::debug_tstate_next},
    {"debug_tstate_current_frame", &PyDebugOffsets::tstate_current_frame, &PythonReaderOffsets::debug_tstate_current_frame},
    {"debug_tstate_thread_id", &PyDebugOffsets::tstate_thread_id, &PythonReaderOffsets::debug_tstate_thread_id},
    {"debug_frame_previous", &PyDebugOffsets::frame_previous, &PythonReaderOffsets::debug_frame_previous},
    {"debug_frame_executable", &PyDebugOffsets::frame_executable, &PythonReaderOffsets::debug_frame_executable},
    {"debug_frame_instr_ptr", &PyDebugOffsets::frame_instr_ptr, &PythonReaderOffsets::debug_frame_instr_ptr},
    {"debug_frame_owner", &PyDebugOffsets::frame_owner, &PythonReaderOffsets::debug_frame_owner},
    {"debug_code_filename", &PyDebugOffsets::code_filename, &PythonReaderOffsets::debug_code_filename},
    {"debug_code_name", &PyDebugOffsets::code_name, &PythonReaderOffsets::debug_code_name},
    {"debug_code_qualname", &PyDebugOffsets::code_qualname, &PythonReaderOffsets::debug_code_qualname},
    {"debug_code_linetable", &PyDebugOffsets::code_linetable, &PythonReaderOffsets::debug_code_linetable},
    {"debug_code_firstlineno", &PyDebugOffsets::code_firstlineno, &PythonReaderOffsets::debug_code_firstlineno},
    {"debug_code_adaptive", &PyDebugOffsets::code_adaptive, &PythonReaderOffsets::debug_code_adaptive},
    {"debug_bytes_ob_size", &PyDebugOffsets::bytes_ob_size, &PythonReaderOffsets::debug_bytes_ob_size},
    {"debug_bytes_ob_sval", &PyDebugOffsets::bytes_ob_sval, &PythonReaderOffsets::debug_bytes_ob_sval},
    {"debug_unicode_state", &PyDebugOffsets::unicode_state, &PythonReaderOffsets::debug_unicode_state},
    {"debug_unicode_length", &PyDebugOffsets::unicode_length, &PythonReaderOffsets::debug_unicode_length},
    {"debug_unicode_asciiobject_size", &PyDebugOffsets::unicode_asciiobject_size, &PythonReaderOffsets::debug_unicode_asciiobject_size},
};

std::string hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

Result<PyDebugOffsets> parse_py_debug_offsets(std::span<const uint8_t> image, const PythonVersionOffsets& layout) {
  const std::string version = std::to_string(layout.major) + "." + std::to_string(layout.minor);
  const int64_t size = layout.reader.debug_offsets_size;
  if (size <= 0) return make_error("_Py_DebugOffsets: CPython " + version + " has none (3.13+)");
  if (static_cast<uint64_t>(size) > kPyDebugOffsetsMaxSize || image.size() < static_cast<uint64_t>(size)) {
    return make_error("_Py_DebugOffsets: " + std::to_string(image.size()) + " bytes, " + version + "'s is " +
                      std::to_string(size));
  }
  if (std::memcmp(image.data(), "xdebugpy", 8) != 0) {
    return make_error("_Py_DebugOffsets: no \"xdebugpy\" cookie at the start of _PyRuntime");
  }
  auto word = [&](uint64_t at) {
    uint64_t value;
    std::memcpy(&value, image.data() + at, 8);
    return value;
  };
  PyDebugOffsets d;
  d.version = word(kPyDebugOffsetsVersionAt);
  if ((d.version >> 16) != (layout.bpf.version_hex >> 16)) {
    return make_error("_Py_DebugOffsets: version " + hex(d.version) + " is not " + version +
                      " (the struct's layout changes with each minor version)");
  }
  d.free_threaded = word(kPyDebugOffsetsFreeThreadedAt);
  if (d.free_threaded != 0) return make_error("_Py_DebugOffsets: free-threaded build, not supported");
  for (const Field& field : kFields) {
    const int64_t at = layout.reader.*field.at;
    if (at < 0 || at + 8 > size) {
      return make_error(std::string("_Py_DebugOffsets: python.yaml's ") + version + " entry has no " + field.key);
    }
    d.*field.value = word(static_cast<uint64_t>(at));
  }
  if (d.interp_gil_locked < d.interp_gil_runtime_state || d.interp_gil_holder < d.interp_gil_runtime_state) {
    return make_error("_Py_DebugOffsets: the GIL's fields lie before the GIL");
  }
  PythonVersionOffsets probe;
  if (!apply_py_debug_offsets(d, probe)) return make_error("_Py_DebugOffsets: an offset does not fit its field");
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
