// UnwindTableStore against in-memory maps: chunking, rule sharing, space
// accounting and reuse, without a kernel.
#include <gtest/gtest.h>

#include <map>

#include "unwind_table_store.h"

namespace omniprof::native {
namespace {

using unwind::CfaRule;
using unwind::RbpRule;
using unwind::UnwindRow;

class MemoryMaps : public UnwindMaps {
 public:
  explicit MemoryMaps(size_t rows) : rows_(rows) {}
  bool write_rows(uint32_t first, const omniprof_unwind_row* rows, uint32_t count) override {
    if (first + count > rows_.size()) return false;
    std::copy(rows, rows + count, rows_.begin() + first);
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

  // The walker's lookup, done the way native.bpf.c does it.
  const omniprof_unwind_rule* lookup(uint64_t file_id, uint64_t pc) const {
    auto it = infos_.find(file_id);
    if (it == infos_.end()) return nullptr;
    const auto& info = it->second;
    for (uint32_t c = 0; c < info.num_chunks; ++c) {
      const auto& chunk = info.chunks[c];
      if (pc < chunk.low_pc || pc >= chunk.high_pc) continue;
      uint32_t target = static_cast<uint32_t>(pc - chunk.low_pc);
      uint32_t lo = 0, hi = chunk.num_rows;
      while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (rows_[chunk.first_row + mid].pc_offset <= target) lo = mid + 1; else hi = mid;
      }
      if (lo == 0) return nullptr;
      return &rules_.at(rows_[chunk.first_row + lo - 1].rule);
    }
    return nullptr;
  }

  std::vector<omniprof_unwind_row> rows_;
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
  MemoryMaps maps(4 * 64);
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
  MemoryMaps maps(4 * 64);
  UnwindTableStore store(maps, 4, 64);
  auto rows = table(0x4000, 50);  // 150 rows: three shards
  ASSERT_EQ(store.add(1, rows).status, StoreStatus::kOk);
  const auto* chunks = store.chunks(1);
  ASSERT_NE(chunks, nullptr);
  ASSERT_GE(chunks->size(), 3u);
  for (size_t c = 0; c < chunks->size(); ++c) {
    const auto& chunk = (*chunks)[c];
    EXPECT_EQ(chunk.first_row / 64, (chunk.first_row + chunk.num_rows - 1) / 64) << "chunk crosses a shard";
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

TEST(UnwindTableStoreTest, FullStoreSaysSoAndFreedSpaceIsReused) {
  MemoryMaps maps(2 * 64);
  UnwindTableStore store(maps, 2, 64);
  ASSERT_EQ(store.add(1, table(0x1000, 21)).status, StoreStatus::kOk);  // 63 rows
  ASSERT_EQ(store.add(2, table(0x1000, 21)).status, StoreStatus::kOk);  // 63 rows
  auto full = store.add(3, table(0x1000, 5));
  EXPECT_EQ(full.status, StoreStatus::kNoSpace);
  EXPECT_FALSE(full.message.empty());
  EXPECT_FALSE(store.contains(3));
  EXPECT_EQ(maps.infos_.count(3), 0u);  // nothing half-written
  EXPECT_EQ(store.rows_used(), 126u);

  store.remove(1);
  EXPECT_EQ(maps.infos_.count(1), 0u);
  EXPECT_EQ(store.rows_used(), 63u);
  EXPECT_EQ(store.add(3, table(0x1000, 5)).status, StoreStatus::kOk);
  EXPECT_NE(maps.lookup(3, 0x1000 + 4 * 32 + 2), nullptr);
  EXPECT_NE(maps.lookup(2, 0x1000 + 20 * 32 + 2), nullptr);  // untouched
}

TEST(UnwindTableStoreTest, FunctionLargerThanAnyFreeRunIsNoSpace) {
  MemoryMaps maps(2 * 8);
  UnwindTableStore store(maps, 2, 8);
  std::vector<UnwindRow> rows;
  for (int i = 0; i < 12; ++i) rows.push_back({0x1000 + static_cast<uint64_t>(i), CfaRule::kRsp, RbpRule::kUnchanged, 8 + 8 * i, 0});
  rows.push_back({0x2000, CfaRule::kEndOfFunction, RbpRule::kUnchanged, 0, 0});
  EXPECT_EQ(store.add(1, rows).status, StoreStatus::kNoSpace);
  EXPECT_EQ(store.rows_used(), 0u);
}

// The two failures no amount of room fixes, told apart from kNoSpace (the
// plugin turns them into OMNIPROF_ERR_TOO_LARGE), with nothing written.
TEST(UnwindTableStoreTest, ChunkOverTheOffsetRangeAndTooManyChunksArePermanentStatuses) {
  MemoryMaps maps(4 * 64);
  UnwindTableStore store(maps, 4, 64);
  std::vector<UnwindRow> wide = {
      {0x1000, CfaRule::kRsp, RbpRule::kUnchanged, 8, 0},
      {0x1010, CfaRule::kEndOfFunction, RbpRule::kUnchanged, 0, 0},
      {0x1000 + (uint64_t{1} << 32) + 0x10, CfaRule::kRsp, RbpRule::kUnchanged, 8, 0},
      {0x1000 + (uint64_t{1} << 32) + 0x20, CfaRule::kEndOfFunction, RbpRule::kUnchanged, 0, 0},
  };
  auto too_wide = store.add(1, wide);
  EXPECT_EQ(too_wide.status, StoreStatus::kChunkTooWide);
  EXPECT_NE(too_wide.message.find("4 GiB"), std::string::npos) << too_wide.message;
  EXPECT_EQ(maps.infos_.count(1), 0u);
  EXPECT_EQ(store.rows_used(), 0u);

  // 8-row shards hold two 3-row functions each: 60 functions need 30 chunks.
  MemoryMaps small_maps(40 * 8);
  UnwindTableStore fragmented(small_maps, 40, 8);
  auto too_many = fragmented.add(2, table(0x1000, 60));
  EXPECT_EQ(too_many.status, StoreStatus::kTooManyChunks);
  EXPECT_EQ(small_maps.infos_.count(2), 0u);
  EXPECT_EQ(fragmented.rows_used(), 0u);
  EXPECT_EQ(fragmented.add(3, table(0x1000, 5)).status, StoreStatus::kOk);  // the space it tried was given back
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
}

}  // namespace
}  // namespace omniprof::native
