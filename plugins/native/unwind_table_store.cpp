#include "unwind_table_store.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <cstring>

namespace omniprof::native {

using unwind::CfaRule;
using unwind::RbpRule;
using unwind::UnwindRow;

// ---- BpfUnwindMaps -----------------------------------------------------------

StoreResult BpfUnwindMaps::add_shard(uint32_t index) {
  // The plugin's create() has checked that the host API has create_inner_map.
  int fd = -1;
  omniprof_status status = host_->create_inner_map(host_->host, OMNIPROF_MAP_UNWIND_SHARDS, index, &fd);
  if (status == OMNIPROF_ERR_NO_SPACE) {
    return {StoreStatus::kNoSpace, "the host refused unwind shard " + std::to_string(index) +
                                       ": maps.unwind_memory_mb is spent"};
  }
  if (status != OMNIPROF_OK || fd < 0) {
    return {StoreStatus::kMapError,
            "the host could not create unwind shard " + std::to_string(index) + " (status " +
                std::to_string(static_cast<int>(status)) + ")"};
  }
  if (shard_fds_.size() <= index) shard_fds_.resize(index + 1, -1);
  shard_fds_[index] = fd;
  return {};
}

bool BpfUnwindMaps::write_rows(uint32_t shard, uint32_t first, const omniprof_unwind_row* rows, uint32_t count) {
  if (count == 0) return true;
  if (shard >= shard_fds_.size() || shard_fds_[shard] < 0) {
    errno = ENOENT;
    return false;
  }
  int fd = shard_fds_[shard];
  if (batch_supported_) {
    // One syscall for the whole run (ARRAY batch updates: 5.6+).
    std::vector<uint32_t> keys(count);
    for (uint32_t i = 0; i < count; ++i) keys[i] = first + i;
    uint32_t done = count;
    if (bpf_map_update_batch(fd, keys.data(), rows, &done, nullptr) == 0 && done == count) return true;
    if (errno != EINVAL && errno != ENOTSUP && errno != EOPNOTSUPP) return false;
    batch_supported_ = false;
  }
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t key = first + i;
    if (bpf_map_update_elem(fd, &key, &rows[i], BPF_ANY) != 0) return false;
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

UnwindTableStore::UnwindTableStore(UnwindMaps& maps, uint32_t max_shards, uint32_t rows_per_shard,
                                   uint32_t max_chunks)
    : maps_(maps), max_shards_(max_shards), rows_per_shard_(rows_per_shard), max_chunks_(max_chunks) {}

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

size_t UnwindTableStore::cut(const std::vector<UnwindRow>& rows, size_t next, uint32_t room) {
  if (rows.size() - next <= room) return rows.size();
  // The last end-of-function row that fits: a chunk never splits a function.
  size_t end = next;
  for (size_t i = next; i < next + room; ++i) {
    if (rows[i].cfa == CfaRule::kEndOfFunction) end = i + 1;
  }
  return end;
}

UnwindTableStore::Plan UnwindTableStore::plan(const std::vector<UnwindRow>& rows) const {
  Plan plan;
  plan.free = free_;
  plan.shards = shards_;
  auto fail = [&](StoreStatus status, std::string message) {
    plan.result = {status, std::move(message)};
    return plan;
  };
  size_t next = 0;
  while (next < rows.size()) {
    size_t remaining = rows.size() - next;
    // Best fit for the whole rest, so large free runs stay large.
    FreeRange* range = nullptr;
    for (auto& r : plan.free) {
      if (r.length >= remaining && (!range || r.length < range->length)) range = &r;
    }
    if (!range && plan.shards < max_shards_) {
      // Grow before cutting the table into leftovers: fewer chunks, and the
      // leftovers stay for small tables.
      plan.free.push_back({plan.shards * rows_per_shard_, rows_per_shard_});
      plan.shards++;
      range = &plan.free.back();
    }
    if (!range) {
      for (auto& r : plan.free) {
        if (r.length > 0 && (!range || r.length > range->length)) range = &r;
      }
    }
    if (!range) {
      return fail(StoreStatus::kNoSpace, "all " + std::to_string(max_shards_) +
                                             " unwind shards the budget allows are full");
    }
    size_t end = cut(rows, next, range->length);
    if (end == next) {
      return fail(StoreStatus::kNoSpace, "no free run of the " + std::to_string(max_shards_) +
                                             " unwind shards the budget allows holds the next function");
    }
    if (plan.placements.size() == max_chunks_) {
      return fail(StoreStatus::kTooManyChunks,
                  "free unwind space is too fragmented: the table would need more than " +
                      std::to_string(max_chunks_) + " chunks");
    }
    uint32_t count = static_cast<uint32_t>(end - next);
    plan.placements.push_back({next, end, range->start});
    range->start += count;
    range->length -= count;
    next = end;
  }
  return plan;
}

StoreResult UnwindTableStore::add(uint64_t file_id, const std::vector<UnwindRow>& rows) {
  if (contains(file_id)) return {};
  if (rows.empty()) return {};

  // Would it fit an empty store? If not, it never will: say so, so the host
  // does not unload others for it.
  {
    size_t chunks = 0;
    for (size_t next = 0; next < rows.size(); ++chunks) {
      size_t end = cut(rows, next, rows_per_shard_);
      if (end == next) {
        return {StoreStatus::kTooLarge, "a function has more than " + std::to_string(rows_per_shard_) +
                                            " unwind rows, the size of a shard"};
      }
      next = end;
    }
    if (chunks > max_chunks_ || chunks > max_shards_) {
      return {StoreStatus::kTooLarge,
              "the table's " + std::to_string(rows.size()) + " rows need " + std::to_string(chunks) +
                  " shards; at most " + std::to_string(std::min(max_chunks_, max_shards_)) +
                  (max_shards_ < max_chunks_ ? " fit maps.unwind_memory_mb" : " chunks fit one executable")};
    }
  }

  // Compact every row first: a failure here leaves the maps untouched.
  std::vector<omniprof_unwind_row> compact(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    uint16_t index = 0;
    if (!rule_index(compact_rule(rows[i]), index)) {
      return {StoreStatus::kNoSpace, "unwind_rules is full"};
    }
    compact[i].rule = index;
  }

  // Cut the table into chunks, each in one free run of one shard.
  Plan plan = this->plan(rows);
  if (plan.result.status != StoreStatus::kOk) return plan.result;
  // Create the shards the plan counts on. One the host refuses (or fails to
  // create) ends the attempt; those created before it stay, as free space.
  for (; shards_ < plan.shards; ++shards_) {
    StoreResult created = maps_.add_shard(shards_);
    if (created.status != StoreStatus::kOk) return created;
    free_.push_back({shards_ * rows_per_shard_, rows_per_shard_});
  }
  free_ = std::move(plan.free);
  std::erase_if(free_, [](const FreeRange& r) { return r.length == 0; });
  const std::vector<Placement>& placements = plan.placements;
  auto give_back = [&] {
    for (const auto& p : placements) release(p.start, static_cast<uint32_t>(p.end - p.begin));
  };

  omniprof_executable_unwind_info info{};
  std::vector<StoredChunk> stored;
  for (size_t c = 0; c < placements.size(); ++c) {
    const Placement& p = placements[c];
    uint64_t low = rows[p.begin].pc;
    // A chunk ends where the next one starts; the last one just past its
    // final row (an end-of-function marker, which covers nothing).
    uint64_t high = c + 1 < placements.size() ? rows[placements[c + 1].begin].pc : rows[p.end - 1].pc + 1;
    if (high - low > UINT32_MAX) {
      give_back();
      return {StoreStatus::kTooLarge, "a chunk of the table spans more than 4 GiB of addresses"};
    }
    for (size_t i = p.begin; i < p.end; ++i) compact[i].pc_offset = static_cast<uint32_t>(rows[i].pc - low);
    uint32_t shard = p.start / rows_per_shard_;
    uint32_t first = p.start % rows_per_shard_;
    uint32_t count = static_cast<uint32_t>(p.end - p.begin);
    if (!maps_.write_rows(shard, first, &compact[p.begin], count)) {
      give_back();
      return {StoreStatus::kMapError, std::string("writing unwind shard ") + std::to_string(shard) +
                                          " failed: " + strerror(errno)};
    }
    info.chunks[c] = {low, static_cast<uint32_t>(high - low), shard, first, count};
    stored.push_back({low, high, shard, first, count});
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
    release(chunk.shard * rows_per_shard_ + chunk.first_row, chunk.num_rows);
    rows_used_ -= chunk.num_rows;
  }
  tables_.erase(it);
}

const std::vector<StoredChunk>* UnwindTableStore::chunks(uint64_t file_id) const {
  auto it = tables_.find(file_id);
  return it == tables_.end() ? nullptr : &it->second;
}

}  // namespace omniprof::native
