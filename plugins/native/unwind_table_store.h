// UnwindTableStore: places executables' unwind tables in the shared BPF maps
// (see bpf/include/omniprof/bpf/abi.h): rows in shards of
// OMNIPROF_ROWS_PER_SHARD rows, each distinct rule once in unwind_rules, and
// per executable its chunks in executable_unwind_info.
//
// The store starts with no shard and creates one (through the host) only
// when no free run holds the next table, up to the budget of `max_shards`;
// only then does it cut a table into the leftovers of existing shards. Space
// freed by an executable that is unloaded is reused; shards, once created,
// stay for the agent's life. Not thread-safe: the host calls the plugin's
// hooks one at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "omniprof/bpf/abi.h"
#include "omniprof/plugin.h"
#include "unwind/unwind_table.h"

namespace omniprof::native {

// Where the table of an executable lives (for tests and stats).
struct StoredChunk {
  uint64_t low_pc = 0;
  uint64_t high_pc = 0;
  uint32_t shard = 0;
  uint32_t first_row = 0;  // in the shard
  uint32_t num_rows = 0;
};

enum class StoreStatus {
  kOk,
  kNoSpace,        // every shard the budget allows is full: may fit after others are unloaded
  kTooManyChunks,  // free space is too fragmented for the chunk limit: may fit after unloads
  kTooLarge,       // can never fit, even in an empty store: a permanent failure
  kMapError,       // a BPF map write or shard creation failed
};

struct StoreResult {
  StoreStatus status = StoreStatus::kOk;
  std::string message;
};

// The BPF side of the store, so tests can run without a kernel.
class UnwindMaps {
 public:
  virtual ~UnwindMaps() = default;
  // Creates shard `index`: kOk, kNoSpace (the host's budget refuses it) or
  // kMapError.
  virtual StoreResult add_shard(uint32_t index) = 0;
  virtual bool write_rows(uint32_t shard, uint32_t first, const omniprof_unwind_row* rows, uint32_t count) = 0;
  virtual bool write_rule(uint16_t index, const omniprof_unwind_rule& rule) = 0;
  virtual bool write_info(uint64_t file_id, const omniprof_executable_unwind_info& info) = 0;
  virtual void delete_info(uint64_t file_id) = 0;
};

// UnwindMaps over the host's maps: shards are created by the host
// (omniprof_host_api.create_inner_map, which `host` must have: ABI 1.2),
// which owns them and their fds.
class BpfUnwindMaps : public UnwindMaps {
 public:
  BpfUnwindMaps(const omniprof_host_api* host, int rules_fd, int info_fd)
      : host_(host), rules_fd_(rules_fd), info_fd_(info_fd) {}
  StoreResult add_shard(uint32_t index) override;
  bool write_rows(uint32_t shard, uint32_t first, const omniprof_unwind_row* rows, uint32_t count) override;
  bool write_rule(uint16_t index, const omniprof_unwind_rule& rule) override;
  bool write_info(uint64_t file_id, const omniprof_executable_unwind_info& info) override;
  void delete_info(uint64_t file_id) override;

 private:
  const omniprof_host_api* host_;
  int rules_fd_, info_fd_;
  std::vector<int> shard_fds_;  // by shard index; owned by the host
  bool batch_supported_ = true;
};

class UnwindTableStore {
 public:
  UnwindTableStore(UnwindMaps& maps, uint32_t max_shards, uint32_t rows_per_shard = OMNIPROF_ROWS_PER_SHARD,
                   uint32_t max_chunks = OMNIPROF_MAX_CHUNKS);

  StoreResult add(uint64_t file_id, const std::vector<unwind::UnwindRow>& rows);
  void remove(uint64_t file_id);
  bool contains(uint64_t file_id) const { return tables_.count(file_id) != 0; }
  const std::vector<StoredChunk>* chunks(uint64_t file_id) const;

  uint64_t rows_used() const { return rows_used_; }
  uint32_t shards() const { return shards_; }  // created so far
  uint32_t max_shards() const { return max_shards_; }
  uint64_t rows_capacity() const { return static_cast<uint64_t>(shards_) * rows_per_shard_; }
  size_t rules_used() const { return rules_.size(); }
  size_t executables() const { return tables_.size(); }

  // The compact rule of a row (exposed for tests).
  static omniprof_unwind_rule compact_rule(const unwind::UnwindRow& row);

 private:
  struct FreeRange {
    uint32_t start;  // global row index: shard * rows_per_shard + row
    uint32_t length;
  };
  struct Placement {
    size_t begin, end;  // rows [begin, end) of the table
    uint32_t start;     // global row index of the first
  };
  struct Plan {
    StoreResult result;
    std::vector<Placement> placements;
    std::vector<FreeRange> free;  // free_ after the placements
    uint32_t shards = 0;          // shards needed, counting the new ones
  };
  Plan plan(const std::vector<unwind::UnwindRow>& rows) const;
  // Rows [next, end) where end is the last function boundary that fits in
  // `room` rows; `next` when not even one function fits.
  static size_t cut(const std::vector<unwind::UnwindRow>& rows, size_t next, uint32_t room);
  void release(uint32_t start, uint32_t length);
  bool rule_index(const omniprof_unwind_rule& rule, uint16_t& index);

  UnwindMaps& maps_;
  uint32_t max_shards_;
  uint32_t rows_per_shard_;
  uint32_t max_chunks_;
  uint32_t shards_ = 0;
  std::vector<FreeRange> free_;  // never crossing a shard boundary
  std::map<std::tuple<uint8_t, uint8_t, int32_t, int32_t>, uint16_t> rules_;
  std::unordered_map<uint64_t, std::vector<StoredChunk>> tables_;
  uint64_t rows_used_ = 0;
};

}  // namespace omniprof::native
