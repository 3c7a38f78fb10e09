// UnwindTableStore: places executables' unwind tables in the shared BPF maps
// (see bpf/include/omniprof/bpf/abi.h): rows in fixed-size shards of
// unwind_rows, each distinct rule once in unwind_rules, and per executable
// its chunks in executable_unwind_info. Space freed by an executable that is
// unloaded is reused. Not thread-safe: the host calls the plugin's hooks one
// at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "omniprof/bpf/abi.h"
#include "unwind/unwind_table.h"

namespace omniprof::native {

// Where the table of an executable lives (for tests and stats).
struct StoredChunk {
  uint64_t low_pc = 0;
  uint64_t high_pc = 0;
  uint32_t first_row = 0;
  uint32_t num_rows = 0;
};

enum class StoreStatus {
  kOk,
  kNoSpace,        // the maps are full now: room may be made
  kTooManyChunks,  // the table needs more than OMNIPROF_MAX_CHUNKS chunks: permanent
  kChunkTooWide,   // a chunk's pc range does not fit the u32 row offset: permanent
  kMapError,
};

struct StoreResult {
  StoreStatus status = StoreStatus::kOk;
  std::string message;
};

// The BPF side of the store, so tests can run without a kernel.
class UnwindMaps {
 public:
  virtual ~UnwindMaps() = default;
  virtual bool write_rows(uint32_t first, const omniprof_unwind_row* rows, uint32_t count) = 0;
  virtual bool write_rule(uint16_t index, const omniprof_unwind_rule& rule) = 0;
  virtual bool write_info(uint64_t file_id, const omniprof_executable_unwind_info& info) = 0;
  virtual void delete_info(uint64_t file_id) = 0;
};

// UnwindMaps over the host's map fds.
class BpfUnwindMaps : public UnwindMaps {
 public:
  BpfUnwindMaps(int rows_fd, int rules_fd, int info_fd)
      : rows_fd_(rows_fd), rules_fd_(rules_fd), info_fd_(info_fd) {}
  bool write_rows(uint32_t first, const omniprof_unwind_row* rows, uint32_t count) override;
  bool write_rule(uint16_t index, const omniprof_unwind_rule& rule) override;
  bool write_info(uint64_t file_id, const omniprof_executable_unwind_info& info) override;
  void delete_info(uint64_t file_id) override;

 private:
  int rows_fd_, rules_fd_, info_fd_;
  bool batch_supported_ = true;
};

class UnwindTableStore {
 public:
  UnwindTableStore(UnwindMaps& maps, uint32_t shards, uint32_t rows_per_shard = OMNIPROF_ROWS_PER_SHARD);

  StoreResult add(uint64_t file_id, const std::vector<unwind::UnwindRow>& rows);
  void remove(uint64_t file_id);
  bool contains(uint64_t file_id) const { return tables_.count(file_id) != 0; }
  const std::vector<StoredChunk>* chunks(uint64_t file_id) const;

  uint64_t rows_used() const { return rows_used_; }
  uint64_t rows_capacity() const { return static_cast<uint64_t>(shards_) * rows_per_shard_; }
  size_t rules_used() const { return rules_.size(); }
  size_t executables() const { return tables_.size(); }

  // The compact rule of a row (exposed for tests).
  static omniprof_unwind_rule compact_rule(const unwind::UnwindRow& row);

 private:
  struct FreeRange {
    uint32_t start;
    uint32_t length;
  };
  // A free run of at least `rows` rows, or nullptr.
  FreeRange* find_free(uint32_t rows);
  FreeRange* largest_free();
  void release(uint32_t start, uint32_t length);
  bool rule_index(const omniprof_unwind_rule& rule, uint16_t& index);

  UnwindMaps& maps_;
  uint32_t shards_;
  uint32_t rows_per_shard_;
  std::vector<FreeRange> free_;  // never crossing a shard boundary
  std::map<std::tuple<uint8_t, uint8_t, int32_t, int32_t>, uint16_t> rules_;
  std::unordered_map<uint64_t, std::vector<StoredChunk>> tables_;
  uint64_t rows_used_ = 0;
};

}  // namespace omniprof::native
