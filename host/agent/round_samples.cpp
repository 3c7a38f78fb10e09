#include "agent/round_samples.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <unordered_set>

#include "omniprof/bpf/code_address.h"

namespace omniprof {

std::vector<omniprof_frame> splice_interpreter_frames(const std::vector<omniprof_frame>& stored) {
  std::vector<omniprof_frame> native, out;
  std::vector<const omniprof_frame*> spliced;
  for (const auto& frame : stored) {
    if (frame.flags & OMNIPROF_FRAME_SPLICED) {
      spliced.push_back(&frame);
    } else {
      native.push_back(frame);
    }
  }
  if (spliced.empty()) return native;
  // Native frames a spliced frame replaces (OMNIPROF_FRAME_REPLACES_MARK:
  // JIT code named by its plugin): `after` counts up to and including it.
  std::vector<bool> replaced(native.size(), false);
  for (const omniprof_frame* frame : spliced) {
    if ((frame->flags & OMNIPROF_FRAME_REPLACES_MARK) && frame->after >= 1 && frame->after <= native.size()) {
      replaced[frame->after - 1] = true;
    }
  }
  out.reserve(stored.size());
  size_t next = 0;  // next spliced frame; they come in stack order
  auto emit_spliced_after = [&](size_t natives_before) {
    while (next < spliced.size() && spliced[next]->after <= natives_before) {
      omniprof_frame frame = *spliced[next++];
      frame.flags = 0;
      frame.after = 0;
      out.push_back(frame);
    }
  };
  emit_spliced_after(0);
  for (size_t i = 0; i < native.size(); ++i) {
    if (!replaced[i]) out.push_back(native[i]);
    emit_spliced_after(i + 1);
  }
  emit_spliced_after(SIZE_MAX);  // marks past the native frames (a corrupt `after`)
  return out;
}

size_t StackKeyHash::operator()(const omniprof_stack_key& k) const {
  size_t h = std::hash<uint64_t>()(k.user_stack_id);
  h ^= std::hash<uint64_t>()(k.kernel_stack_id) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= (static_cast<uint64_t>(k.pid) << 32 | k.tid) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

uint64_t RoundSamples::total() const {
  uint64_t sum = 0;
  for (const auto& [key, count] : counts) sum += count;
  return sum;
}

void RoundSamples::settle_times(uint64_t close_ns, int64_t unix_minus_mono_ns, SampleTimeStats& stats) {
  // Late times of the previous round's untimed samples: the earliest of the
  // key's times from before that round closed.
  for (auto& [key, owed] : owed_) {
    auto it = times.find(key);
    if (it == times.end()) continue;
    std::vector<uint64_t>& list = it->second;
    std::sort(list.begin(), list.end());
    size_t late = 0;
    while (late < list.size() && late < owed.count && list[late] <= owed.close_ns) ++late;
    list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(late));
    stats.unmatched += late;
  }
  owed_.clear();
  carried_.clear();
  for (auto& [key, list] : times) {
    std::sort(list.begin(), list.end());
    auto count_it = counts.find(key);
    const uint64_t count = count_it == counts.end() ? 0 : count_it->second;
    if (list.size() > count) {
      // Times past the count belong to the next drain's counts, unless they
      // were carried here already and still found none (the earliest
      // `carried_in` of the list): those matched no count at all.
      auto in = carried_in_.find(key);
      const size_t carried_in = in == carried_in_.end() ? 0 : in->second;
      std::vector<uint64_t> surplus;
      for (size_t i = static_cast<size_t>(count); i < list.size(); ++i) {
        if (i < carried_in) {
          stats.unmatched++;
        } else {
          surplus.push_back(list[i]);
        }
      }
      if (!surplus.empty()) carried_.emplace(key, std::move(surplus));
      list.resize(static_cast<size_t>(count));
    } else if (list.size() < count) {
      owed_[key] = Owed{count - list.size(), close_ns};
      stats.untimed += count;
      list.clear();
    }
  }
  for (const auto& [key, count] : counts) {
    if (times.count(key)) continue;
    owed_[key] = Owed{count, close_ns};
    stats.untimed += count;
  }
  std::erase_if(times, [](const auto& entry) { return entry.second.empty(); });
  for (auto& [key, list] : times) {
    for (uint64_t& t : list) t = static_cast<uint64_t>(static_cast<int64_t>(t) + unix_minus_mono_ns);
  }
}

void RoundSamples::pin_images(const KnownProcesses& recent) {
  if (recent.earlier_by_pid.empty()) return;
  std::vector<uint64_t> pcs;
  for (const auto& [key, count] : counts) {
    const int32_t pid = static_cast<int32_t>(key.pid);
    if (!recent.earlier_by_pid.count(pid) || images.count(key)) continue;
    auto stack = stacks.find(key.user_stack_id);
    if (stack == stacks.end()) continue;  // no user stack: nothing to name with an image
    pcs.clear();
    for (size_t i = 0; i < stack->second.frames.size(); ++i) {
      const omniprof_frame& frame = stack->second.frames[i];
      if (frame.kind == OMNIPROF_FRAME_NATIVE) pcs.push_back(omniprof_code_address(frame.address, i != 0));
    }
    const std::string_view thread_name(key.thread_name, strnlen(key.thread_name, sizeof(key.thread_name)));
    // The current image is not pinned: the process's image at the round's
    // close names it, with what it maps by then (ld.so maps the libraries
    // after the exec; without process records the host reads them later).
    // A later exec makes it an earlier image, chosen at that drain.
    auto image = recent.image_for(pid, thread_name, pcs);
    auto current = recent.by_pid.find(pid);
    if (image && (current == recent.by_pid.end() || image != current->second)) images.emplace(key, std::move(image));
  }
}

void RoundSamples::clear() {
  counts.clear();
  stacks.clear();
  images.clear();
  missing_stacks = 0;
  carried_in_.clear();
  for (const auto& [key, list] : carried_) carried_in_[key] = list.size();
  times = std::move(carried_);
  carried_.clear();
}

Result<void> drain_into(BpfMaps& maps, RoundSamples& round) {
  auto drained = maps.drain_stack_counts();
  if (!drained) return drained.error();
  // Every stack this drain's counts reference, and those the round has not
  // read yet (read all at once: a pass over stack_traces in batches).
  std::unordered_set<uint64_t> referenced;
  std::unordered_map<uint64_t, uint32_t> wanted;
  auto stacks_of = [](const omniprof_stack_key& key) {
    return std::array<std::pair<uint64_t, uint32_t>, 2>{std::pair<uint64_t, uint32_t>{key.user_stack_id, key.user_stack_len},
                                                        {key.kernel_stack_id, key.kernel_stack_len}};
  };
  for (const auto& [key, count] : *drained) {
    for (auto [id, len] : stacks_of(key)) {
      if (id <= OMNIPROF_STACK_ID_LOST) continue;
      referenced.insert(id);
      if (!round.stacks.count(id)) wanted.emplace(id, len);
    }
  }
  auto read = maps.read_stacks_and_sweep(wanted, referenced);
  if (!read) return read.error();
  for (auto& [key, count] : *drained) {
    for (auto [id, len] : stacks_of(key)) {
      if (id <= OMNIPROF_STACK_ID_LOST || round.stacks.count(id)) continue;
      if (auto it = read->find(id); it != read->end()) {
        round.stacks.emplace(id, StackFrames{splice_interpreter_frames(it->second)});
      } else {
        round.missing_stacks += count;
      }
    }
    round.counts[key] += count;
  }
  auto times = maps.drain_sample_times();
  if (!times) return times.error();
  for (const omniprof_sample_time& record : *times) round.times[record.key].push_back(record.ktime_ns);
  return ok();
}

}  // namespace omniprof
