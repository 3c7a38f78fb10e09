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

}  // namespace

// Takes kallsyms a line at a time, so that load() never holds the file whole
// (5-10 MB on distribution kernels, read while start-up builds unwind tables:
// holding it whole raised the agent's peak RSS by ~7 MB, bench/agent_overhead).
class KernelSymbols::Builder {
 public:
  explicit Builder(const std::string& source) : source_(source) {
    result_.modules_.push_back("");
    module_indexes_.emplace("", 0);
  }

  Result<void> add_line(std::string_view line) {
    ++line_number_;
    std::string_view rest = line;
    const std::string_view address_field = next_field(rest, kFieldSeparators);
    if (address_field.empty()) return ok();  // blank line
    const std::string_view type_field = next_field(rest, kFieldSeparators);
    const std::string_view name_field = next_field(rest, kFieldSeparators);
    const std::string_view module_field = next_field(rest, kFieldSeparators);
    uint64_t address = 0;
    const auto [end, ec] = std::from_chars(address_field.data(), address_field.data() + address_field.size(), address, 16);
    const bool module_ok = module_field.empty() ||
                           (module_field.size() > 2 && module_field.front() == '[' && module_field.back() == ']');
    if (ec != std::errc() || end != address_field.data() + address_field.size() || type_field.size() != 1 ||
        name_field.empty() || !module_ok || !next_field(rest, kFieldSeparators).empty()) {
      return make_error(fmt::format("{}:{}: malformed kallsyms line: \"{}\"", source_, line_number_, line));
    }
    any_line_ = true;
    any_nonzero_address_ |= address != 0;

    const int rank = type_rank(type_field[0]);
    if (rank < 0) return ok();
    Entry entry;
    entry.start = address;
    entry.name_offset = static_cast<uint32_t>(result_.names_.size());
    entry.name_length = static_cast<uint32_t>(name_field.size());
    entry.rank = static_cast<uint8_t>(rank);
    result_.names_.append(name_field);
    if (!module_field.empty()) {
      std::string module(module_field.substr(1, module_field.size() - 2));
      auto [slot, inserted] = module_indexes_.try_emplace(module, static_cast<uint32_t>(result_.modules_.size()));
      if (inserted) result_.modules_.push_back(std::move(module));
      entry.module_index = slot->second;
    }
    result_.symbols_.push_back(entry);
    return ok();
  }

  Result<KernelSymbols> finish() && {
    if (any_line_ && !any_nonzero_address_) {
      return make_error(fmt::format(
          "{}: every symbol address is 0: kernel.kptr_restrict hides kernel addresses from this process; "
          "run as root (with CAP_SYSLOG) or set kernel.kptr_restrict=0 (sysctl -w kernel.kptr_restrict=0)",
          source_));
    }
    std::vector<Entry>& entries = result_.symbols_;
    if (entries.empty()) return make_error(fmt::format("{}: no kernel text symbols", source_));

    const std::string_view names = result_.names_;
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
    entries.erase(std::unique(entries.begin(), entries.end(),
                              [](const Entry& a, const Entry& b) { return a.start == b.start; }),
                  entries.end());
    return std::move(result_);
  }

 private:
  const std::string& source_;
  KernelSymbols result_;
  std::unordered_map<std::string, uint32_t> module_indexes_;
  size_t line_number_ = 0;
  bool any_line_ = false;
  bool any_nonzero_address_ = false;
};

Result<KernelSymbols> KernelSymbols::load(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return make_error(fmt::format("{}: {}", path, std::strerror(errno)));
  Builder builder(path);
  std::string pending;  // the read's last line, until its newline arrives
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    if (n == 0) break;
    std::string_view chunk(buffer, static_cast<size_t>(n));
    if (!pending.empty()) {
      const size_t newline = chunk.find('\n');
      if (newline == std::string_view::npos) {
        pending.append(chunk);
        continue;
      }
      pending.append(chunk.substr(0, newline));
      if (auto added = builder.add_line(pending); !added) return added.error();
      pending.clear();
      chunk.remove_prefix(newline + 1);
    }
    const size_t last_newline = chunk.rfind('\n');
    std::string_view whole_lines = chunk.substr(0, last_newline == std::string_view::npos ? 0 : last_newline + 1);
    pending.assign(chunk.substr(whole_lines.size()));
    while (!whole_lines.empty()) {
      if (auto added = builder.add_line(next_line(whole_lines)); !added) return added.error();
    }
  }
  if (!pending.empty()) {
    if (auto added = builder.add_line(pending); !added) return added.error();
  }
  return std::move(builder).finish();
}

Result<KernelSymbols> KernelSymbols::parse(std::string_view text, const std::string& source) {
  Builder builder(source);
  while (!text.empty()) {
    if (auto added = builder.add_line(next_line(text)); !added) return added.error();
  }
  return std::move(builder).finish();
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
