// The line table decoders against what each CPython build (pyenv's, Debian's) says about its own
// code objects (dump_code.py), and the reader against a live process of each
// version, read through /proc/PID/mem.
#include "python_code_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "python_line_table.h"
#include "python_offsets_table.h"
#include "python_test_support.h"

namespace omniprof::python::test {
namespace {

struct DumpedCode {
  uint64_t address = 0;
  std::string name;
  std::string qualname;  // "-" before 3.11
  std::string file;
  int first_line = 0;
  std::vector<uint8_t> table;
  std::vector<std::pair<uint32_t, std::optional<int>>> lines;
};

struct DumpedSample {
  uint64_t address = 0;
  uint32_t instruction_offset = 0;
  int line = 0;
};

struct Dump {
  std::vector<DumpedCode> codes;
  std::vector<DumpedSample> samples;
};

// Parses dump_code.py's records until EOF or READY.
Dump parse_dump(ChildProcess& child) {
  Dump dump;
  while (auto line = child.read_line()) {
    if (*line == "READY") break;
    std::vector<std::string> fields = split(*line, '\t');
    if (fields[0] == "CODE" && fields.size() == 8) {
      DumpedCode code;
      code.address = std::stoull(fields[1]);
      code.name = fields[2];
      code.qualname = fields[3];
      code.file = fields[4];
      code.first_line = std::stoi(fields[5]);
      code.table = from_hex(fields[6]);
      for (const std::string& pair : split(fields[7], ',')) {
        std::size_t equals = pair.find('=');
        if (equals == std::string::npos) continue;
        std::string line_text = pair.substr(equals + 1);
        std::optional<int> expected;
        if (line_text != "-") expected = std::stoi(line_text);
        code.lines.emplace_back(static_cast<uint32_t>(std::stoul(pair.substr(0, equals))),
                                expected);
      }
      dump.codes.push_back(std::move(code));
    } else if (fields[0] == "SAMPLE" && fields.size() == 4) {
      // f_lasti -1 (not started) is recorded as the u32 the BPF side reads.
      auto offset = static_cast<uint32_t>(std::stoll(fields[2]));
      dump.samples.push_back({std::stoull(fields[1]), offset, std::stoi(fields[3])});
    } else {
      ADD_FAILURE() << "unexpected dump line: " << *line;
    }
  }
  return dump;
}

std::optional<ChildProcess> start_dump(const PythonBuild& version, bool wait) {
  std::vector<std::string> argv = {version.python(), OMNIPROF_PYTHON_TEST_DIR "/dump_code.py"};
  if (wait) argv.push_back("wait");
  std::string error;
  auto child = ChildProcess::start(argv, error);
  EXPECT_TRUE(child) << error;
  return child;
}

const PythonOffsetsTable& shipped_table() {
  static const PythonOffsetsTable table = PythonOffsetsTable::load_file(OMNIPROF_PYTHON_YAML);
  return table;
}

class PythonCodeReader : public ::testing::TestWithParam<PythonBuild> {};

TEST_P(PythonCodeReader, LineTableDecoderAgreesWithCPythonOnEveryOffset) {
  const PythonBuild& version = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(version);
  auto child = start_dump(version, false);
  ASSERT_TRUE(child);
  Dump dump = parse_dump(*child);
  EXPECT_EQ(child->wait(), 0);
  // 7 functions and their nested code (10 more with non-ASCII names on 3.x).
  ASSERT_GE(dump.codes.size(), 8u) << version.full;
  LineTableFormat format = line_table_format(version.major(), version.minor_number());
  std::size_t checked = 0;
  std::size_t with_line = 0;
  for (const DumpedCode& code : dump.codes) {
    ASSERT_FALSE(code.lines.empty()) << code.name;
    for (const auto& [offset, expected] : code.lines) {
      std::optional<int> line = line_for_instruction(format, code.table, code.first_line, offset);
      EXPECT_EQ(line, expected) << version.full << " " << code.name << " offset " << offset;
      ++checked;
      if (expected) ++with_line;
    }
  }
  EXPECT_GT(with_line, 100u) << version.full << ": " << checked << " offsets checked";
  // The frames' own f_lasti / f_lineno while they ran.
  std::map<uint64_t, const DumpedCode*> by_address;
  for (const DumpedCode& code : dump.codes) by_address[code.address] = &code;
  ASSERT_GE(dump.samples.size(), 10u);
  for (const DumpedSample& sample : dump.samples) {
    const DumpedCode* code = by_address[sample.address];
    ASSERT_NE(code, nullptr);
    EXPECT_EQ(
        line_for_instruction(format, code->table, code->first_line, sample.instruction_offset),
        sample.line)
        << version.full << " " << code->name << " f_lasti " << sample.instruction_offset;
  }
}

TEST_P(PythonCodeReader, ReadsLiveCodeObjectsAndRejectsGarbage) {
  const PythonBuild& version = GetParam();
  OMNIPROF_REQUIRE_PYTHON_BUILD(version);
  const PythonVersionOffsets* offsets =
      shipped_table().find(version.major(), version.minor_number());
  ASSERT_NE(offsets, nullptr);
  auto child = start_dump(version, true);
  ASSERT_TRUE(child);
  Dump dump = parse_dump(*child);
  ASSERT_GE(dump.codes.size(), 8u);
  ReadMemory read = proc_mem_reader(child->pid());
  PythonCodeCache cache;
  bool saw_qualname = false;
  for (const DumpedCode& code : dump.codes) {
    auto info = read_code_object(read, *offsets, code.address);
    ASSERT_TRUE(info) << version.full << " " << code.name << ": " << info.error().message;
    EXPECT_EQ(info->name, code.name);
    EXPECT_EQ(info->function,
              version.minor_number() >= 11 && version.major() == 3 ? code.qualname : code.name);
    EXPECT_EQ(info->file, code.file);
    EXPECT_EQ(info->first_line, code.first_line);
    EXPECT_EQ(info->line_table, code.table) << code.name;
    if (code.qualname.find('.') != std::string::npos) saw_qualname = true;
    // No offset (before the first instruction): the first line.
    auto named = cache.name_frame(static_cast<uint32_t>(child->pid()), read, *offsets, code.address,
                                  UINT32_MAX);
    ASSERT_TRUE(named) << named.error().message;
    EXPECT_EQ(named->line, code.first_line);
    EXPECT_EQ(named->function, info->function);
    if (version.minor_number() <= 10 || version.major() == 2) {
      // Past the end of co_code (whose size the dump gives: one offset per
      // byte, or per code unit on 3.10): the first line again.
      ASSERT_GT(info->code_bytes, 0u);
      uint32_t units = version.minor_number() == 10 && version.major() == 3 ? 2 : 1;
      EXPECT_EQ(info->code_bytes, code.lines.size() * units) << code.name;
      auto past = cache.name_frame(static_cast<uint32_t>(child->pid()), read, *offsets,
                                   code.address, static_cast<uint32_t>(info->code_bytes / units));
      ASSERT_TRUE(past);
      EXPECT_EQ(past->line, code.first_line);
    }
  }
  if (version.minor_number() >= 11) EXPECT_TRUE(saw_qualname);
  std::size_t cached = cache.size();
  EXPECT_EQ(cache.reads(), dump.codes.size());
  for (const DumpedSample& sample : dump.samples) {
    auto named = cache.name_frame(static_cast<uint32_t>(child->pid()), read, *offsets,
                                  sample.address, sample.instruction_offset);
    ASSERT_TRUE(named) << named.error().message;
    EXPECT_EQ(named->line, sample.line);
  }
  EXPECT_EQ(cache.reads(), dump.codes.size()) << "each code object is read once";
  EXPECT_EQ(cache.size(), cached);
  cache.drop_pid(static_cast<uint32_t>(child->pid()) + 1);
  EXPECT_EQ(cache.size(), cached);
  cache.drop_pid(static_cast<uint32_t>(child->pid()));
  EXPECT_EQ(cache.size(), 0u);

  // Unmapped, NULL, and a real object that is not a code object (a code
  // object's address + 8: its fields are other fields).
  for (uint64_t address :
       {uint64_t{0}, uint64_t{8}, uint64_t{0xdead0000000}, dump.codes[0].address + 8}) {
    auto info = read_code_object(read, *offsets, address);
    EXPECT_FALSE(info) << std::hex << address;
    if (!info) EXPECT_FALSE(info.error().message.empty());
  }
  auto pid = static_cast<uint32_t>(child->pid());
  auto garbage = cache.name_frame(pid, read, *offsets, 0xdead0000000, 0);
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().message.find(std::to_string(pid)), std::string::npos);
  EXPECT_EQ(cache.size(), 0u) << "failures are not cached";

  // The walk's tagged code values (pyperf.h): named as the address alone; a
  // tag that is not the code object's own (another code object took the
  // address since the sample) is an error, counted, never the newcomer's name.
  PythonVersionOffsets tagged_offsets = *offsets;
  set_derived_offsets(tagged_offsets);
  ASSERT_NE(tagged_offsets.bpf.code_names, PYTHON_OFFSET_NONE) << "co_name follows co_filename on " << version.full;
  EXPECT_EQ(tagged_offsets.bpf.code_names, static_cast<uint64_t>(offsets->reader.co_filename));
  PythonCodeCache tagged;
  auto first = read_code_object(read, *offsets, dump.codes[0].address);
  ASSERT_TRUE(first);
  const DumpedCode* other = nullptr;
  std::optional<PythonCodeInfo> other_info;
  for (const DumpedCode& code : dump.codes) {
    auto info = read_code_object(read, *offsets, code.address);
    ASSERT_TRUE(info);
    if (info->tag != first->tag) {
      other = &code;
      other_info = std::move(info.value());
      break;
    }
  }
  ASSERT_NE(other, nullptr) << "every dumped code object has the same tag";
  const uint64_t own = dump.codes[0].address | first->tag << PYPERF_CODE_TAG_SHIFT;
  auto named_own = tagged.name_frame(pid, read, *offsets, own, UINT32_MAX);
  ASSERT_TRUE(named_own) << named_own.error().message;
  EXPECT_EQ(named_own->function, first->function);
  const uint64_t stale = dump.codes[0].address | other_info->tag << PYPERF_CODE_TAG_SHIFT;
  auto named_stale = tagged.name_frame(pid, read, *offsets, stale, UINT32_MAX);
  ASSERT_FALSE(named_stale) << "named " << named_stale->function << " under " << other->name << "'s tag";
  EXPECT_NE(named_stale.error().message.find("not the one sampled"), std::string::npos)
      << named_stale.error().message;
  EXPECT_EQ(tagged.replaced(), 1u);
  EXPECT_EQ(tagged.size(), 1u) << "the stale value is not cached";

  // A full cache empties itself and counts it.
  PythonCodeCache small(2);
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(small.name_frame(pid, read, *offsets, dump.codes[i].address, 0));
  }
  EXPECT_EQ(small.evictions(), 1u);
  EXPECT_EQ(small.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Builds, PythonCodeReader, ::testing::ValuesIn(python_builds()),
                         python_build_test_name);

// Hand-made memory for the string reader: every kind, and garbage.
class FakeMemory {
 public:
  void put(uint64_t address, const void* data, std::size_t len) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    for (std::size_t i = 0; i < len; ++i) bytes_[address + i] = bytes[i];
  }
  ReadMemory reader() {
    return [this](uint64_t address, void* buf, std::size_t len) {
      auto* out = static_cast<uint8_t*>(buf);
      for (std::size_t i = 0; i < len; ++i) {
        auto it = bytes_.find(address + i);
        if (it == bytes_.end()) return false;
        out[i] = it->second;
      }
      return true;
    };
  }

 private:
  std::map<uint64_t, uint8_t> bytes_;
};

// A compact str of `kind` at `address` in the 3.12 layout, holding `units`.
void put_str(FakeMemory& memory, const PythonVersionOffsets& o, uint64_t address, unsigned kind,
             bool ascii, const std::vector<uint32_t>& units, int64_t claimed_length = -1) {
  uint32_t state = kind << o.reader.unicode_kind_bit | 1u << o.reader.unicode_compact_bit |
                   (ascii ? 1u : 0u) << o.reader.unicode_ascii_bit;
  int64_t length = claimed_length >= 0 ? claimed_length : static_cast<int64_t>(units.size());
  memory.put(address + o.reader.unicode_state, &state, 4);
  memory.put(address + o.reader.unicode_length, &length, 8);
  uint64_t data = address + (ascii ? o.reader.unicode_ascii_data : o.reader.unicode_compact_data);
  for (std::size_t i = 0; i < units.size(); ++i) memory.put(data + i * kind, &units[i], kind);
}

TEST(PythonStringReader, DecodesEveryKindAndRejectsGarbage) {
  const PythonVersionOffsets* o = shipped_table().find(3, 12);
  ASSERT_NE(o, nullptr);
  FakeMemory memory;
  put_str(memory, *o, 0x1000, 1, true, {'r', 'u', 'n'});
  put_str(memory, *o, 0x2000, 1, false, {'g', 'r', 0xf6, 0xdf, 'e'});
  put_str(memory, *o, 0x3000, 2, false, {0x3c0, '_', 'a'});
  put_str(memory, *o, 0x4000, 4, false, {0x2000b, 'x'});
  put_str(memory, *o, 0x5000, 1, true, {'a', 0xe9});       // non-ASCII in an ASCII str
  put_str(memory, *o, 0x6000, 3, false, {'a'});            // no kind 3
  put_str(memory, *o, 0x7000, 1, true, {'a'}, 1'000'000);  // absurd length
  put_str(memory, *o, 0x8000, 4, false, {0x110000});       // beyond Unicode
  put_str(memory, *o, 0x9000, 1, true, {'a', 'b'}, 50);    // data runs into unmapped memory
  ReadMemory read = memory.reader();
  EXPECT_EQ(read_python_string(read, *o, 0x1000).value(), "run");
  EXPECT_EQ(read_python_string(read, *o, 0x2000).value(),
            "gr\xc3\xb6\xc3\x9f"
            "e");
  EXPECT_EQ(read_python_string(read, *o, 0x3000).value(), "\xcf\x80_a");
  EXPECT_EQ(read_python_string(read, *o, 0x4000).value(), "\xf0\xa0\x80\x8bx");
  for (uint64_t bad : {0x5000, 0x6000, 0x7000, 0x8000, 0x9000, 0xa000, 0x0}) {
    auto text = read_python_string(read, *o, bad);
    EXPECT_FALSE(text) << std::hex << bad;
  }
}

TEST(PythonLineTable, CorruptTablesNeverReadPastTheEnd) {
  // A truncated long-form entry and a byte that is not an entry start.
  std::vector<uint8_t> truncated = {0xf0 | 0x07, 0x41};
  EXPECT_EQ(line_for_instruction(LineTableFormat::kLocations311, truncated, 10, 0), std::nullopt);
  std::vector<uint8_t> not_start = {0x01, 0x02};
  EXPECT_EQ(line_for_instruction(LineTableFormat::kLocations311, not_start, 10, 0), std::nullopt);
  std::vector<uint8_t> odd = {0x04, 0x01, 0x02};
  EXPECT_EQ(line_for_instruction(LineTableFormat::kLnotab36, odd, 10, 100), 11);
  EXPECT_EQ(line_for_instruction(LineTableFormat::kLinetable310, odd, 10, 100), std::nullopt);
  EXPECT_EQ(line_for_instruction(LineTableFormat::kLnotab36, {}, 10, UINT32_MAX), std::nullopt);
}

}  // namespace
}  // namespace omniprof::python::test
