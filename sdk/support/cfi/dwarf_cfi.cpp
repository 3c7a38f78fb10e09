#include "omniprof/support/cfi/dwarf_cfi.h"

#include <limits>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "omniprof/support/cfi/byte_reader.h"

namespace omniprof::unwind {

std::string ParsedCfi::where(uint64_t section_offset) const {
  if (file_offset) {
    return fmt::format("{}: {}+{:#x} (file offset {:#x})", file, name, section_offset, *file_offset + section_offset);
  }
  return fmt::format("{}: {}+{:#x}", file, name, section_offset);
}

namespace {

std::string_view default_section_name(CfiFormat format) {
  return format == CfiFormat::kEhFrame ? ".eh_frame" : ".debug_frame";
}

// The header of one entry: its length (and the 64-bit escape) and its CIE id
// or CIE pointer.
struct EntryHeader {
  uint64_t offset = 0;     // of the length field
  uint64_t id_offset = 0;  // of the CIE id / CIE pointer
  uint64_t end = 0;        // one past the entry
  uint64_t id = 0;
  bool dwarf64 = false;
};

enum class EntryKind {
  kEntry,       // a CIE or an FDE
  kTerminator,  // a zero length
  kTooShort,    // inside the section, but too short for its CIE id: skipped
  kStop,        // the length cannot be trusted: nothing after it can be found
};

}  // namespace

class CfiSectionWalker::Impl {
 public:
  explicit Impl(const CfiSectionView& section) : ends_at_terminator_(section.ends_at_terminator) {
    out_.format = section.format;
    out_.bytes = section.bytes;
    out_.vaddr = section.vaddr;
    out_.file_offset = section.file_offset;
    out_.data_base = section.data_base;
    out_.file = std::string(section.file);
    out_.name = std::string(section.name.empty() ? default_section_name(section.format) : section.name);
  }

  void read_cies() {
    const uint64_t size = out_.bytes.size();
    uint64_t pos = 0;
    walk_end_ = size;
    while (pos < size) {
      EntryHeader entry;
      std::string problem;
      switch (read_entry(pos, entry, problem)) {
        case EntryKind::kStop:
          out_.cut_short = CfiProblem{pos, std::move(problem)};
          walk_end_ = pos;
          return;
        case EntryKind::kTerminator:
          ++out_.zero_terminators;
          pos = entry.end;
          if (ends_at_terminator_) {
            walk_end_ = pos;
            return;
          }
          continue;
        case EntryKind::kTooShort:
          ++fde_entries_;  // what it was cannot be known; it costs at most one FDE
          pos = entry.end;
          continue;
        case EntryKind::kEntry:
          break;
      }
      if (is_cie(entry)) {
        ByteReader reader(out_.bytes.data() + entry.id_offset + id_size(entry), out_.bytes.data() + entry.end);
        if (auto cie = parse_cie(reader, entry.offset, entry.dwarf64); !cie) {
          bad_cies_.emplace(entry.offset, std::move(cie.error().message));
        }
      } else {
        ++fde_entries_;
      }
      pos = entry.end;
    }
  }

  size_t fde_entries() const { return fde_entries_; }

  bool next_fde(Fde& fde) {
    while (cursor_ < walk_end_) {
      const uint64_t pos = cursor_;
      EntryHeader entry;
      std::string problem;
      const EntryKind kind = read_entry(pos, entry, problem);  // never kStop before walk_end_
      cursor_ = entry.end > pos ? entry.end : walk_end_;
      if (kind == EntryKind::kTooShort) {
        malformed(pos, std::move(problem));
        continue;
      }
      if (kind != EntryKind::kEntry || is_cie(entry)) continue;
      if (decode_fde(entry, fde, &problem)) return true;
      malformed(pos, std::move(problem));
    }
    return false;
  }

  void rewind() {
    cursor_ = 0;
    out_.malformed_fdes = 0;
    out_.first_malformed.reset();
  }

  Fde fde_at(uint64_t offset) const {
    EntryHeader entry;
    std::string problem;
    Fde fde;
    if (read_entry(offset, entry, problem) == EntryKind::kEntry) decode_fde(entry, fde, &problem);
    return fde;
  }

  const ParsedCfi& cfi() const { return out_; }

 private:
  static unsigned id_size(const EntryHeader& entry) { return entry.dwarf64 ? 8 : 4; }

  bool is_cie(const EntryHeader& entry) const {
    if (out_.format == CfiFormat::kEhFrame) return entry.id == 0;
    return entry.id == (entry.dwarf64 ? ~uint64_t{0} : uint64_t{0xffffffff});
  }

  void malformed(uint64_t offset, std::string message) {
    ++out_.malformed_fdes;
    if (!out_.first_malformed) out_.first_malformed = CfiProblem{offset, std::move(message)};
  }

  EntryKind read_entry(uint64_t pos, EntryHeader& entry, std::string& problem) const {
    const uint8_t* const base = out_.bytes.data();
    const uint64_t size = out_.bytes.size();
    entry.offset = pos;
    ByteReader reader(base + pos, base + size);
    uint64_t length = reader.u32();
    if (!reader.ok()) {
      problem = fmt::format("{}: truncated entry: {} bytes left, a length field needs 4", out_.where(pos), size - pos);
      return EntryKind::kStop;
    }
    if (length == 0) {  // zero terminator (or padding between objects)
      entry.end = pos + 4;
      return EntryKind::kTerminator;
    }
    uint64_t header_size = 4;
    if (length == 0xffffffff) {
      length = reader.u64();
      if (!reader.ok()) {
        problem = fmt::format("{}: truncated 64-bit entry length", out_.where(pos));
        return EntryKind::kStop;
      }
      entry.dwarf64 = true;
      header_size = 12;
    } else if (length >= 0xfffffff0) {
      problem = fmt::format("{}: entry length {:#x} is a reserved value", out_.where(pos), length);
      return EntryKind::kStop;
    }
    const uint64_t available = size - pos - header_size;
    if (length > available) {
      problem = fmt::format("{}: entry length {:#x} runs past the end of the section ({:#x} bytes left)",
                            out_.where(pos), length, available);
      return EntryKind::kStop;
    }
    entry.end = pos + header_size + length;
    entry.id_offset = pos + header_size;
    if (length < id_size(entry)) {
      problem = fmt::format("{}: entry length {:#x} leaves no room for its CIE id", out_.where(pos), length);
      return EntryKind::kTooShort;
    }
    ByteReader id_reader(base + entry.id_offset, base + entry.end);
    entry.id = id_reader.fixed(id_size(entry));
    return EntryKind::kEntry;
  }

  // The FDE of `entry` (which is not a CIE), or false with the reason.
  bool decode_fde(const EntryHeader& entry, Fde& fde, std::string* problem) const {
    uint64_t cie_offset = entry.id;
    if (out_.format == CfiFormat::kEhFrame) {
      // .eh_frame: the distance back from the CIE pointer field itself.
      if (entry.id > entry.id_offset) {
        *problem = fmt::format("{}: bad CIE pointer {:#x}: it points {:#x} bytes before the section start",
                               out_.where(entry.offset), entry.id, entry.id - entry.id_offset);
        return false;
      }
      cie_offset = entry.id_offset - entry.id;
    } else if (entry.id >= out_.bytes.size()) {
      *problem = fmt::format("{}: bad CIE pointer {:#x}: past the end of the section ({:#x} bytes)",
                             out_.where(entry.offset), entry.id, out_.bytes.size());
      return false;
    }
    if (cie_offset != cached_cie_offset_) {
      auto found = cie_index_by_offset_.find(cie_offset);
      if (found == cie_index_by_offset_.end()) {
        auto bad = bad_cies_.find(cie_offset);
        *problem = bad != bad_cies_.end()
                       ? fmt::format("{}: FDE of a malformed CIE: {}", out_.where(entry.offset), bad->second)
                       : fmt::format("{}: bad CIE pointer: section offset {:#x} is not the start of a CIE",
                                     out_.where(entry.offset), cie_offset);
        return false;
      }
      cached_cie_offset_ = cie_offset;
      cached_cie_index_ = found->second;
    }
    auto decoded = parse_fde(entry, cached_cie_index_, fde);
    if (!decoded) {
      *problem = std::move(decoded.error().message);
      return false;
    }
    return true;
  }

  Result<void> parse_cie(ByteReader& reader, uint64_t entry_offset, bool dwarf64) {
    const bool eh = out_.format == CfiFormat::kEhFrame;
    Cie cie;
    cie.offset = entry_offset;
    cie.dwarf64 = dwarf64;
    cie.version = reader.u8();
    cie.augmentation = reader.c_string();
    if (!reader.ok()) {
      return make_error(fmt::format("{}: CIE truncated before the end of its augmentation string",
                                    out_.where(entry_offset)));
    }
    const bool version_ok = eh ? (cie.version == 1 || cie.version == 3)
                               : (cie.version == 1 || cie.version == 3 || cie.version == 4);
    if (!version_ok) {
      return make_error(fmt::format("{}: CIE version {} is not supported in {} (expected {})", out_.where(entry_offset),
                                    cie.version, out_.name, eh ? "1 or 3" : "1, 3 or 4"));
    }
    if (cie.version >= 4) {
      cie.address_size = reader.u8();
      const uint8_t segment_selector_size = reader.u8();
      if (reader.ok() && cie.address_size != 8 && cie.address_size != 4) {
        return make_error(fmt::format("{}: CIE address size {} (expected 8 or 4)", out_.where(entry_offset),
                                      cie.address_size));
      }
      if (reader.ok() && segment_selector_size != 0) {
        return make_error(fmt::format("{}: CIE segment selector size {} (segmented addresses are not supported)",
                                      out_.where(entry_offset), segment_selector_size));
      }
    }

    std::string_view rest = cie.augmentation;
    if (!rest.empty() && rest.front() == 'z') {
      cie.has_augmentation_data = true;
      rest.remove_prefix(1);
    } else if (rest.starts_with("eh")) {
      // Pre-3.0 GCC: "eh" puts the address of the exception table right after
      // the string. Not needed for unwinding, but it has to be skipped.
      cie.has_eh_data = true;
      rest.remove_prefix(2);
      reader.skip(cie.address_size);
    }
    cie.code_alignment_factor = reader.uleb128();
    cie.data_alignment_factor = reader.sleb128();
    cie.return_address_register = cie.version == 1 ? reader.u8() : reader.uleb128();
    if (!reader.ok()) {
      return make_error(fmt::format("{}: CIE truncated in its alignment factors or return address column",
                                    out_.where(entry_offset)));
    }

    ByteReader augmentation_data;
    if (cie.has_augmentation_data) {
      const uint64_t length = reader.uleb128();
      std::span<const uint8_t> data = reader.bytes(length);
      if (!reader.ok()) {
        return make_error(fmt::format("{}: CIE augmentation data ({} bytes) runs past the end of the CIE",
                                      out_.where(entry_offset), length));
      }
      augmentation_data = ByteReader(data);
    }
    for (const char c : rest) {
      switch (c) {
        case 'R':
        case 'L':
        case 'P':
          if (!cie.has_augmentation_data) {
            return make_error(fmt::format("{}: CIE augmentation \"{}\" has '{}' without 'z'", out_.where(entry_offset),
                                          cie.augmentation, c));
          }
          if (c == 'R') {
            cie.fde_pointer_encoding = augmentation_data.u8();
          } else if (c == 'L') {
            cie.lsda_encoding = augmentation_data.u8();
          } else {
            cie.personality_encoding = augmentation_data.u8();
            // The personality routine's address is read only by the C++
            // runtime; skip it (it is usually indirect, which is fine here).
            if (augmentation_data.ok() &&
                !skip_encoded_value(augmentation_data, cie.personality_encoding, cie.address_size)) {
              return make_error(fmt::format("{}: CIE personality pointer (encoding {}) does not fit its augmentation data",
                                            out_.where(entry_offset), pointer_encoding_name(cie.personality_encoding)));
            }
          }
          if (!augmentation_data.ok()) {
            return make_error(fmt::format("{}: CIE augmentation data too short for '{}' of \"{}\"",
                                          out_.where(entry_offset), c, cie.augmentation));
          }
          break;
        case 'S':
          cie.signal_frame = true;
          break;
        case 'B':  // AArch64 BTI / MTE markers: no data, harmless elsewhere
        case 'G':
          break;
        default:
          return make_error(fmt::format("{}: CIE augmentation \"{}\": unknown character '{}'", out_.where(entry_offset),
                                        cie.augmentation, c));
      }
    }
    if (eh) {
      const uint8_t encoding = cie.fde_pointer_encoding;
      if ((encoding & pe::kIndirect) != 0 || encoding == pe::kOmit) {
        return make_error(fmt::format("{}: CIE FDE pointer encoding {}: not valid for FDE addresses",
                                      out_.where(entry_offset), pointer_encoding_name(encoding)));
      }
    }
    cie.initial_instructions = std::span<const uint8_t>(reader.position(), reader.end());
    cie_index_by_offset_.emplace(entry_offset, static_cast<uint32_t>(out_.cies.size()));
    out_.cies.push_back(cie);
    return ok();
  }

  Result<void> parse_fde(const EntryHeader& entry, uint32_t cie_index, Fde& fde) const {
    const Cie& cie = out_.cies[cie_index];
    ByteReader reader(out_.bytes.data() + entry.id_offset + id_size(entry), out_.bytes.data() + entry.end);
    fde = Fde{};
    fde.offset = entry.offset;
    fde.cie_index = cie_index;
    uint64_t range = 0;
    if (out_.format == CfiFormat::kEhFrame && cie.fde_pointer_encoding == (pe::kPcrel | pe::kSdata4) &&
        reader.remaining() >= 8) {
      // What every x86-64 toolchain emits; FDEs are decoded twice per build,
      // so this path skips the general decoder (and its Result).
      const uint64_t field_vaddr = out_.vaddr + out_.offset_of(reader.position());
      fde.pc_begin = field_vaddr + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(reader.u32())));
      range = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(reader.u32())));
    } else if (out_.format == CfiFormat::kEhFrame) {
      const uint64_t field_vaddr = out_.vaddr + out_.offset_of(reader.position());
      auto begin = read_encoded_pointer(reader, cie.fde_pointer_encoding, field_vaddr, out_.data_base, cie.address_size);
      if (!begin) return make_error(fmt::format("{}: FDE initial location: {}", out_.where(entry.offset), begin.error().message));
      // The range uses the format of the encoding only: it is a length.
      auto length = read_encoded_pointer(reader, cie.fde_pointer_encoding & 0x0f, 0, std::nullopt, cie.address_size);
      if (!length) return make_error(fmt::format("{}: FDE address range: {}", out_.where(entry.offset), length.error().message));
      fde.pc_begin = *begin;
      range = *length;
    } else {
      fde.pc_begin = reader.fixed(cie.address_size);
      range = reader.fixed(cie.address_size);
      if (!reader.ok()) {
        return make_error(fmt::format("{}: FDE truncated in its address range", out_.where(entry.offset)));
      }
    }
    if (cie.has_augmentation_data) {
      const uint64_t length = reader.uleb128();
      reader.skip(length);  // the LSDA pointer: for the C++ runtime only
      if (!reader.ok()) {
        return make_error(fmt::format("{}: FDE augmentation data ({} bytes) runs past the end of the FDE",
                                      out_.where(entry.offset), length));
      }
    }
    fde.range_overflows = range > std::numeric_limits<uint64_t>::max() - fde.pc_begin;
    fde.pc_end = fde.range_overflows ? std::numeric_limits<uint64_t>::max() : fde.pc_begin + range;
    fde.instructions = std::span<const uint8_t>(reader.position(), reader.end());
    return ok();
  }

  ParsedCfi out_;
  bool ends_at_terminator_ = false;
  uint64_t walk_end_ = 0;  // where next_fde stops: the section end, a terminator, or a cut
  uint64_t cursor_ = 0;
  size_t fde_entries_ = 0;
  std::unordered_map<uint64_t, uint32_t> cie_index_by_offset_;
  std::unordered_map<uint64_t, std::string> bad_cies_;  // offset -> why
  // FDEs of one CIE mostly follow each other: one map lookup per run.
  mutable uint64_t cached_cie_offset_ = ~uint64_t{0};
  mutable uint32_t cached_cie_index_ = 0;
};

CfiSectionWalker::CfiSectionWalker(const CfiSectionView& section) : impl_(std::make_unique<Impl>(section)) {}
CfiSectionWalker::CfiSectionWalker(CfiSectionWalker&&) noexcept = default;
CfiSectionWalker& CfiSectionWalker::operator=(CfiSectionWalker&&) noexcept = default;
CfiSectionWalker::~CfiSectionWalker() = default;
void CfiSectionWalker::read_cies() { impl_->read_cies(); }
size_t CfiSectionWalker::fde_entries() const { return impl_->fde_entries(); }
bool CfiSectionWalker::next_fde(Fde& fde) { return impl_->next_fde(fde); }
void CfiSectionWalker::rewind() { impl_->rewind(); }
Fde CfiSectionWalker::fde_at(uint64_t offset) const { return impl_->fde_at(offset); }
const ParsedCfi& CfiSectionWalker::cfi() const { return impl_->cfi(); }

Result<ParsedCfi> parse_cfi(const CfiSectionView& section) {
  CfiSectionWalker walker(section);
  walker.read_cies();
  std::vector<Fde> fdes;
  fdes.reserve(walker.fde_entries());
  Fde fde;
  while (walker.next_fde(fde)) fdes.push_back(fde);
  ParsedCfi out = walker.cfi();  // the section and its CIEs: small
  out.fdes = std::move(fdes);
  return out;
}

Result<ParsedCfi> parse_eh_frame(std::span<const uint8_t> bytes, uint64_t section_vaddr, std::string_view file) {
  CfiSectionView view;
  view.format = CfiFormat::kEhFrame;
  view.bytes = bytes;
  view.vaddr = section_vaddr;
  view.file = file;
  return parse_cfi(view);
}

Result<ParsedCfi> parse_debug_frame(std::span<const uint8_t> bytes, std::string_view file) {
  CfiSectionView view;
  view.format = CfiFormat::kDebugFrame;
  view.bytes = bytes;
  view.file = file;
  return parse_cfi(view);
}

}  // namespace omniprof::unwind
