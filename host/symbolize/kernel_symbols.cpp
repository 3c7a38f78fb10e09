#include "symbolize/kernel_symbols.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "omniprof/support/text_fields.h"
#include "common/file_io.h"
#include "omniprof/support/unique_fd.h"

namespace omniprof {
namespace {

// Preference among aliases at one address: global text, weak, then local.
int type_rank(char type) {
  switch (type) {
    case 'T':
      return 0;
    case 'W':
      return 1;
    case 't':
      return 2;
    case 'w':
      return 3;
    default:
      return -1;  // not a text symbol
  }
}

// kallsyms fields are separated by spaces or tabs (the module column by a tab).
constexpr std::string_view kFieldSeparators = " \t";

Result<std::string> read_whole_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return make_error(fmt::format("{}: {}", path, std::strerror(errno)));
  std::string text;
  if (int error = read_to_end(fd.get(), text); error != 0) {
    return make_error(fmt::format("{}: read failed: {}", path, std::strerror(error)));
  }
  return text;
}

}  // namespace

Result<KernelSymbols> KernelSymbols::load(const std::string& path) {
  auto text = read_whole_file(path);
  if (!text) return text.error();
  return parse(*text, path);
}

Result<KernelSymbols> KernelSymbols::parse(std::string_view text, const std::string& source) {
  KernelSymbols result;
  result.modules_.push_back("");
  std::unordered_map<std::string, uint32_t> module_indexes{{"", 0}};
  std::vector<Entry> entries;
  bool any_line = false;
  bool any_nonzero_address = false;

  size_t line_number = 0;
  while (!text.empty()) {
    const std::string_view line = next_line(text);
    ++line_number;

    std::string_view rest = line;
    const std::string_view address_field = next_field(rest, kFieldSeparators);
    if (address_field.empty()) continue;  // blank line
    const std::string_view type_field = next_field(rest, kFieldSeparators);
    const std::string_view name_field = next_field(rest, kFieldSeparators);
    const std::string_view module_field = next_field(rest, kFieldSeparators);
    uint64_t address = 0;
    const auto [end, ec] = std::from_chars(address_field.data(), address_field.data() + address_field.size(), address, 16);
    const bool module_ok = module_field.empty() ||
                           (module_field.size() > 2 && module_field.front() == '[' && module_field.back() == ']');
    if (ec != std::errc() || end != address_field.data() + address_field.size() || type_field.size() != 1 ||
        name_field.empty() || !module_ok || !next_field(rest, kFieldSeparators).empty()) {
      return make_error(fmt::format("{}:{}: malformed kallsyms line: \"{}\"", source, line_number, line));
    }
    any_line = true;
    any_nonzero_address |= address != 0;

    const int rank = type_rank(type_field[0]);
    if (rank < 0) continue;
    Entry entry;
    entry.start = address;
    entry.name_offset = static_cast<uint32_t>(result.names_.size());
    entry.name_length = static_cast<uint32_t>(name_field.size());
    entry.rank = static_cast<uint8_t>(rank);
    result.names_.append(name_field);
    if (!module_field.empty()) {
      std::string module(module_field.substr(1, module_field.size() - 2));
      auto [slot, inserted] = module_indexes.try_emplace(module, static_cast<uint32_t>(result.modules_.size()));
      if (inserted) result.modules_.push_back(std::move(module));
      entry.module_index = slot->second;
    }
    entries.push_back(entry);
  }

  if (any_line && !any_nonzero_address) {
    return make_error(fmt::format(
        "{}: every symbol address is 0: kernel.kptr_restrict hides kernel addresses from this process; "
        "run as root (with CAP_SYSLOG) or set kernel.kptr_restrict=0 (sysctl -w kernel.kptr_restrict=0)",
        source));
  }
  if (entries.empty()) return make_error(fmt::format("{}: no kernel text symbols", source));

  const std::string_view names = result.names_;
  auto name_of = [names](const Entry& e) { return names.substr(e.name_offset, e.name_length); };
  // Among aliases at one address keep one, chosen deterministically: best
  // type, then the plainest name.
  auto preference = [&](const Entry& e) {
    const std::string_view name = name_of(e);
    const size_t underscores = std::min(name.find_first_not_of('_'), name.size());
    return std::make_tuple(e.start, e.rank, underscores, name.size(), name);
  };
  std::sort(entries.begin(), entries.end(),
            [&](const Entry& a, const Entry& b) { return preference(a) < preference(b); });
  for (const Entry& entry : entries) {
    if (result.symbols_.empty() || result.symbols_.back().start != entry.start) result.symbols_.push_back(entry);
  }
  return result;
}

std::optional<KernelSymbol> KernelSymbols::lookup(uint64_t addr) const {
  auto after = std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                                [](uint64_t a, const Entry& entry) { return a < entry.start; });
  if (after == symbols_.begin()) return std::nullopt;
  const Entry& entry = *(after - 1);
  if (addr - entry.start > kMaxSymbolSpan) return std::nullopt;
  return KernelSymbol{names_.substr(entry.name_offset, entry.name_length), modules_[entry.module_index], entry.start};
}

}  // namespace omniprof
