#include "omniprof/support/cfi/elf_cfi.h"

#include <elf.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "omniprof/support/debug_file_finder.h"
#include "omniprof/support/elf_file.h"
#include "omniprof/support/cfi/byte_reader.h"
#include "omniprof/support/cfi/eh_frame_hdr.h"

namespace omniprof::unwind {

bool fde_in_code(const Fde& fde, std::span<const CodeRange> code_ranges) {
  if (fde.range_overflows || fde.pc_begin >= fde.pc_end) return false;
  if (code_ranges.empty()) return true;
  for (const CodeRange& range : code_ranges) {
    if (fde.pc_begin >= range.begin && fde.pc_end <= range.end) return true;
  }
  return false;
}

CfiSectionView CfiSection::view() const {
  CfiSectionView view;
  view.format = format;
  view.bytes = std::span<const uint8_t>(data.get(), size);
  view.vaddr = vaddr;
  view.file = file;
  view.name = name;
  view.file_offset = file_offset;
  view.ends_at_terminator = ends_at_terminator;
  return view;
}

namespace {

// The first section of `names` with bytes in the file (a separate debug file
// keeps .eh_frame as SHT_NOBITS), read whole: one pread into the section's
// own buffer, or inflated when compressed.
Result<std::optional<CfiSection>> read_cfi_section(const ElfFile& elf, std::initializer_list<std::string_view> names,
                                                   CfiFormat format) {
  for (const ElfSection& section : elf.sections()) {
    if (std::find(names.begin(), names.end(), section.name) == names.end()) continue;
    if (section.type == SHT_NOBITS || section.size == 0) continue;
    auto bytes = elf.read_section(section);
    if (!bytes) return bytes.error();
    CfiSection out;
    out.format = format;
    out.file = elf.path();
    out.name = section.name;
    out.vaddr = (section.flags & SHF_ALLOC) != 0 ? section.addr : 0;
    out.data = std::move(bytes->data);
    out.size = bytes->size;
    out.compressed = section.compressed();
    if (!out.compressed) out.file_offset = section.offset;
    return std::optional<CfiSection>(std::move(out));
  }
  return std::optional<CfiSection>();
}

// .eh_frame without section headers: PT_GNU_EH_FRAME gives .eh_frame_hdr,
// whose eh_frame_ptr gives the start of .eh_frame. The end is the end of the
// last FDE of the header's search table; without a table, the zero
// terminator that crtend.o puts after the last FDE.
Result<std::optional<CfiSection>> read_eh_frame_through_hdr(const ElfFile& elf) {
  const std::vector<ProgramHeader>& headers = elf.program_headers();
  auto hdr_segment = std::find_if(headers.begin(), headers.end(),
                                  [](const ProgramHeader& phdr) { return phdr.type == PT_GNU_EH_FRAME; });
  if (hdr_segment == headers.end()) return std::optional<CfiSection>();
  auto hdr_bytes = elf.read_file_bytes(hdr_segment->offset, hdr_segment->filesz, "PT_GNU_EH_FRAME segment");
  if (!hdr_bytes) return hdr_bytes.error();
  auto hdr = parse_eh_frame_hdr(std::span<const uint8_t>(hdr_bytes->data.get(), hdr_bytes->size), hdr_segment->vaddr,
                                elf.path());
  if (!hdr) return hdr.error();

  // The PT_LOAD whose file contents hold .eh_frame's first byte.
  const ProgramHeader* load = nullptr;
  for (const ProgramHeader& phdr : headers) {
    if (phdr.type == PT_LOAD && hdr->eh_frame_vaddr >= phdr.vaddr && hdr->eh_frame_vaddr - phdr.vaddr < phdr.filesz) {
      load = &phdr;
    }
  }
  if (load == nullptr) {
    return make_error(fmt::format("{}: .eh_frame_hdr points at .eh_frame address {:#x}, which no PT_LOAD segment holds",
                                  elf.path(), hdr->eh_frame_vaddr));
  }
  const uint64_t start_in_segment = hdr->eh_frame_vaddr - load->vaddr;
  uint64_t size = load->filesz - start_in_segment;
  bool ends_at_terminator = true;
  if (hdr->last_fde_vaddr) {
    const uint64_t last = *hdr->last_fde_vaddr;
    if (last < hdr->eh_frame_vaddr || last - hdr->eh_frame_vaddr >= size) {
      return make_error(fmt::format("{}: .eh_frame_hdr lists an FDE at {:#x}, outside .eh_frame's segment", elf.path(),
                                    last));
    }
    // Read the last FDE's length to know where .eh_frame's last FDE ends.
    const uint64_t last_offset = load->offset + start_in_segment + (last - hdr->eh_frame_vaddr);
    uint8_t length_bytes[12] = {};
    const uint64_t readable = std::min<uint64_t>(12, size - (last - hdr->eh_frame_vaddr));
    if (auto read = elf.read_file_range(last_offset, readable, length_bytes, "the last FDE listed by .eh_frame_hdr");
        !read) {
      return read.error();
    }
    ByteReader length_reader(length_bytes, length_bytes + readable);
    uint64_t length = length_reader.u32();
    uint64_t header_size = 4;
    if (length == 0xffffffff) {
      length = length_reader.u64();
      header_size = 12;
    }
    if (!length_reader.ok()) {
      return make_error(fmt::format("{}: the last FDE listed by .eh_frame_hdr (at {:#x}) is truncated", elf.path(), last));
    }
    const uint64_t end_in_eh_frame = (last - hdr->eh_frame_vaddr) + header_size + length;
    // A bad length is reported by the parser, which knows the offsets;
    // bounding by the segment keeps the read in the file.
    size = std::min(size, end_in_eh_frame);
    ends_at_terminator = false;
  }
  auto bytes = elf.read_file_bytes(load->offset + start_in_segment, size, ".eh_frame (through PT_GNU_EH_FRAME)");
  if (!bytes) return bytes.error();
  CfiSection section;
  section.format = CfiFormat::kEhFrame;
  section.file = elf.path();
  section.name = ".eh_frame";
  section.data = std::move(bytes->data);
  section.size = size;
  section.vaddr = hdr->eh_frame_vaddr;
  section.file_offset = load->offset + start_in_segment;
  section.through_eh_frame_hdr = true;
  section.ends_at_terminator = ends_at_terminator;
  return std::optional<CfiSection>(std::move(section));
}

// .debug_frame (or .zdebug_frame) of a file, if it has one with contents.
Result<std::optional<CfiSection>> read_debug_frame(const ElfFile& elf, bool from_debug_file) {
  auto section = read_cfi_section(elf, {".debug_frame", ".zdebug_frame"}, CfiFormat::kDebugFrame);
  if (section && *section) (*section)->from_debug_file = from_debug_file;
  return section;
}

}  // namespace

Result<ElfCfi> read_elf_cfi(const std::string& path, const CfiReadOptions& options) {
  auto elf = ElfFile::open(path);
  if (!elf) return elf.error();
  if (elf->machine() != EM_X86_64) {
    return make_error(fmt::format("{}: not an x86-64 file (e_machine {})", path, elf->machine()));
  }
  if (!elf->is_64bit_little_endian()) return make_error(fmt::format("{}: not a 64-bit little-endian ELF file", path));

  ElfCfi result;
  result.path = path;
  result.build_id = elf->build_id();
  for (const LoadSegment& segment : elf->load_segments()) {
    if ((segment.flags & PF_X) != 0 && segment.memsz > 0) {
      result.code_ranges.push_back(CodeRange{segment.vaddr, segment.vaddr + segment.memsz});
    }
  }

  auto eh_frame = read_cfi_section(*elf, {".eh_frame"}, CfiFormat::kEhFrame);
  if (!eh_frame) return eh_frame.error();
  if (!*eh_frame) eh_frame = read_eh_frame_through_hdr(*elf);
  if (!eh_frame) return eh_frame.error();
  if (*eh_frame) result.sections.push_back(std::move(**eh_frame));

  auto debug_frame = read_debug_frame(*elf, false);
  if (!debug_frame) return debug_frame.error();
  if (*debug_frame) {
    result.sections.push_back(std::move(**debug_frame));
  } else if (options.use_debug_file) {
    const DebugFileFinder finder(options.debug_root);
    std::optional<std::string> debug_path = finder.find(path, result.build_id, elf->debuglink());
    if (debug_path && *debug_path != path) {
      result.debug_file = *debug_path;
      auto debug_elf = ElfFile::open(*debug_path);
      if (!debug_elf) return debug_elf.error();
      auto separate = read_debug_frame(*debug_elf, true);
      if (!separate) return separate.error();
      if (*separate) result.sections.push_back(std::move(**separate));
    }
  }
  return result;
}

}  // namespace omniprof::unwind
