// UnwindTableStore against in-memory maps: chunking, rule sharing, space
// accounting and reuse, without a kernel.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "unwind_table_store.h"

namespace omniprof::native {
namespace {

using unwind::CfaRule;
using unwind::RbpRule;
using unwind::UnwindRow;

// Shards of `rows_per_shard` rows created on request, up to `budget` of
// them (the host's refusal past maps.unwind_memory_mb).
class MemoryMaps : public UnwindMaps {
 public:
  MemoryMaps(uint32_t rows_per_shard, uint32_t budget) : rows_per_shard_(rows_per_shard), budget_(budget) {}
  StoreResult add_shard(uint32_t index) override {
    if (index != shards_.size()) return {StoreStatus::kMapError, "shards created out of order"};
    if (index >= budget_) return {StoreStatus::kNoSpace, "budget spent"};
    shards_.emplace_back(rows_per_shard_);
    return {};
  }
  bool write_rows(uint32_t shard, uint32_t first, const omniprof_unwind_row* rows, uint32_t count) override {
    if (fail_writes_ || shard >= shards_.size() || first + count > rows_per_shard_) return false;
    std::copy(rows, rows + count, shards_[shard].begin() + first);
    return true;
  }
  bool write_rule(uint16_t index, const omniprof_unwind_rule& rule) override {
    rules_[index] = rule;
    return true;
  }
  bool write_info(uint64_t file_id, const omniprof_executable_unwind_info& info) override {
    infos_[file_id] = info;
    return true;
  }
  void delete_info(uint64_t file_id) override { infos_.erase(file_id); }

  // The walker's lookup, done the way native.bpf.c does it: the chunk by
  // binary search, its shard, the row by binary search in the shard.
  const omniprof_unwind_rule* lookup(uint64_t file_id, uint64_t pc) const {
    auto it = infos_.find(file_id);
    if (it == infos_.end()) return nullptr;
    const auto& info = it->second;
    uint32_t lo = 0, hi = info.num_chunks;
    while (lo < hi) {
      uint32_t mid = (lo + hi) / 2;
      if (info.chunks[mid].low_pc <= pc) lo = mid + 1; else hi = mid;
    }
    if (lo == 0) return nullptr;
    const auto& chunk = info.chunks[lo - 1];
    if (pc - chunk.low_pc >= chunk.high_offset) return nullptr;
    if (chunk.shard >= shards_.size()) return nullptr;
    const auto& rows = shards_[chunk.shard];
    uint32_t target = static_cast<uint32_t>(pc - chunk.low_pc);
    lo = 0;
    hi = chunk.num_rows;
    while (lo < hi) {
      uint32_t mid = (lo + hi) / 2;
      if (rows.at(chunk.first_row + mid).pc_offset <= target) lo = mid + 1; else hi = mid;
    }
    if (lo == 0) return nullptr;
    return &rules_.at(rows.at(chunk.first_row + lo - 1).rule);
  }

  uint32_t rows_per_shard_;
  uint32_t budget_;
  bool fail_writes_ = false;
  std::vector<std::vector<omniprof_unwind_row>> shards_;
  std::map<uint16_t, omniprof_unwind_rule> rules_;
  std::map<uint64_t, omniprof_executable_unwind_info> infos_;
};

// `functions` functions of 16 bytes, each: push (rsp+16), body, then a gap.
std::vector<UnwindRow> table(uint64_t base, int functions) {
  std::vector<UnwindRow> rows;
  for (int f = 0; f < functions; ++f) {
    uint64_t start = base + f * 32;
    rows.push_back({start, CfaRule::kRsp, RbpRule::kUnchanged, 8, 0});
    rows.push_back({start + 1, CfaRule::kRsp, RbpRule::kAtCfaOffset, 16, -16});
    rows.push_back({start + 16, CfaRule::kEndOfFunction, RbpRule::kUnchanged, 0, 0});
  }
  return rows;
}

TEST(UnwindTableStoreTest, StoresATableTheWalkerCanSearch) {
  MemoryMaps maps(64, 4);
  UnwindTableStore store(maps, 4, 64);
  auto rows = table(0x1000, 10);
  ASSERT_EQ(store.add(42, rows).status, StoreStatus::kOk);
  EXPECT_EQ(store.rows_used(), rows.size());
  EXPECT_EQ(store.rules_used(), 3u);  // three distinct rules, shared by every function

  const auto* rule = maps.lookup(42, 0x1000 + 5 * 32 + 4);
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->cfa_type, OMNIPROF_CFA_RSP);
  EXPECT_EQ(rule->cfa_offset, 16);
  EXPECT_EQ(rule->rbp_type, OMNIPROF_RBP_AT_CFA_OFFSET);
  EXPECT_EQ(rule->rbp_offset, -16);
  rule = maps.lookup(42, 0x1000 + 5 * 32 + 20);  // in the gap after function 5
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->cfa_type, OMNIPROF_CFA_END_OF_FUNCTION);
  EXPECT_EQ(maps.lookup(42, 0x0fff), nullptr);
  EXPECT_EQ(maps.lookup(42, 0x1000 + 10 * 32), nullptr);  // past the last function
}

TEST(UnwindTableStoreTest, TableLargerThanAShardIsCutBetweenFunctions) {
  MemoryMaps maps(64, 4);
  UnwindTableStore store(maps, 4, 64);
  auto rows = table(0x4000, 50);  // 150 rows: three shards
  ASSERT_EQ(store.add(1, rows).status, StoreStatus::kOk);
  const auto* chunks = store.chunks(1);
  ASSERT_NE(chunks, nullptr);
  ASSERT_GE(chunks->size(), 3u);
  for (size_t c = 0; c < chunks->size(); ++c) {
    const auto& chunk = (*chunks)[c];
    EXPECT_LE(chunk.first_row + chunk.num_rows, 64u) << "chunk crosses a shard";
    EXPECT_EQ(chunk.num_rows % 3, 0u) << "chunk splits a function";
    if (c + 1 < chunks->size()) EXPECT_EQ(chunk.high_pc, (*chunks)[c + 1].low_pc);
  }
  // Every pc of every function finds its rule across chunk boundaries.
  for (int f = 0; f < 50; ++f) {
    const auto* rule = maps.lookup(1, 0x4000 + f * 32 + 8);
    ASSERT_NE(rule, nullptr) << f;
    EXPECT_EQ(rule->cfa_offset, 16) << f;
  }
}

TEST(UnwindTableStoreTest, StartsWithoutShardsAndGrowsOneAtATime) {
  MemoryMaps maps(64, 8);
  UnwindTableStore store(maps, 8, 64);
  EXPECT_EQ(store.shards(), 0u);  // an idle store costs no shard
  EXPECT_TRUE(maps.shards_.empty());
  ASSERT_EQ(store.add(1, table(0x1000, 10)).status, StoreStatus::kOk);  // 30 rows
  EXPECT_EQ(store.shards(), 1u);
  ASSERT_EQ(store.add(2, table(0x1000, 10)).status, StoreStatus::kOk);  // 30 more: still fits shard 0
  EXPECT_EQ(store.shards(), 1u);
  ASSERT_EQ(store.add(3, table(0x1000, 10)).status, StoreStatus::kOk);  // 4 left in shard 0: a new one
  EXPECT_EQ(store.shards(), 2u);
  ASSERT_EQ(store.chunks(3)->size(), 1u) << "grown, not cut into shard 0's leftovers";
  EXPECT_EQ(store.chunks(3)->front().shard, 1u);
  // A table of three shards' worth takes three new shards, whole.
  ASSERT_EQ(store.add(4, table(0x8000, 60)).status, StoreStatus::kOk);  // 180 rows
  EXPECT_EQ(store.shards(), 5u);
  EXPECT_EQ(maps.shards_.size(), 5u);
  EXPECT_EQ(store.rows_used(), 270u);
  for (int f = 0; f < 60; ++f) ASSERT_NE(maps.lookup(4, 0x8000 + f * 32 + 8), nullptr) << f;
  for (uint64_t id : {1, 2, 3}) EXPECT_NE(maps.lookup(id, 0x1000 + 9 * 32 + 2), nullptr) << id;
}

TEST(UnwindTableStoreTest, PastTheBudgetLeftoversAreUsedThenNoSpace) {
  MemoryMaps maps(64, 2);
  UnwindTableStore store(maps, 2, 64);
  ASSERT_EQ(store.add(1, table(0x1000, 15)).status, StoreStatus::kOk);  // 45 rows, shard 0
  ASSERT_EQ(store.add(2, table(0x1000, 15)).status, StoreStatus::kOk);  // 45 rows, shard 1
  EXPECT_EQ(store.shards(), 2u);
  // 36 rows: no run holds them and no shard may be added: cut in two.
  ASSERT_EQ(store.add(3, table(0x4000, 12)).status, StoreStatus::kOk);
  EXPECT_EQ(store.chunks(3)->size(), 2u);
  for (int f = 0; f < 12; ++f) ASSERT_NE(maps.lookup(3, 0x4000 + f * 32 + 8), nullptr) << f;
  auto full = store.add(4, table(0x1000, 5));
  EXPECT_EQ(full.status, StoreStatus::kNoSpace);
  EXPECT_NE(full.message.find("2 unwind shards"), std::string::npos) << full.message;
  EXPECT_FALSE(store.contains(4));
  EXPECT_EQ(maps.infos_.count(4), 0u);  // nothing half-written
  EXPECT_EQ(store.shards(), 2u);
}

TEST(UnwindTableStoreTest, HostRefusingAShardIsNoSpaceAndNothingIsHalfWritten) {
  MemoryMaps maps(64, 1);                // the host allows one shard...
  UnwindTableStore store(maps, 4, 64);   // ...the store was told four
  ASSERT_EQ(store.add(1, table(0x1000, 20)).status, StoreStatus::kOk);  // 60 rows
  auto refused = store.add(2, table(0x1000, 30));  // needs two new shards
  EXPECT_EQ(refused.status, StoreStatus::kNoSpace);
  EXPECT_EQ(refused.message, "budget spent");
  EXPECT_EQ(store.shards(), 1u);
  EXPECT_FALSE(store.contains(2));
  EXPECT_EQ(maps.infos_.count(2), 0u);
  EXPECT_EQ(store.rows_used(), 60u);
  EXPECT_NE(maps.lookup(1, 0x1000 + 19 * 32 + 2), nullptr);
}

TEST(UnwindTableStoreTest, FreedSpaceIsReusedBeforeGrowing) {
  MemoryMaps maps(64, 4);
  UnwindTableStore store(maps, 4, 64);
  ASSERT_EQ(store.add(1, table(0x1000, 21)).status, StoreStatus::kOk);  // 63 rows
  ASSERT_EQ(store.add(2, table(0x1000, 21)).status, StoreStatus::kOk);  // 63 rows
  EXPECT_EQ(store.shards(), 2u);
  store.remove(1);
  EXPECT_EQ(maps.infos_.count(1), 0u);
  EXPECT_EQ(store.rows_used(), 63u);
  EXPECT_FALSE(store.contains(1));
  ASSERT_EQ(store.add(3, table(0x1000, 20)).status, StoreStatus::kOk);
  EXPECT_EQ(store.shards(), 2u) << "the freed rows of shard 0 took it";
  EXPECT_EQ(store.chunks(3)->front().shard, 0u);
  EXPECT_NE(maps.lookup(3, 0x1000 + 19 * 32 + 2), nullptr);
  EXPECT_NE(maps.lookup(2, 0x1000 + 20 * 32 + 2), nullptr);  // untouched
  // Removed and added again under the same id: found again.
  store.remove(3);
  ASSERT_EQ(store.add(3, table(0x2000, 4)).status, StoreStatus::kOk);
  EXPECT_NE(maps.lookup(3, 0x2000 + 3 * 32 + 2), nullptr);
  EXPECT_EQ(store.shards(), 2u);
}

TEST(UnwindTableStoreTest, TableThatCanNeverFitIsTooLargeNotNoSpace) {
  MemoryMaps maps(64, 100);
  UnwindTableStore store(maps, 100, 64, /*max_chunks=*/4);
  // 5 shards' worth: more chunks than one executable may have.
  auto too_many = store.add(1, table(0x1000, 105));
  EXPECT_EQ(too_many.status, StoreStatus::kTooLarge);
  EXPECT_NE(too_many.message.find("4 chunks"), std::string::npos) << too_many.message;
  EXPECT_EQ(store.shards(), 0u) << "no shard made for a table that cannot fit";
  // Four shards' worth fits exactly.
  EXPECT_EQ(store.add(2, table(0x1000, 84)).status, StoreStatus::kOk);

  MemoryMaps small(64, 2);
  UnwindTableStore budget(small, 2, 64);
  auto over_budget = budget.add(1, table(0x1000, 63));  // three shards, the budget is two
  EXPECT_EQ(over_budget.status, StoreStatus::kTooLarge);
  EXPECT_NE(over_budget.message.find("maps.unwind_memory_mb"), std::string::npos) << over_budget.message;
}

TEST(UnwindTableStoreTest, FragmentedSpacePastTheChunkLimitIsTooManyChunks) {
  MemoryMaps maps(64, 3);
  UnwindTableStore store(maps, 3, 64, /*max_chunks=*/2);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(store.add(id, table(0x1000, 16)).status, StoreStatus::kOk);
  // 16 rows free in each shard; 42 rows need three of those runs.
  auto fragmented = store.add(9, table(0x1000, 14));
  EXPECT_EQ(fragmented.status, StoreStatus::kTooManyChunks) << fragmented.message;
  EXPECT_EQ(maps.infos_.count(9), 0u);
  EXPECT_EQ(store.rows_used(), 144u);
  store.remove(2);  // after an unload it fits
  EXPECT_EQ(store.add(9, table(0x1000, 14)).status, StoreStatus::kOk);
}

TEST(UnwindTableStoreTest, FailedRowWriteGivesTheSpaceBack) {
  MemoryMaps maps(64, 1);
  UnwindTableStore store(maps, 1, 64);
  maps.fail_writes_ = true;
  EXPECT_EQ(store.add(1, table(0x1000, 21)).status, StoreStatus::kMapError);
  maps.fail_writes_ = false;
  EXPECT_EQ(store.rows_used(), 0u);
  EXPECT_EQ(store.add(2, table(0x1000, 21)).status, StoreStatus::kOk);  // all 63 rows free again
}

TEST(UnwindTableStoreTest, ChromeSizedTableFitsTheDefaultLimits) {
  // About 3M rows (a Chrome-sized executable) in default shards and chunks.
  MemoryMaps maps(OMNIPROF_ROWS_PER_SHARD, OMNIPROF_DEFAULT_UNWIND_MEMORY_MB);
  UnwindTableStore store(maps, OMNIPROF_DEFAULT_UNWIND_MEMORY_MB);
  auto rows = table(0x400000, 1000000);
  ASSERT_EQ(store.add(7, rows).status, StoreStatus::kOk);
  EXPECT_EQ(store.chunks(7)->size(), (rows.size() + OMNIPROF_ROWS_PER_SHARD - 2) / (OMNIPROF_ROWS_PER_SHARD - 2));
  EXPECT_LE(store.chunks(7)->size(), static_cast<size_t>(OMNIPROF_MAX_CHUNKS));
  for (int f : {0, 43690, 43691, 500000, 999999}) {
    const auto* rule = maps.lookup(7, 0x400000 + static_cast<uint64_t>(f) * 32 + 8);
    ASSERT_NE(rule, nullptr) << f;
    EXPECT_EQ(rule->cfa_offset, 16) << f;
  }
}

TEST(UnwindTableStoreTest, FunctionLargerThanAShardIsTooLarge) {
  MemoryMaps maps(8, 2);
  UnwindTableStore store(maps, 2, 8);
  std::vector<UnwindRow> rows;
  for (int i = 0; i < 12; ++i) rows.push_back({0x1000 + static_cast<uint64_t>(i), CfaRule::kRsp, RbpRule::kUnchanged, 8 + 8 * i, 0});
  rows.push_back({0x2000, CfaRule::kEndOfFunction, RbpRule::kUnchanged, 0, 0});
  EXPECT_EQ(store.add(1, rows).status, StoreStatus::kTooLarge);
  EXPECT_EQ(store.rows_used(), 0u);
  EXPECT_EQ(store.shards(), 0u);
}

// A chunk over the 32-bit row offsets can never be stored, however much room
// there is: kTooLarge (the plugin's OMNIPROF_ERR_TOO_LARGE), nothing written.
TEST(UnwindTableStoreTest, ChunkOverTheOffsetRangeIsTooLarge) {
  MemoryMaps maps(64, 4);
  UnwindTableStore store(maps, 4, 64);
  std::vector<UnwindRow> wide = {
      {0x1000, CfaRule::kRsp, RbpRule::kUnchanged, 8, 0},
      {0x1010, CfaRule::kEndOfFunction, RbpRule::kUnchanged, 0, 0},
      {0x1000 + (uint64_t{1} << 32) + 0x10, CfaRule::kRsp, RbpRule::kUnchanged, 8, 0},
      {0x1000 + (uint64_t{1} << 32) + 0x20, CfaRule::kEndOfFunction, RbpRule::kUnchanged, 0, 0},
  };
  auto too_wide = store.add(1, wide);
  EXPECT_EQ(too_wide.status, StoreStatus::kTooLarge);
  EXPECT_NE(too_wide.message.find("4 GiB"), std::string::npos) << too_wide.message;
  EXPECT_EQ(maps.infos_.count(1), 0u);
  EXPECT_EQ(store.rows_used(), 0u);
  EXPECT_EQ(store.add(2, table(0x1000, 5)).status, StoreStatus::kOk);  // the space it tried was given back
}

TEST(UnwindTableStoreTest, CompactRuleKeepsOnlyMeaningfulOffsets) {
  auto rule = UnwindTableStore::compact_rule({0, CfaRule::kOutermost, RbpRule::kUnchanged, 99, 77});
  EXPECT_EQ(rule.cfa_type, OMNIPROF_CFA_OUTERMOST);
  EXPECT_EQ(rule.cfa_offset, 0);
  EXPECT_EQ(rule.rbp_offset, 0);
  rule = UnwindTableStore::compact_rule({0, CfaRule::kPltExpression, RbpRule::kUnchanged, 11, 0});
  EXPECT_EQ(rule.cfa_type, OMNIPROF_CFA_PLT);
  EXPECT_EQ(rule.cfa_offset, 11);
  EXPECT_EQ(sizeof(omniprof_unwind_row), 8u);
  EXPECT_EQ(OMNIPROF_UNWIND_SHARD_BYTES, OMNIPROF_ROWS_PER_SHARD * sizeof(omniprof_unwind_row));
}

}  // namespace
}  // namespace omniprof::native
