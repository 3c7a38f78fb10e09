#include "unwind_table_store.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <cstring>

namespace omniprof::native {

using unwind::CfaRule;
using unwind::RbpRule;
using unwind::UnwindRow;

// ---- BpfUnwindMaps -----------------------------------------------------------

bool BpfUnwindMaps::write_rows(uint32_t first, const omniprof_unwind_row* rows, uint32_t count) {
  if (count == 0) return true;
  if (batch_supported_) {
    // One syscall for the whole run (ARRAY batch updates: 5.6+).
    std::vector<uint32_t> keys(count);
    for (uint32_t i = 0; i < count; ++i) keys[i] = first + i;
    uint32_t done = count;
    if (bpf_map_update_batch(rows_fd_, keys.data(), rows, &done, nullptr) == 0 && done == count) return true;
    if (errno != EINVAL && errno != ENOTSUP && errno != EOPNOTSUPP) return false;
    batch_supported_ = false;
  }
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t key = first + i;
    if (bpf_map_update_elem(rows_fd_, &key, &rows[i], BPF_ANY) != 0) return false;
  }
  return true;
}

bool BpfUnwindMaps::write_rule(uint16_t index, const omniprof_unwind_rule& rule) {
  uint32_t key = index;
  return bpf_map_update_elem(rules_fd_, &key, &rule, BPF_ANY) == 0;
}

bool BpfUnwindMaps::write_info(uint64_t file_id, const omniprof_executable_unwind_info& info) {
  return bpf_map_update_elem(info_fd_, &file_id, &info, BPF_ANY) == 0;
}

void BpfUnwindMaps::delete_info(uint64_t file_id) { bpf_map_delete_elem(info_fd_, &file_id); }

// ---- UnwindTableStore --------------------------------------------------------

UnwindTableStore::UnwindTableStore(UnwindMaps& maps, uint32_t shards, uint32_t rows_per_shard)
    : maps_(maps), shards_(shards), rows_per_shard_(rows_per_shard) {
  for (uint32_t s = 0; s < shards; ++s) free_.push_back({s * rows_per_shard, rows_per_shard});
}

omniprof_unwind_rule UnwindTableStore::compact_rule(const UnwindRow& row) {
  omniprof_unwind_rule rule{};
  switch (row.cfa) {
    case CfaRule::kRsp: rule.cfa_type = OMNIPROF_CFA_RSP; break;
    case CfaRule::kRbp: rule.cfa_type = OMNIPROF_CFA_RBP; break;
    case CfaRule::kPltExpression: rule.cfa_type = OMNIPROF_CFA_PLT; break;
    case CfaRule::kEndOfFunction: rule.cfa_type = OMNIPROF_CFA_END_OF_FUNCTION; break;
    case CfaRule::kOutermost: rule.cfa_type = OMNIPROF_CFA_OUTERMOST; break;
    default: rule.cfa_type = OMNIPROF_CFA_UNSUPPORTED; break;
  }
  switch (row.rbp) {
    case RbpRule::kUnchanged: rule.rbp_type = OMNIPROF_RBP_UNCHANGED; break;
    case RbpRule::kAtCfaOffset: rule.rbp_type = OMNIPROF_RBP_AT_CFA_OFFSET; break;
    default: rule.rbp_type = OMNIPROF_RBP_UNSUPPORTED; break;
  }
  bool has_offset = rule.cfa_type == OMNIPROF_CFA_RSP || rule.cfa_type == OMNIPROF_CFA_RBP ||
                    rule.cfa_type == OMNIPROF_CFA_PLT;
  rule.cfa_offset = has_offset ? row.cfa_offset : 0;
  rule.rbp_offset = rule.rbp_type == OMNIPROF_RBP_AT_CFA_OFFSET ? row.rbp_offset : 0;
  return rule;
}

bool UnwindTableStore::rule_index(const omniprof_unwind_rule& rule, uint16_t& index) {
  auto key = std::make_tuple(rule.cfa_type, rule.rbp_type, rule.cfa_offset, rule.rbp_offset);
  auto it = rules_.find(key);
  if (it != rules_.end()) {
    index = it->second;
    return true;
  }
  if (rules_.size() >= OMNIPROF_MAX_UNWIND_RULES) return false;
  index = static_cast<uint16_t>(rules_.size());
  if (!maps_.write_rule(index, rule)) return false;
  rules_.emplace(key, index);
  return true;
}

UnwindTableStore::FreeRange* UnwindTableStore::find_free(uint32_t rows) {
  // Best fit: the smallest run that holds them, so large runs stay large.
  FreeRange* best = nullptr;
  for (auto& r : free_) {
    if (r.length >= rows && (!best || r.length < best->length)) best = &r;
  }
  return best;
}

UnwindTableStore::FreeRange* UnwindTableStore::largest_free() {
  FreeRange* best = nullptr;
  for (auto& r : free_) {
    if (!best || r.length > best->length) best = &r;
  }
  return best && best->length > 0 ? best : nullptr;
}

void UnwindTableStore::release(uint32_t start, uint32_t length) {
  free_.push_back({start, length});
  // Merge neighbours inside a shard so freed space can hold large tables.
  std::sort(free_.begin(), free_.end(), [](const FreeRange& a, const FreeRange& b) { return a.start < b.start; });
  std::vector<FreeRange> merged;
  for (const auto& r : free_) {
    if (r.length == 0) continue;
    if (!merged.empty() && merged.back().start + merged.back().length == r.start &&
        merged.back().start / rows_per_shard_ == r.start / rows_per_shard_) {
      merged.back().length += r.length;
    } else {
      merged.push_back(r);
    }
  }
  free_ = std::move(merged);
}

StoreResult UnwindTableStore::add(uint64_t file_id, const std::vector<UnwindRow>& rows) {
  if (contains(file_id)) return {};
  if (rows.empty()) return {};

  // Compact every row first: a failure here leaves the maps untouched.
  std::vector<omniprof_unwind_row> compact(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    uint16_t index = 0;
    if (!rule_index(compact_rule(rows[i]), index)) {
      return {StoreStatus::kNoSpace, "unwind_rules is full"};
    }
    compact[i].rule = index;
  }

  // Cut the table into chunks, each in one free run of one shard, cut only
  // after an end-of-function row so no function is split.
  struct Placement {
    size_t begin, end;  // rows [begin, end)
    uint32_t first_row;
  };
  std::vector<Placement> placements;
  std::vector<FreeRange> taken;
  auto give_back = [&] {
    for (const auto& t : taken) release(t.start, t.length);
  };
  size_t next = 0;
  while (next < rows.size()) {
    size_t remaining = rows.size() - next;
    size_t end = rows.size();
    FreeRange* range = find_free(static_cast<uint32_t>(std::min<size_t>(remaining, rows_per_shard_)));
    if (!range || range->length < remaining) {
      range = largest_free();
      if (!range) {
        give_back();
        return {StoreStatus::kNoSpace, "every unwind shard is full"};
      }
      // The last end-of-function row that fits in this run.
      end = next;
      size_t limit = std::min(rows.size(), next + range->length);
      for (size_t i = next; i < limit; ++i) {
        if (rows[i].cfa == CfaRule::kEndOfFunction) end = i + 1;
      }
      if (end == next) {
        give_back();
        return {StoreStatus::kNoSpace, "no free unwind shard space holds the next function"};
      }
    }
    if (placements.size() == OMNIPROF_MAX_CHUNKS) {
      give_back();
      return {StoreStatus::kTooManyChunks,
              "table needs more than " + std::to_string(OMNIPROF_MAX_CHUNKS) + " chunks"};
    }
    uint32_t count = static_cast<uint32_t>(end - next);
    placements.push_back({next, end, range->start});
    taken.push_back({range->start, count});
    range->start += count;
    range->length -= count;
    next = end;
  }

  omniprof_executable_unwind_info info{};
  std::vector<StoredChunk> stored;
  for (size_t c = 0; c < placements.size(); ++c) {
    const Placement& p = placements[c];
    uint64_t low = rows[p.begin].pc;
    // A chunk ends where the next one starts; the last one just past its
    // final row (an end-of-function marker, which covers nothing).
    uint64_t high = c + 1 < placements.size() ? rows[placements[c + 1].begin].pc : rows[p.end - 1].pc + 1;
    for (size_t i = p.begin; i < p.end; ++i) {
      uint64_t offset = rows[i].pc - low;
      if (offset > UINT32_MAX) {
        give_back();
        return {StoreStatus::kChunkTooWide, "a chunk spans more than 4 GiB of addresses (row offsets are 32-bit)"};
      }
      compact[i].pc_offset = static_cast<uint32_t>(offset);
    }
    if (!maps_.write_rows(p.first_row, &compact[p.begin], static_cast<uint32_t>(p.end - p.begin))) {
      give_back();
      return {StoreStatus::kMapError, std::string("writing unwind_rows failed: ") + strerror(errno)};
    }
    info.chunks[c] = {low, high, p.first_row, static_cast<uint32_t>(p.end - p.begin)};
    stored.push_back({low, high, p.first_row, static_cast<uint32_t>(p.end - p.begin)});
  }
  info.num_chunks = static_cast<uint32_t>(placements.size());
  // Rows first, then the chunk index that makes them reachable.
  if (!maps_.write_info(file_id, info)) {
    give_back();
    return {StoreStatus::kNoSpace, std::string("executable_unwind_info: ") + strerror(errno)};
  }
  rows_used_ += rows.size();
  tables_.emplace(file_id, std::move(stored));
  return {};
}

void UnwindTableStore::remove(uint64_t file_id) {
  auto it = tables_.find(file_id);
  if (it == tables_.end()) return;
  // Unreachable first, then reusable.
  maps_.delete_info(file_id);
  for (const auto& chunk : it->second) {
    release(chunk.first_row, chunk.num_rows);
    rows_used_ -= chunk.num_rows;
  }
  tables_.erase(it);
}

const std::vector<StoredChunk>* UnwindTableStore::chunks(uint64_t file_id) const {
  auto it = tables_.find(file_id);
  return it == tables_.end() ? nullptr : &it->second;
}

}  // namespace omniprof::native
