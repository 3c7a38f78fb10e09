#include "python_code_reader.h"

#include <cstdio>
#include <cstring>

namespace omniprof::python {
namespace {

std::string hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

template <typename T>
bool read_value(const ReadMemory& read, uint64_t address, T& value) {
  return read(address, &value, sizeof value);
}

Error read_failed(const char* what, uint64_t address) {
  return make_error(std::string("cannot read ") + what + " at " + hex(address));
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// A length-prefixed byte string (PyBytesObject, or 2.7's PyStringObject).
Result<std::vector<uint8_t>> read_byte_string(const ReadMemory& read, uint64_t address,
                                              int64_t size_offset, int64_t data_offset,
                                              std::size_t max_len) {
  if (address == 0) return make_error("NULL bytes object");
  int64_t size = 0;
  if (!read_value(read, address + size_offset, size)) return read_failed("bytes size", address);
  if (size < 0 || static_cast<uint64_t>(size) > max_len) {
    return make_error("bytes object at " + hex(address) + " claims " + std::to_string(size) +
                      " bytes (limit " + std::to_string(max_len) + ")");
  }
  std::vector<uint8_t> bytes(static_cast<std::size_t>(size));
  if (size > 0 && !read(address + data_offset, bytes.data(), bytes.size())) {
    return read_failed("bytes data", address);
  }
  return bytes;
}

}  // namespace

Result<std::string> read_python_string(const ReadMemory& read, const PythonVersionOffsets& offsets,
                                       uint64_t address) {
  const PythonReaderOffsets& o = offsets.reader;
  if (address == 0) return make_error("NULL string object");
  if (offsets.major == 2) {
    auto bytes =
        read_byte_string(read, address, o.string_size, o.string_data, kMaxPythonStringChars);
    if (!bytes) return bytes.error();
    return std::string(bytes->begin(), bytes->end());
  }
  uint32_t state = 0;
  int64_t length = 0;
  if (!read_value(read, address + o.unicode_state, state)) return read_failed("str state", address);
  if (!read_value(read, address + o.unicode_length, length))
    return read_failed("str length", address);
  unsigned kind = (state >> o.unicode_kind_bit) & 7;
  bool compact = (state >> o.unicode_compact_bit) & 1;
  bool ascii = (state >> o.unicode_ascii_bit) & 1;
  if (!compact)
    return make_error("str at " + hex(address) + " is not compact (state " + hex(state) + ")");
  if (kind != 1 && kind != 2 && kind != 4) {
    return make_error("str at " + hex(address) + " has kind " + std::to_string(kind));
  }
  if (ascii && kind != 1)
    return make_error("str at " + hex(address) + " is ASCII of kind " + std::to_string(kind));
  if (length < 0 || static_cast<uint64_t>(length) > kMaxPythonStringChars) {
    return make_error("str at " + hex(address) + " claims " + std::to_string(length) +
                      " characters (limit " + std::to_string(kMaxPythonStringChars) + ")");
  }
  std::size_t count = static_cast<std::size_t>(length);
  std::vector<uint8_t> raw(count * kind);
  uint64_t data =
      address + static_cast<uint64_t>(ascii ? o.unicode_ascii_data : o.unicode_compact_data);
  if (count > 0 && !read(data, raw.data(), raw.size())) return read_failed("str data", address);
  std::string text;
  text.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    uint32_t cp = 0;
    if (kind == 1) {
      cp = raw[i];
    } else if (kind == 2) {
      uint16_t unit;
      std::memcpy(&unit, &raw[i * 2], 2);
      cp = unit;
    } else {
      std::memcpy(&cp, &raw[i * 4], 4);
    }
    if ((ascii && cp >= 0x80) || cp > 0x10ffff) {
      return make_error("str at " + hex(address) + " holds " + hex(cp) + ", not a " +
                        (ascii ? "ASCII character" : "code point"));
    }
    // Lone surrogates (possible in a str, not in UTF-8) become U+FFFD.
    append_utf8(text, (cp >= 0xd800 && cp <= 0xdfff) ? 0xfffd : cp);
  }
  return text;
}

Result<PythonCodeInfo> read_code_object(const ReadMemory& read, const PythonVersionOffsets& offsets,
                                        uint64_t code_address) {
  const PythonReaderOffsets& o = offsets.reader;
  if (code_address == 0) return make_error("NULL code object");
  auto pointer_at = [&](int64_t offset, const char* what) -> Result<uint64_t> {
    uint64_t value = 0;
    if (!read_value(read, code_address + offset, value)) return read_failed(what, code_address);
    return value;
  };
  // The str object at `pointer` (the field `what` held).
  auto string_at = [&](uint64_t pointer, const char* what) -> Result<std::string> {
    auto text = read_python_string(read, offsets, pointer);
    if (!text)
      return make_error(std::string(what) + " of code object " + hex(code_address) + ": " +
                        text.error().message);
    return text;
  };
  auto string_field = [&](int64_t offset, const char* what) -> Result<std::string> {
    auto pointer = pointer_at(offset, what);
    if (!pointer) return pointer.error();
    return string_at(*pointer, what);
  };

  PythonCodeInfo info;
  // co_name and co_filename are read once: their pointers are also the tag.
  auto filename_object = pointer_at(o.co_filename, "co_filename");
  if (!filename_object) return filename_object.error();
  auto name_object = pointer_at(o.co_name, "co_name");
  if (!name_object) return name_object.error();
  info.tag = pyperf_code_tag(*filename_object, *name_object);
  auto name = string_at(*name_object, "co_name");
  if (!name) return name.error();
  info.name = std::move(name.value());
  auto file = string_at(*filename_object, "co_filename");
  if (!file) return file.error();
  info.file = std::move(file.value());
  if (o.co_qualname >= 0) {
    auto qualname = string_field(o.co_qualname, "co_qualname");
    if (!qualname) return qualname.error();
    info.function = std::move(qualname.value());
  } else {
    info.function = info.name;
  }
  int32_t first_line = 0;
  if (!read_value(read, code_address + o.co_firstlineno, first_line)) {
    return read_failed("co_firstlineno", code_address);
  }
  if (first_line < 0)
    return make_error("code object " + hex(code_address) + " has co_firstlineno " +
                      std::to_string(first_line));
  info.first_line = first_line;

  info.format = line_table_format(offsets.major, offsets.minor);
  int64_t table_offset = o.co_linetable >= 0 ? o.co_linetable : o.co_lnotab;
  auto table_pointer = pointer_at(table_offset, o.co_linetable >= 0 ? "co_linetable" : "co_lnotab");
  if (!table_pointer) return table_pointer.error();
  int64_t size_offset = offsets.major == 2 ? o.string_size : o.bytes_size;
  int64_t data_offset = offsets.major == 2 ? o.string_data : o.bytes_data;
  auto table = read_byte_string(read, *table_pointer, size_offset, data_offset, kMaxLineTableBytes);
  if (!table)
    return make_error("line table of code object " + hex(code_address) + ": " +
                      table.error().message);
  info.line_table = std::move(table.value());
  if (o.co_code >= 0 && info.format != LineTableFormat::kLocations311) {
    auto code_pointer = pointer_at(o.co_code, "co_code");
    if (!code_pointer) return code_pointer.error();
    int64_t code_size = 0;
    if (*code_pointer == 0 || !read_value(read, *code_pointer + size_offset, code_size)) {
      return read_failed("co_code size", code_address);
    }
    if (code_size <= 0 || static_cast<uint64_t>(code_size) > kMaxLineTableBytes * 64) {
      return make_error("code object " + hex(code_address) + " claims " +
                        std::to_string(code_size) + " bytes of co_code");
    }
    info.code_bytes = static_cast<uint64_t>(code_size);
  }
  return info;
}

PythonFrameName name_frame(const PythonCodeInfo& code, uint32_t instruction_offset) {
  // 3.10 counts code units, older versions bytes.
  uint64_t offset_bytes = code.format == LineTableFormat::kLinetable310
                              ? uint64_t{instruction_offset} * 2
                              : uint64_t{instruction_offset};
  std::optional<int> line;
  if (code.code_bytes == 0 || offset_bytes < code.code_bytes) {
    line = line_for_instruction(code.format, code.line_table, code.first_line, instruction_offset);
  }
  return PythonFrameName{code.function, code.file, line.value_or(code.first_line)};
}

Result<PythonFrameName> PythonCodeCache::name_frame(uint32_t pid, const ReadMemory& read,
                                                    const PythonVersionOffsets& offsets,
                                                    uint64_t code_value,
                                                    uint32_t instruction_offset) {
  const uint64_t code_address = code_value & PYPERF_CODE_ADDRESS_MASK;
  const uint64_t tag = code_value >> PYPERF_CODE_TAG_SHIFT;
  std::pair<uint32_t, uint64_t> key{pid, code_value};
  std::shared_ptr<const PythonCodeInfo> code;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end()) code = it->second;
  }
  if (!code) {
    // Read outside the lock: it is process memory I/O.
    auto read_code = read_code_object(read, offsets, code_address);
    std::lock_guard lock(mutex_);
    ++reads_;
    if (!read_code)
      return make_error("pid " + std::to_string(pid) + ": " + read_code.error().message);
    if (tag != 0 && read_code->tag != tag) {
      ++replaced_;
      return make_error("pid " + std::to_string(pid) + ": the code object at " + hex(code_address) +
                        " is not the one sampled (freed, and its address taken by another)");
    }
    if (entries_.size() >= max_entries_) {
      entries_.clear();
      ++evictions_;
    }
    code = std::make_shared<const PythonCodeInfo>(std::move(read_code.value()));
    entries_.emplace(key, code);
  }
  return omniprof::python::name_frame(*code, instruction_offset);
}

void PythonCodeCache::drop_pid(uint32_t pid) {
  std::lock_guard lock(mutex_);
  auto first = entries_.lower_bound({pid, 0});
  auto last = entries_.lower_bound({pid + 1, 0});
  if (pid == UINT32_MAX) last = entries_.end();
  entries_.erase(first, last);
}

std::size_t PythonCodeCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

uint64_t PythonCodeCache::reads() const {
  std::lock_guard lock(mutex_);
  return reads_;
}

uint64_t PythonCodeCache::replaced() const {
  std::lock_guard lock(mutex_);
  return replaced_;
}

uint64_t PythonCodeCache::evictions() const {
  std::lock_guard lock(mutex_);
  return evictions_;
}

}  // namespace omniprof::python
