#include "perf_map.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "omniprof/support/regular_file.h"

namespace omniprof::perfmap {

namespace {

// A hex number with an optional 0x; the whole field must be digits.
std::optional<uint64_t> parse_hex(std::string_view field) {
  if (field.size() > 2 && field[0] == '0' && (field[1] == 'x' || field[1] == 'X')) field.remove_prefix(2);
  if (field.empty() || field.size() > 16) return std::nullopt;
  uint64_t value = 0;
  for (char c : field) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  return value;
}

// The next space-separated field of `rest`, which then starts after it.
std::string_view next_field(std::string_view& rest) {
  size_t begin = rest.find_first_not_of(" \t");
  if (begin == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(begin);
  size_t end = rest.find_first_of(" \t");
  std::string_view field = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  return field;
}

}  // namespace

Result<PerfMapLine> parse_perf_map_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::string_view rest = line;
  std::string_view start_field = next_field(rest);
  std::string_view size_field = next_field(rest);
  auto start = parse_hex(start_field);
  if (!start) return make_error("start '" + std::string(start_field) + "' is not a hex address");
  auto size = parse_hex(size_field);
  if (!size) return make_error("size '" + std::string(size_field) + "' is not a hex number");
  if (*size > std::numeric_limits<uint64_t>::max() - *start) return make_error("start + size overflows");
  size_t name_begin = rest.find_first_not_of(" \t");
  if (name_begin == std::string_view::npos) return make_error("no name after start and size");
  return PerfMapLine{*start, *size, rest.substr(name_begin)};
}

void PerfMapSymbols::add(uint64_t start, uint64_t size, std::string_view name) {
  auto index = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  if (size == 0) return;  // covers no address
  const uint64_t end = start + size;
  // The piece that starts before `start` and reaches into it: keep its head,
  // and its tail if it reaches past `end`.
  auto it = pieces_.lower_bound(start);
  if (it != pieces_.begin()) {
    auto before = std::prev(it);
    if (before->second.end > start) {
      Piece old = before->second;
      before->second.end = start;
      if (old.end > end) pieces_.emplace(end, Piece{old.end, old.name});
    }
  }
  // Pieces starting inside [start, end): gone, but for a tail past `end`.
  it = pieces_.lower_bound(start);
  while (it != pieces_.end() && it->first < end) {
    Piece old = it->second;
    it = pieces_.erase(it);
    if (old.end > end) {
      pieces_.emplace(end, old);
      break;
    }
  }
  pieces_.emplace(start, Piece{end, index});
}

const std::string* PerfMapSymbols::lookup(uint64_t address) const {
  auto it = pieces_.upper_bound(address);
  if (it == pieces_.begin()) return nullptr;
  --it;
  if (address >= it->second.end) return nullptr;
  return &names_[it->second.name];
}

void PerfMapSymbols::clear() {
  pieces_.clear();
  names_.clear();
}

void PerfMapReader::reset() {
  symbols_.clear();
  offset_ = 0;
  line_ = 0;
  skipping_ = false;
}

void PerfMapReader::count_malformed(Update& update, const std::string& why) {
  ++update.malformed;
  ++malformed_total_;
  if (reported_malformed_) return;
  reported_malformed_ = true;
  update.first_malformed = path_ + ":" + std::to_string(line_) + ": " + why;
}

void PerfMapReader::parse_chunk(std::string_view chunk, Update& update) {
  while (!chunk.empty()) {
    size_t newline = chunk.find('\n');
    std::string_view line = chunk.substr(0, newline);
    chunk.remove_prefix(newline == std::string_view::npos ? chunk.size() : newline + 1);
    ++line_;
    ++update.lines;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank: nothing to name
    auto parsed = parse_perf_map_line(line);
    if (!parsed) {
      count_malformed(update, parsed.error().message);
      continue;
    }
    symbols_.add(parsed->start, parsed->size, parsed->name);
  }
}

Result<PerfMapReader::Update> PerfMapReader::refresh() {
  auto file = open_regular_file(path_);
  if (!file) return file.error();
  const int fd = file->fd.get();
  Update update;
  const auto size = static_cast<uint64_t>(file->st.st_size);
  bool same_file = opened_ && file->st.st_dev == dev_ && file->st.st_ino == ino_;
  if (same_file && offset_ > 0 && !skipping_) {
    char last = 0;
    // Shorter than what was read, or rewritten since: read it all again.
    if (size < offset_ || pread(fd, &last, 1, static_cast<off_t>(offset_ - 1)) != 1 || last != '\n') {
      same_file = false;
    }
  }
  if (!same_file) {
    if (opened_) update.reread = true;
    if (opened_ && (file->st.st_dev != dev_ || file->st.st_ino != ino_)) reported_malformed_ = false;
    reset();
    opened_ = true;
    dev_ = file->st.st_dev;
    ino_ = file->st.st_ino;
  }
  if (size <= offset_) return update;
  std::string buffer(static_cast<size_t>(std::min<uint64_t>(size - offset_, kMaxBytesPerRefresh)), '\0');
  size_t got = 0;
  while (got < buffer.size()) {
    ssize_t n = pread(fd, buffer.data() + got, buffer.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(path_ + ": read at offset " + std::to_string(offset_ + got) + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  buffer.resize(got);
  std::string_view data(buffer);
  if (skipping_) {
    // The rest of an over-long line: up to its '\n'.
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      offset_ += data.size();
      return update;
    }
    skipping_ = false;
    offset_ += newline + 1;
    data.remove_prefix(newline + 1);
  }
  size_t complete = data.rfind('\n');
  if (complete == std::string_view::npos) {
    // No line end yet: a line being written, unless it is longer than a
    // whole refresh's worth, which no JIT writes: skipped as malformed.
    if (data.size() < kMaxBytesPerRefresh) return update;
    count_malformed(update, "a line longer than " + std::to_string(kMaxBytesPerRefresh) + " bytes");
    skipping_ = true;
    offset_ += data.size();
    return update;
  }
  parse_chunk(data.substr(0, complete + 1), update);
  offset_ += complete + 1;
  return update;
}

}  // namespace omniprof::perfmap
