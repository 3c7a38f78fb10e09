// End-to-end: native code that no symbol names (a stripped C program,
// Debian's stripped python3.11) is named after the function around it, from
// the file's unwind information (FILE+0xSTART), so that every sample of one
// unnamed function is one row of `go tool pprof -top`; the location keeps
// the sample's own address (`go tool pprof -raw`).
#include <algorithm>
#include <cinttypes>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_support.h"
#include "omniprof/support/elf_file.h"

namespace omniprof::e2e {
namespace {

// What `go tool pprof -raw` prints of a profile.
struct RawProfile {
  struct Mapping {
    uint64_t start = 0, limit = 0, offset = 0;
    std::string file;
  };
  struct Location {
    uint64_t address = 0;
    uint64_t mapping = 0;  // 0: none
    std::string function;  // of the first line
  };
  struct Sample {
    int64_t count = 0;
    std::vector<uint64_t> locations;  // leaf first
  };
  std::map<uint64_t, Mapping> mappings;
  std::map<uint64_t, Location> locations;
  std::vector<Sample> samples;
};

RawProfile read_raw(const std::string& profile, std::string& error) {
  RawProfile raw;
  auto result = run_go_pprof({"-raw", "-symbolize=none"}, profile);
  if (result.exit_code != 0) {
    error = "go tool pprof -raw failed: " + result.err;
    return raw;
  }
  static const std::regex sample(R"(^((?:\s+-?[0-9]+)+): ((?:[0-9]+ ?)*)\s*$)");
  static const std::regex location(R"(^\s*([0-9]+): (0x[0-9a-f]+) (?:M=([0-9]+) )?(?:\[F\] )?(\S+).*$)");
  static const std::regex mapping(R"(^\s*([0-9]+): (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (\S+).*$)");
  enum { kHeader, kSamples, kLocations, kMappings } part = kHeader;
  std::istringstream in(result.out);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.rfind("Samples:", 0) == 0) {
      part = kSamples;
    } else if (line.rfind("Locations", 0) == 0) {
      part = kLocations;
    } else if (line.rfind("Mappings", 0) == 0) {
      part = kMappings;
    } else if (part == kSamples && std::regex_match(line, m, sample)) {
      RawProfile::Sample s;
      s.count = std::stoll(m[1].str());
      std::istringstream ids(m[2].str());
      for (uint64_t id; ids >> id;) s.locations.push_back(id);
      raw.samples.push_back(std::move(s));
    } else if (part == kLocations && std::regex_match(line, m, location)) {
      raw.locations[std::stoull(m[1].str())] = RawProfile::Location{
          std::stoull(m[2].str(), nullptr, 16), m[3].matched ? std::stoull(m[3].str()) : 0, m[4].str()};
    } else if (part == kMappings && std::regex_match(line, m, mapping)) {
      raw.mappings[std::stoull(m[1].str())] =
          RawProfile::Mapping{std::stoull(m[2].str(), nullptr, 16), std::stoull(m[3].str(), nullptr, 16),
                              std::stoull(m[4].str(), nullptr, 16), m[5].str()};
    }
  }
  if (raw.samples.empty() || raw.locations.empty()) error = "no samples in: " + result.out.substr(0, 2000);
  return raw;
}

// The rows of `go tool pprof -top` (samples), every node: name -> flat count.
std::map<std::string, int64_t> read_top(const std::string& profile, std::string& error, std::string* text = nullptr) {
  std::map<std::string, int64_t> rows;
  // Every node: none dropped for a small share.
  auto result = run_go_pprof(
      {"-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0", "-sample_index=samples", "-symbolize=none"},
      profile);
  if (result.exit_code != 0) {
    error = "go tool pprof -top failed: " + result.err;
    return rows;
  }
  if (text) *text = result.out;
  static const std::regex row(R"(^\s*([0-9]+)\s+[0-9.]+%\s+[0-9.]+%\s+[0-9]+\s+[0-9.]+%\s+(.+)$)");
  std::istringstream in(result.out);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, row)) rows[m[2].str()] += std::stoll(m[1].str());
  }
  if (rows.empty()) error = "no rows in: " + result.out.substr(0, 2000);
  return rows;
}

std::string hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%#" PRIx64, value);
  return text;
}

// The ELF virtual address of a location of `elf`'s mapping.
std::optional<uint64_t> elf_address(const ElfFile& elf, const RawProfile::Mapping& mapping, uint64_t address) {
  return elf.file_offset_to_vaddr(address - mapping.start + mapping.offset);
}

// The start (after "+0x") of a name FILE+0xSTART, for names of `file`.
std::optional<uint64_t> named_start(const std::string& name, const std::string& file) {
  const std::string prefix = file + "+0x";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  return std::stoull(name.substr(prefix.size()), nullptr, 16);
}

// The innermost user frame of a sample (kernel frames come first).
const RawProfile::Location* user_leaf(const RawProfile& raw, const RawProfile::Sample& sample) {
  for (uint64_t id : sample.locations) {
    auto location = raw.locations.find(id);
    if (location == raw.locations.end()) return nullptr;
    auto mapping = raw.mappings.find(location->second.mapping);
    if (mapping != raw.mappings.end() && mapping->second.file == "[kernel.kallsyms]") continue;
    return &location->second;
  }
  return nullptr;
}

TEST(FunctionStartNamesTest, StrippedProgramHasOneRowPerFunctionHoldingEverySampleOfIt) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const std::string stripped = workload("seven_functions_stripped");
  const std::string file = "seven_functions_stripped";
  auto oracle = ElfFile::open(workload("seven_functions_nofp"));
  ASSERT_TRUE(oracle) << oracle.error().message;
  auto stripped_elf = ElfFile::open(stripped);
  ASSERT_TRUE(stripped_elf) << stripped_elf.error().message;
  ASSERT_FALSE(stripped_elf->has_symtab()) << stripped << " is not stripped";
  auto symbols = oracle->symbols();
  ASSERT_TRUE(symbols) << symbols.error().message;
  auto function_at = [&](uint64_t vaddr) -> const ElfSymbol* {
    for (const ElfSymbol& symbol : *symbols) {
      if (symbol.size > 0 && vaddr >= symbol.value && vaddr < symbol.value + symbol.size) return &symbol;
    }
    return nullptr;
  };

  BackgroundProcess target({stripped, "30"});
  const std::string out = temp_dir("seven_functions") + "/profile.pb.gz";
  auto result = run_command({OMNIPROF_BINARY, "record", "-d", "6", "-F", "99", "-p", std::to_string(target.pid()),
                             "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("host.frames_named_by_function_start"), std::string::npos) << result.out;

  std::string error;
  RawProfile raw = read_raw(out, error);
  ASSERT_TRUE(error.empty()) << error;
  // Leaf samples in the program, by the function the unstripped copy says
  // holds the address: the names the profile gave them, and the count.
  std::map<std::string, std::set<std::string>> names_of_function;
  std::map<std::string, std::set<std::string>> functions_of_name;
  std::map<std::string, int64_t> samples_of_function;
  std::set<uint64_t> leaf_addresses;
  int64_t program_samples = 0;
  for (const auto& sample : raw.samples) {
    const RawProfile::Location* leaf = user_leaf(raw, sample);
    if (!leaf) continue;
    auto mapping = raw.mappings.find(leaf->mapping);
    if (mapping == raw.mappings.end() || std::filesystem::path(mapping->second.file).filename() != file) continue;
    auto vaddr = elf_address(*oracle, mapping->second, leaf->address);
    ASSERT_TRUE(vaddr) << "location " << hex(leaf->address) << " is in no segment of " << file;
    const ElfSymbol* symbol = function_at(*vaddr);
    // The PLT has no symbol in either copy: it is its own "function".
    const std::string function = symbol ? symbol->name : "(no symbol: " + leaf->function + ")";
    if (symbol) {
      EXPECT_EQ(leaf->function, file + "+" + hex(symbol->value))
          << "the sample at " << hex(*vaddr) << " in " << symbol->name << " is not named after its start";
    }
    names_of_function[function].insert(leaf->function);
    functions_of_name[leaf->function].insert(function);
    samples_of_function[function] += sample.count;
    leaf_addresses.insert(leaf->address);
    program_samples += sample.count;
  }
  ASSERT_GE(program_samples, 140) << "too few samples of the program to judge\n" << result.out;
  for (const auto& [function, names] : names_of_function) {
    EXPECT_EQ(names.size(), 1u) << function << " is split over " << names.size() << " names";
  }
  for (const auto& [name, functions] : functions_of_name) {
    EXPECT_EQ(functions.size(), 1u) << name << " holds " << functions.size() << " functions";
  }
  for (const char* burn : {"burn_multiply", "burn_xorshift", "burn_rotate", "burn_divide", "burn_subtract",
                           "burn_branches", "burn_mix"}) {
    EXPECT_GE(samples_of_function[burn] * 100, program_samples * 3)
        << burn << ": " << samples_of_function[burn] << " of " << program_samples << " samples";
  }

  // What a reader sees: the program's rows with visible self time (1% or
  // more) are the seven functions, one each; with a symbol-less program the
  // rows were one per address before.
  std::string top_text;
  auto rows = read_top(out, error, &top_text);
  ASSERT_TRUE(error.empty()) << error;
  size_t visible_rows = 0, program_rows = 0;
  for (const auto& [name, flat] : rows) {
    if (!named_start(name, file)) continue;
    ++program_rows;
    if (flat * 100 < program_samples) continue;
    ++visible_rows;
    ASSERT_EQ(functions_of_name[name].size(), 1u) << name;
    EXPECT_EQ(functions_of_name[name].begin()->rfind("burn_", 0), 0u)
        << name << " (" << *functions_of_name[name].begin() << ") has visible self time";
  }
  EXPECT_LE(visible_rows, 7u) << top_text;
  std::printf("[ figure ] %zu rows of %s in go tool pprof -top (%zu with >= 1%% self), for %zu distinct leaf "
              "addresses (the rows before: one per address)\n",
              program_rows, file.c_str(), visible_rows, leaf_addresses.size());
}

// Debian's python3.11 is stripped: its static functions have no symbol. A
// busy loop's samples in them form one row per function: a few hundred rows
// at most, fewer rows than addresses, every row named after the start of an
// FDE (readelf's) that holds all its locations, and no two rows' locations
// interleave (a function is one range).
TEST(FunctionStartNamesTest, StrippedPython311HasOneRowPerUnnamedFunction) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const std::string python = "/usr/bin/python3.11";
  if (!std::filesystem::exists(python)) {
    if (in_ci()) FAIL() << python << " missing in CI (scripts/install-deps.sh installs python3.11)";
    GTEST_SKIP() << python << " missing (apt install python3.11)";
  }
  auto elf = ElfFile::open(python);
  ASSERT_TRUE(elf) << elf.error().message;
  ASSERT_FALSE(elf->has_symtab()) << python << " has a .symtab here: not the stripped build this test is about";
  const char* script =
      "import time\n"
      "end = time.time() + 30\n"
      "def burn():\n"
      "    d = {}\n"
      "    for i in range(2000):\n"
      "        d[str(i)] = [i * 1.5, (i, 'x' * (i % 7))]\n"
      "    return sorted(d, key=len)[-1] + ''.join(k for k in d if k.endswith('7'))\n"
      "while time.time() < end:\n"
      "    burn()\n";
  BackgroundProcess target({python, "-c", script});
  const std::string out = temp_dir("python_stripped") + "/profile.pb.gz";
  // Every native frame kept: by default the interpreter's own frames fold
  // into the Python frames they run, and this test is about how the
  // unnamed ones are named.
  auto result = run_command({OMNIPROF_BINARY, "record", "--keep-interpreter-internals", "-d", "5", "-F", "99", "-p",
                             std::to_string(target.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;

  std::string error;
  RawProfile raw = read_raw(out, error);
  ASSERT_TRUE(error.empty()) << error;
  const std::string file = "python3.11";
  std::map<uint64_t, std::set<uint64_t>> addresses_of_start;  // row start -> ELF addresses of its locations
  size_t addresses = 0;
  for (const auto& [id, location] : raw.locations) {
    auto start = named_start(location.function, file);
    if (!start) continue;
    auto mapping = raw.mappings.find(location.mapping);
    ASSERT_NE(mapping, raw.mappings.end()) << location.function << " has no mapping";
    auto vaddr = elf_address(*elf, mapping->second, location.address);
    ASSERT_TRUE(vaddr) << hex(location.address) << " is in no segment of " << python;
    if (addresses_of_start[*start].insert(*vaddr).second) ++addresses;
  }
  auto rows = read_top(out, error);
  ASSERT_TRUE(error.empty()) << error;
  size_t python_rows = 0;
  for (const auto& [name, flat] : rows) python_rows += named_start(name, file) ? 1 : 0;
  std::printf("[ figure ] %zu rows of %s+0x... in go tool pprof -top for %zu distinct unnamed addresses\n",
              python_rows, file.c_str(), addresses);
  ASSERT_GE(addresses, 30u) << "too few unnamed addresses sampled to judge\n" << result.out;
  EXPECT_LE(python_rows, 300u);
  EXPECT_EQ(python_rows, addresses_of_start.size());
  EXPECT_LT(addresses_of_start.size(), addresses) << "unnamed addresses are not grouped by function";
  // binutils as the oracle of the FDEs: every row starts where one does, and
  // all its addresses lie inside that FDE.
  auto frames = run_command({"readelf", "--debug-dump=frames", python});
  ASSERT_EQ(frames.exit_code, 0) << frames.err;
  std::map<uint64_t, uint64_t> fdes;  // pc_begin -> pc_end
  static const std::regex fde(R"(FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+))");
  for (std::sregex_iterator it(frames.out.begin(), frames.out.end(), fde), end; it != end; ++it) {
    fdes[std::stoull((*it)[1].str(), nullptr, 16)] = std::stoull((*it)[2].str(), nullptr, 16);
  }
  ASSERT_GT(fdes.size(), 1000u) << "readelf found too few FDEs in " << python;
  for (const auto& [start, vaddrs] : addresses_of_start) {
    auto it = fdes.find(start);
    ASSERT_NE(it, fdes.end()) << file << "+" << hex(start) << " is not the start of an FDE";
    for (uint64_t vaddr : vaddrs) {
      EXPECT_LT(vaddr, it->second) << file << "+" << hex(start) << " holds " << hex(vaddr) << ", past its FDE's end "
                                   << hex(it->second);
    }
  }
  // Each row is one range: its addresses lie in [start, next row's start).
  for (auto it = addresses_of_start.begin(); it != addresses_of_start.end(); ++it) {
    const uint64_t start = it->first;
    auto next = std::next(it);
    for (uint64_t vaddr : it->second) {
      EXPECT_GE(vaddr, start) << file << "+" << hex(start) << " holds an address before its start: " << hex(vaddr);
      if (next != addresses_of_start.end()) {
        EXPECT_LT(vaddr, next->first) << file << "+" << hex(start) << " holds " << hex(vaddr) << ", past the start "
                                      << "of the next row " << hex(next->first);
      }
    }
  }
}

}  // namespace
}  // namespace omniprof::e2e
