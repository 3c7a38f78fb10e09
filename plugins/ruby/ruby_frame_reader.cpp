#include "ruby_frame_reader.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "rbperf.h"
#include "ruby_shapes.h"

namespace omniprof::ruby {
namespace {

// Bounds on what one read of the target may allocate: a garbage pointer or
// length costs one failed read, never a huge buffer.
constexpr int64_t kMaxStringBytes = 4096;
constexpr int64_t kMaxIseqSize = 1 << 24;          // VALUEs of one iseq
constexpr int64_t kMaxInsnInfoEntries = 1 << 20;   // line table entries
constexpr int64_t kMaxIvarEntries = 4096;          // a class's ivar table
constexpr int kMaxAttachedDepth = 4;               // singleton of a singleton ...

// Value tags and type codes that are the same from 2.6 to 3.4
// (include/ruby/internal/value_type.h, special_consts.h, internal/imemo.h).
constexpr uint64_t kTypeMask = 0x1f;
constexpr uint64_t kTypeClass = 0x02;
constexpr uint64_t kTypeModule = 0x03;
constexpr uint64_t kTypeString = 0x05;
constexpr uint64_t kTypeArray = 0x07;
constexpr uint64_t kTypeImemo = 0x1a;
constexpr int kFlUshift = 12;
constexpr uint64_t kImemoMask = 0x0f;
constexpr uint64_t kImemoMethodEntry = 6;  // imemo_ment
// enum iseq_type (vm_core.h).
constexpr int kIseqTypeMethod = 1;
// iseq.c's succinct index table (VM_INSN_INFO_TABLE_IMPL 2): imm_part[6]
// (9 entries of 7 bits per word) then succ_dict_block {unsigned rank;
// uint64_t small_block_ranks; uint64_t bits[8]}, 80 bytes on LP64.
constexpr int kImmediateTableSize = 54;
constexpr int kSuccBlockBits = 512;
constexpr std::size_t kSuccBlockBytes = 80;
constexpr std::size_t kSuccImmBytes = kImmediateTableSize / 9 * 8;

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// A heap object pointer, not an immediate (Fixnum, Symbol, nil, ...).
bool is_heap_pointer(uint64_t value) { return value != 0 && (value & 7) == 0 && value > 0x1000; }

// What one iseq says, read once: everything a sample needs but the pc.
struct IseqInfo {
  std::string label;
  std::string path;
  int type = 0;
  int first_lineno = 0;
  uint32_t iseq_size = 0;
  uint64_t iseq_encoded = 0;  // where its instructions are: the walk records the pc (rbperf.h)
  std::vector<int32_t> lines;         // insns_info.body[i].line_no
  std::vector<uint32_t> positions;    // insns_info.positions, when still present
  std::vector<uint8_t> succ_table;    // the succinct index table's bytes otherwise

  int line_at(uint32_t pc_index) const;
};

uint64_t load_u64(const uint8_t* bytes) {
  uint64_t value;
  std::memcpy(&value, bytes, 8);
  return value;
}

int IseqInfo::line_at(uint32_t pc_index) const {
  // CRuby's calc_pos: the pc points past the instruction that runs.
  uint32_t pos = pc_index > 0 ? pc_index - 1 : 0;
  if (lines.empty()) return first_lineno;
  if (lines.size() == 1) return lines[0];
  if (!positions.empty()) {
    // get_insn_info_binary_search: the last entry whose position <= pos.
    auto after = std::upper_bound(positions.begin(), positions.end(), pos);
    std::size_t index = after == positions.begin() ? 0 : static_cast<std::size_t>(after - positions.begin()) - 1;
    return lines[std::min(index, lines.size() - 1)];
  }
  // succ_index_lookup: how many entries start at or before pos.
  uint64_t rank = 0;
  if (pos < static_cast<uint32_t>(kImmediateTableSize)) {
    std::size_t word = pos / 9;
    if ((word + 1) * 8 > succ_table.size()) return first_lineno;
    rank = (load_u64(succ_table.data() + word * 8) >> ((pos % 9) * 7)) & 0x7f;
  } else {
    uint32_t bit = pos - kImmediateTableSize;
    std::size_t block = kSuccImmBytes + (bit / kSuccBlockBits) * kSuccBlockBytes;
    if (block + kSuccBlockBytes > succ_table.size()) return first_lineno;
    uint32_t block_bit = bit % kSuccBlockBits;
    uint32_t small_block = block_bit / 64;
    uint32_t block_rank;
    std::memcpy(&block_rank, succ_table.data() + block, 4);
    uint64_t small_ranks = load_u64(succ_table.data() + block + 8);
    uint64_t bits = load_u64(succ_table.data() + block + 16 + small_block * 8);
    uint64_t small_rank = small_block == 0 ? 0 : (small_ranks >> ((small_block - 1) * 9)) & 0x1ff;
    rank = block_rank + small_rank + std::popcount(bits << (63 - block_bit % 64));
  }
  if (rank == 0 || rank > lines.size()) return first_lineno;
  return lines[rank - 1];
}

// A method entry's owner, as backtraces name it.
struct MethodInfo {
  std::string owner;     // "Foo", "" when the class cannot be named
  char separator = '#';  // '.' for a singleton method
  std::string name;      // the method's name, "" when not read (iseq frames do not need it)
};

// Reads one process's objects with one version's offsets.
class ObjectReader {
 public:
  ObjectReader(const ReadMemory& read, const RubyVersionOffsets& offsets, const RubyProcessAddresses& addresses,
               std::map<uint64_t, std::string>& id_names)
      : read_(read),
        o_(offsets.reader),
        iseq_body_(offsets.reader.iseq_body),
        iseq_encoded_(offsets.reader.body_iseq_encoded),
        addresses_(addresses),
        id_names_(id_names) {}

  Result<uint64_t> u64(uint64_t address, const char* what) {
    uint64_t value;
    if (!read_(address, &value, 8)) return make_error(std::string(what) + " unreadable at " + hex(address));
    return value;
  }
  Result<uint32_t> u32(uint64_t address, const char* what) {
    uint32_t value;
    if (!read_(address, &value, 4)) return make_error(std::string(what) + " unreadable at " + hex(address));
    return value;
  }
  bool bytes(uint64_t address, void* buffer, std::size_t length) {
    return length == 0 || read_(address, buffer, length);
  }

  // The flags of the heap object `value`, checked to be of `type`.
  Result<uint64_t> object_flags(uint64_t value, uint64_t type, const char* type_name) {
    if (!is_heap_pointer(value)) return make_error(std::string("not a ") + type_name + ": " + hex(value));
    auto flags = u64(value, "object flags");
    if (!flags) return flags.error();
    if ((*flags & kTypeMask) != type) {
      return make_error(hex(value) + " is not a" + (type == kTypeArray ? "n " : " ") + type_name + " (flags " + hex(*flags) + ")");
    }
    return flags;
  }

  // A String's or Array's heap part: its length and its data pointer.
  Result<std::pair<uint64_t, uint64_t>> heap_length_and_pointer(uint64_t value, int64_t length_offset,
                                                                int64_t pointer_offset) {
    auto length = u64(value + length_offset, "length");
    if (!length) return length.error();
    auto pointer = u64(value + pointer_offset, "data pointer");
    if (!pointer) return pointer.error();
    return std::pair{*length, *pointer};
  }

  Result<std::string> string(uint64_t value) {
    auto flags = object_flags(value, kTypeString, "String");
    if (!flags) return flags.error();
    int64_t length = 0;
    uint64_t data = 0;
    if (*flags & static_cast<uint64_t>(o_.string_noembed_flag)) {
      auto heap = heap_length_and_pointer(value, o_.string_len, o_.string_heap_ptr);
      if (!heap) return heap.error();
      length = static_cast<int64_t>(heap->first);
      data = heap->second;
    } else {
      if (o_.string_embed_len_shift >= 0) {
        length = static_cast<int64_t>((*flags >> o_.string_embed_len_shift) & static_cast<uint64_t>(o_.string_embed_len_mask));
      } else {
        auto len = u64(value + o_.string_len, "String length");
        if (!len) return len.error();
        length = static_cast<int64_t>(*len);
      }
      data = value + o_.string_embed_ary;
    }
    if (length < 0 || length > kMaxStringBytes) {
      return make_error("String " + hex(value) + " has length " + std::to_string(length));
    }
    std::string text(static_cast<std::size_t>(length), '\0');
    if (!bytes(data, text.data(), text.size())) return make_error("String " + hex(value) + " chars unreadable at " + hex(data));
    return text;
  }

  // Element `index` of an Array.
  Result<uint64_t> array_element(uint64_t value, uint64_t index) {
    auto flags = object_flags(value, kTypeArray, "Array");
    if (!flags) return flags.error();
    uint64_t length = 0;
    uint64_t elements = 0;
    if (*flags & static_cast<uint64_t>(o_.array_embed_flag)) {
      length = (*flags >> o_.array_embed_len_shift) & static_cast<uint64_t>(o_.array_embed_len_mask);
      elements = value + o_.array_embed_ary;
    } else {
      auto heap = heap_length_and_pointer(value, o_.array_heap_len, o_.array_heap_ptr);
      if (!heap) return heap.error();
      length = heap->first;
      elements = heap->second;
    }
    if (index >= length) return make_error("Array " + hex(value) + " has " + std::to_string(length) + " elements, not " +
                                            std::to_string(index + 1));
    return u64(elements + index * 8, "Array element");
  }

  // ID -> name through ruby_global_symbols (symbol.c get_id_serial_entry).
  Result<std::string> id_name(uint64_t id) {
    if (auto known = id_names_.find(id); known != id_names_.end()) return known->second;
    if (addresses_.global_symbols == 0) return make_error("no ID table (ruby_global_symbols not found)");
    if (o_.symbols_ids < 0) return make_error("no ID table offsets for this version");
    uint64_t serial = id > static_cast<uint64_t>(o_.last_op_id) ? id >> o_.id_scope_shift : id;
    auto ids = u64(addresses_.global_symbols + o_.symbols_ids, "global_symbols.ids");
    if (!ids) return ids.error();
    uint64_t unit = static_cast<uint64_t>(o_.id_entry_unit);
    auto chunk = array_element(*ids, serial / unit);
    if (!chunk) return make_error("ID " + std::to_string(id) + ": " + chunk.error().message);
    auto entry = array_element(*chunk, (serial % unit) * 2);
    if (!entry) return make_error("ID " + std::to_string(id) + ": " + entry.error().message);
    auto name = string(*entry);
    if (!name) return make_error("ID " + std::to_string(id) + ": " + name.error().message);
    if (id_names_.size() < 65536) id_names_.emplace(id, *name);
    return name;
  }

  // The ivar `name` of a class up to 3.1 (its classext's iv_tbl, an st_table).
  std::optional<uint64_t> class_ivar(uint64_t classext, const char* name) {
    auto table = u64(classext + o_.classext_iv_tbl, "iv_tbl");
    if (!table || !is_heap_pointer(*table)) return std::nullopt;
    auto start = u64(*table + o_.st_entries_start, "st_table.entries_start");
    auto bound = u64(*table + o_.st_entries_bound, "st_table.entries_bound");
    auto entries = u64(*table + o_.st_entries, "st_table.entries");
    if (!start || !bound || !entries || *bound < *start || *bound - *start > kMaxIvarEntries) return std::nullopt;
    std::size_t count = *bound - *start;
    std::vector<uint8_t> raw(count * static_cast<std::size_t>(o_.st_entry_size));
    if (!bytes(*entries + *start * o_.st_entry_size, raw.data(), raw.size())) return std::nullopt;
    for (std::size_t i = 0; i < count; ++i) {
      const uint8_t* entry = raw.data() + i * o_.st_entry_size;
      // st.c marks a deleted entry with hash RESERVED_HASH_VAL (all ones;
      // the hash is st_table_entry's first field).
      if (load_u64(entry) == ~uint64_t{0}) continue;
      uint64_t key = load_u64(entry + o_.st_entry_key);
      auto key_name = id_name(key);  // a deleted entry's key is garbage: it does not name `name`
      if (key_name && *key_name == name) return load_u64(entry + o_.st_entry_record);
    }
    return std::nullopt;
  }

  std::optional<uint64_t> classext(uint64_t klass) {
    if (o_.class_ext_embedded >= 0) return klass + o_.class_ext_embedded;
    if (o_.class_ext_pointer < 0) return std::nullopt;
    auto pointer = u64(klass + o_.class_ext_pointer, "RClass.ptr");
    if (!pointer || !is_heap_pointer(*pointer)) return std::nullopt;
    return *pointer;
  }

  // A class's path or attached object: a field of its classext (3.3+,
  // `field` >= 0) or its ivar `ivar` (up to 3.1 in an st_table, 3.2 through
  // its shape).
  std::optional<uint64_t> class_slot(uint64_t klass, int64_t field, const char* ivar) {
    auto ext = classext(klass);
    if (!ext) return std::nullopt;
    if (field >= 0) {
      auto value = u64(*ext + field, ivar);
      if (!value) return std::nullopt;
      return *value;
    }
    if (o_.classext_iv_tbl >= 0) return class_ivar(*ext, ivar);
    if (o_.classext_iv_ptr >= 0) return shape_ivar(klass, *ext, ivar);
    return std::nullopt;
  }

  // The ivar `name` of a class on 3.2: at the index its object shape gives
  // in the classext's iv_ptr array (ruby_shapes.h).
  std::optional<uint64_t> shape_ivar(uint64_t klass, uint64_t classext, const char* name) {
    if (o_.vm_shape_list < 0 || o_.shape_id_shift < 0 || addresses_.vm_pointer == 0) return std::nullopt;
    auto flags = u64(klass, "class flags");
    auto vm = u64(addresses_.vm_pointer, "ruby_current_vm_ptr");
    if (!flags || !vm || !is_heap_pointer(*vm)) return std::nullopt;
    auto shape_list = u64(*vm + o_.vm_shape_list, "vm shape_list");
    if (!shape_list || *shape_list == 0) return std::nullopt;
    const uint32_t shape_id = static_cast<uint32_t>(*flags >> o_.shape_id_shift);
    auto index = shape_ivar_index(read_, o_, *shape_list, shape_id, [&](uint64_t id) {
      auto id_text = id_name(id);
      return id_text && *id_text == name;
    });
    if (!index) return std::nullopt;
    auto ivars = u64(classext + o_.classext_iv_ptr, "iv_ptr");
    if (!ivars || !is_heap_pointer(*ivars)) return std::nullopt;
    auto value = u64(*ivars + uint64_t{*index} * 8, name);
    if (!value) return std::nullopt;
    return *value;
  }

  // The path String's text of a class or module ("Foo", "A::B"), nullopt
  // when it has none (anonymous) or it cannot be read.
  std::optional<std::string> class_path(uint64_t klass) {
    std::optional<uint64_t> path = class_slot(klass, o_.classext_classpath, "__classpath__");
    if (!path) return std::nullopt;
    auto text = string(*path);
    if (!text || text->empty()) return std::nullopt;
    return *text;
  }

  // How a method owned by `owner` is named: "Foo" and '#', or for a
  // singleton class "Foo" and '.'.
  void name_owner(uint64_t owner, MethodInfo& method) {
    for (int depth = 0; depth < kMaxAttachedDepth && is_heap_pointer(owner); ++depth) {
      auto flags = u64(owner, "class flags");
      if (!flags) return;
      uint64_t type = *flags & kTypeMask;
      if (type != kTypeClass && type != kTypeModule) return;
      bool singleton = type == kTypeClass && o_.class_singleton_flag > 0 &&
                       (*flags & static_cast<uint64_t>(o_.class_singleton_flag));
      if (!singleton) {
        if (auto path = class_path(owner)) method.owner = *path;
        return;
      }
      // A singleton class: name the object it is attached to (a class or
      // module for `def self.baz`; anything else stays unnamed).
      method.separator = '.';
      std::optional<uint64_t> attached = class_slot(owner, o_.classext_attached_object, "__attached__");
      if (!attached) return;
      owner = *attached;
    }
  }

  // A method entry's owner and (with `want_name`) its name. Without
  // `want_name` something else (the cref of <main> or <class:Foo>) is a
  // method without an owner rather than an error.
  Result<MethodInfo> method(uint64_t entry, bool want_name) {
    auto flags = u64(entry, "method entry flags");
    if (!flags) return flags.error();
    if ((*flags & kTypeMask) != kTypeImemo || ((*flags >> kFlUshift) & kImemoMask) != kImemoMethodEntry) {
      if (!want_name) return MethodInfo{};
      return make_error("method entry " + hex(entry) + " is not one (flags " + hex(*flags) + ")");
    }
    MethodInfo method;
    if (want_name) {
      std::optional<uint64_t> id;
      if (o_.def_original_id >= 0) {
        auto def = u64(entry + o_.me_def, "method entry def");
        if (def && is_heap_pointer(*def)) {
          auto original = u64(*def + o_.def_original_id, "def original_id");
          if (original) id = *original;
        }
      }
      if (!id) {
        auto called = u64(entry + o_.me_called_id, "method entry called_id");
        if (!called) return called.error();
        id = *called;
      }
      auto name = id_name(*id);
      if (!name) return make_error("method entry " + hex(entry) + ": " + name.error().message);
      method.name = *name;
    }
    auto owner = u64(entry + o_.me_owner, "method entry owner");
    if (owner) name_owner(*owner, method);
    return method;
  }

  Result<IseqInfo> iseq(uint64_t iseq) {
    std::string where = "iseq " + hex(iseq) + ": ";
    auto body = u64(iseq + iseq_body_, "body");
    if (!body) return make_error(where + body.error().message);
    if (!is_heap_pointer(*body)) return make_error(where + "no body (" + hex(*body) + ")");
    IseqInfo info;
    auto type = u32(*body + o_.body_type, "type");
    auto size = u32(*body + o_.body_iseq_size, "iseq_size");
    if (!type || !size) return make_error(where + (type ? size : type).error().message);
    info.type = static_cast<int>(*type);
    info.iseq_size = *size;
    if (*size > kMaxIseqSize) return make_error(where + "iseq_size " + std::to_string(*size) + " is implausible");
    auto encoded = u64(*body + iseq_encoded_, "iseq_encoded");
    if (!encoded) return make_error(where + encoded.error().message);
    info.iseq_encoded = *encoded;

    auto label_value = u64(*body + o_.body_location_label, "label");
    if (!label_value) return make_error(where + "label unreadable: " + label_value.error().message);
    auto label = string(*label_value);
    if (!label) return make_error(where + "label unreadable: " + label.error().message);
    info.label = std::move(*label);

    auto pathobj = u64(*body + o_.body_location_pathobj, "pathobj");
    if (!pathobj) return make_error(where + "path unreadable: " + pathobj.error().message);
    auto path_flags = is_heap_pointer(*pathobj) ? u64(*pathobj, "pathobj flags") : Result<uint64_t>(uint64_t{0});
    uint64_t path_value = *pathobj;
    if (path_flags && (*path_flags & kTypeMask) == kTypeArray) {
      auto first = array_element(*pathobj, 0);  // [path, realpath]: backtraces show the path
      if (!first) return make_error(where + "path unreadable: " + first.error().message);
      path_value = *first;
    }
    auto path = string(path_value);
    if (!path) return make_error(where + "path unreadable: " + path.error().message);
    info.path = std::move(*path);

    auto lineno = u64(*body + o_.body_location_first_lineno, "first_lineno");
    if (!lineno) return make_error(where + lineno.error().message);
    info.first_lineno = o_.first_lineno_fixnum == 1 ? static_cast<int>(static_cast<int64_t>(*lineno) >> 1)
                                                    : static_cast<int32_t>(*lineno & 0xffffffffu);

    if (auto lines = read_lines(*body, info); !lines) return make_error(where + lines.error().message);
    return info;
  }

 private:
  Result<void> read_lines(uint64_t body, IseqInfo& info) {
    auto entries = u64(body + o_.body_insns_info_body, "insns_info.body");
    auto count = u32(body + o_.body_insns_info_size, "insns_info.size");
    auto positions = u64(body + o_.body_insns_info_positions, "insns_info.positions");
    if (!entries) return entries.error();
    if (!count) return count.error();
    if (!positions) return positions.error();
    if (*count > kMaxInsnInfoEntries || *count > info.iseq_size + 1) {
      return make_error("insns_info.size " + std::to_string(*count) + " for an iseq of " +
                        std::to_string(info.iseq_size));
    }
    if (*count == 0) return ok();
    std::size_t entry_size = static_cast<std::size_t>(o_.insn_info_entry_size);
    std::vector<uint8_t> raw(*count * entry_size);
    if (!bytes(*entries, raw.data(), raw.size())) return make_error("line table unreadable at " + hex(*entries));
    info.lines.resize(*count);
    for (uint32_t i = 0; i < *count; ++i) {
      std::memcpy(&info.lines[i], raw.data() + i * entry_size + o_.insn_info_line_no, 4);
    }
    if (*count == 1) return ok();
    if (*positions != 0) {
      info.positions.resize(*count);
      if (!bytes(*positions, info.positions.data(), *count * 4)) return make_error("positions unreadable at " + hex(*positions));
      return ok();
    }
    auto table = u64(body + o_.body_insns_info_succ_index_table, "succ_index_table");
    if (!table) return table.error();
    if (!is_heap_pointer(*table)) return make_error("neither positions nor a succ_index_table");
    // succ_index_table_create(iseq_size, ...) allocates (max_pos < 54 ?
    // (max_pos + 8) / 9 words : 6 words and (max_pos - 54 + 511) / 512 blocks).
    int64_t max_pos = info.iseq_size;
    std::size_t table_bytes = max_pos < kImmediateTableSize
                                  ? static_cast<std::size_t>((max_pos + 8) / 9) * 8
                                  : kSuccImmBytes + static_cast<std::size_t>((max_pos - kImmediateTableSize + 511) / 512) *
                                                        kSuccBlockBytes;
    info.succ_table.resize(table_bytes);
    if (!bytes(*table, info.succ_table.data(), table_bytes)) return make_error("succ_index_table unreadable at " + hex(*table));
    return ok();
  }

  const ReadMemory& read_;
  const RubyReaderOffsets& o_;
  uint64_t iseq_body_;
  uint64_t iseq_encoded_;
  const RubyProcessAddresses& addresses_;
  std::map<uint64_t, std::string>& id_names_;
};

// "bar" -> "Foo#bar"; "block (2 levels) in bar" -> "block (2 levels) in
// Foo#bar"; "<main>", "<class:Foo>", "block in <main>" stay as they are.
std::string qualify(const IseqInfo& iseq, const MethodInfo& method) {
  if (method.owner.empty()) return iseq.label;
  std::string prefix = method.owner + method.separator;
  if (iseq.type == kIseqTypeMethod) return iseq.label.starts_with('<') ? iseq.label : prefix + iseq.label;
  std::size_t in = iseq.label.find(" in ");
  if (in == std::string::npos) return iseq.label;
  std::string_view method_part = std::string_view(iseq.label).substr(in + 4);
  if (method_part.empty() || method_part.starts_with('<')) return iseq.label;
  return iseq.label.substr(0, in + 4) + prefix + std::string(method_part);
}

}  // namespace

struct RubyFrameCache::Impl {
  struct Process {
    std::map<uint64_t, std::shared_ptr<const IseqInfo>> iseqs;
    std::map<uint64_t, MethodInfo> methods;        // iseq frames' method entries (owner only)
    std::map<uint64_t, MethodInfo> cfuncs;         // C function method entries (owner and name)
    std::map<uint64_t, std::string> id_names;
  };

  explicit Impl(std::size_t max) : max_entries(max) {}

  // Room for one more cached object: past the bound the process's caches
  // start again (a process that churns through code keeps working, slower).
  void make_room(Process& process) {
    if (entries < max_entries) return;
    entries -= process.iseqs.size() + process.methods.size() + process.cfuncs.size();
    process.iseqs.clear();
    process.methods.clear();
    process.cfuncs.clear();
    if (entries >= max_entries) {
      for (auto& [pid, other] : processes) {
        other.iseqs.clear();
        other.methods.clear();
        other.cfuncs.clear();
      }
      entries = 0;
    }
  }

  std::mutex mutex;
  std::size_t max_entries;
  std::size_t entries = 0;
  std::map<uint32_t, Process> processes;
};

RubyFrameCache::RubyFrameCache(std::size_t max_entries) : impl_(std::make_unique<Impl>(std::max<std::size_t>(max_entries, 1))) {}
RubyFrameCache::~RubyFrameCache() = default;

void RubyFrameCache::drop_pid(uint32_t pid) {
  std::lock_guard lock(impl_->mutex);
  auto found = impl_->processes.find(pid);
  if (found == impl_->processes.end()) return;
  Impl::Process& process = found->second;
  impl_->entries -= process.iseqs.size() + process.methods.size() + process.cfuncs.size();
  impl_->processes.erase(found);
}

Result<RubyFrameName> RubyFrameCache::name_frame(uint32_t pid, const ReadMemory& read, const RubyVersionOffsets& offsets,
                                                 const RubyProcessAddresses& addresses, const RubyFrameRecord& frame) {
  if (frame.address == 0) return make_error("pid " + std::to_string(pid) + ": an unreadable frame (address 0)");
  std::lock_guard lock(impl_->mutex);
  Impl::Process& process = impl_->processes[pid];
  ObjectReader reader(read, offsets, addresses, process.id_names);
  std::string where = "pid " + std::to_string(pid) + ": ";

  if (frame.detail == RBPERF_DETAIL_CFUNC) {
    auto cached = process.cfuncs.find(frame.address);
    if (cached == process.cfuncs.end()) {
      auto method = reader.method(frame.address, true);
      if (!method) return make_error(where + "C function " + method.error().message);
      impl_->make_room(process);
      cached = process.cfuncs.emplace(frame.address, std::move(*method)).first;
      ++impl_->entries;
    }
    const MethodInfo& method = cached->second;
    RubyFrameName name;
    name.function = method.owner.empty() ? method.name : method.owner + method.separator + method.name;
    return name;
  }

  auto cached_iseq = process.iseqs.find(frame.address);
  if (cached_iseq == process.iseqs.end()) {
    auto iseq = reader.iseq(frame.address);
    if (!iseq) return make_error(where + iseq.error().message);
    impl_->make_room(process);
    cached_iseq = process.iseqs.emplace(frame.address, std::make_shared<const IseqInfo>(std::move(*iseq))).first;
    ++impl_->entries;
  }
  std::shared_ptr<const IseqInfo> iseq = cached_iseq->second;
  // rbperf.h: the walk records the pc's VALUE index modulo 2^29.
  const uint32_t pc_index = (frame.detail - static_cast<uint32_t>(iseq->iseq_encoded >> 3)) & RBPERF_DETAIL_PC_MASK;
  if (pc_index > iseq->iseq_size) {
    return make_error(where + "iseq " + hex(frame.address) + ": pc index " + std::to_string(pc_index) + " past its " +
                      std::to_string(iseq->iseq_size) + " VALUEs");
  }

  MethodInfo method;  // no method entry, or one that cannot be read: the label alone
  if (frame.method_entry != 0) {
    auto cached = process.methods.find(frame.method_entry);
    if (cached == process.methods.end()) {
      auto read_method = reader.method(frame.method_entry, false);
      if (read_method) {
        impl_->make_room(process);
        cached = process.methods.emplace(frame.method_entry, std::move(*read_method)).first;
        ++impl_->entries;
      }
    }
    if (cached != process.methods.end()) method = cached->second;
  }
  RubyFrameName name;
  name.function = qualify(*iseq, method);
  name.file = iseq->path;
  name.line = iseq->line_at(pc_index);
  return name;
}

}  // namespace omniprof::ruby
