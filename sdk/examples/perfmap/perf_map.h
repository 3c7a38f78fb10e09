// The perf map files JITs write for perf: /tmp/perf-PID.map, one line per
// piece of generated code, "START SIZE name" (hex, START and SIZE with or
// without 0x; the name is the rest of the line and may hold spaces).
// Node.js (--perf-basic-prof), JVM perf-map agents, .NET
// (DOTNET_PerfMapEnabled) and LuaJIT write them, appending as they compile.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "omniprof/support/result.h"

namespace omniprof::perfmap {

struct PerfMapLine {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string_view name;  // into the parsed line
};

// One line (without its '\n'). An error says what is wrong with it.
Result<PerfMapLine> parse_perf_map_line(std::string_view line);

// The names of one perf map by address. Where entries overlap (code freed
// and its memory reused by the JIT) the later one wins, as in perf: an
// added entry cuts what it covers out of the entries before it.
class PerfMapSymbols {
 public:
  void add(uint64_t start, uint64_t size, std::string_view name);
  // The name of the code holding `address`, or nullptr.
  const std::string* lookup(uint64_t address) const;
  // Entries added (a cut entry still counts once).
  size_t entries() const { return names_.size(); }
  void clear();

 private:
  struct Piece {
    uint64_t end;   // exclusive
    uint32_t name;  // index into names_
  };
  std::map<uint64_t, Piece> pieces_;  // by start; never overlapping
  std::vector<std::string> names_;
};

// Reads one perf map file as it grows. Each refresh reads only the complete
// lines appended since the last one (a line still being written waits for
// its '\n'); a file that got shorter, was replaced (another inode), or
// whose byte before the offset read so far is no longer the '\n' it was
// (truncated and rewritten) is read again from the start. A malformed line
// is skipped and counted; the first one of each file is reported once.
class PerfMapReader {
 public:
  // At most this many bytes per refresh: a huge map is read over several.
  static constexpr size_t kMaxBytesPerRefresh = 16u << 20;

  explicit PerfMapReader(std::string path) : path_(std::move(path)) {}

  struct Update {
    uint64_t lines = 0;      // complete lines read by this refresh
    uint64_t malformed = 0;  // of them, skipped as malformed
    bool reread = false;     // the file was read again from the start
    // "PATH:LINE: why", for the first malformed line of this file.
    std::optional<std::string> first_malformed;
  };
  Result<Update> refresh();

  const PerfMapSymbols& symbols() const { return symbols_; }
  const std::string& path() const { return path_; }
  uint64_t malformed_lines() const { return malformed_total_; }
  uint64_t offset() const { return offset_; }

 private:
  void reset();
  void parse_chunk(std::string_view chunk, Update& update);
  void count_malformed(Update& update, const std::string& why);

  std::string path_;
  PerfMapSymbols symbols_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool opened_ = false;
  uint64_t offset_ = 0;  // bytes consumed: just after a '\n', unless skipping_
  bool skipping_ = false;  // inside an over-long line, skipped up to its '\n'
  uint64_t line_ = 0;    // lines consumed
  uint64_t malformed_total_ = 0;
  bool reported_malformed_ = false;
};

}  // namespace omniprof::perfmap
