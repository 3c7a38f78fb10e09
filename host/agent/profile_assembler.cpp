#include "agent/profile_assembler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "log/logger.h"
#include "plugins/plugin_host.h"
#include "symbolize/elf_symbolizer.h"
#include "symbolize/kernel_symbols.h"
#include "profile/frame_type.h"
#include "omniprof/bpf/code_address.h"

namespace omniprof {

namespace {

constexpr uint64_t kKernelStart = 0xffff800000000000ULL;

std::string module_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  return name.empty() ? path : name;
}

}  // namespace

// Which view a profile is: `go tool pprof -comments` shows it.
const char* const ProfileAssembler::kFoldedComment =
    "interpreter_internals=fold: native frames of the interpreter's own code are folded into the Python/Ruby "
    "frames they run (profile.interpreter_internals: keep shows them)";
const char* const ProfileAssembler::kKeptComment = "interpreter_internals=keep: every native frame is shown";

ProfileAssembler::FrameIndex ProfileAssembler::add_frame(NamedFrame frame) {
  frames_.push_back(std::move(frame));
  return static_cast<FrameIndex>(frames_.size() - 1);
}

uint32_t ProfileAssembler::add_mapping(const ProfileMapping& mapping) {
  auto [it, inserted] = mapping_index_.try_emplace(mapping, static_cast<uint32_t>(mappings_.size() + 1));
  if (inserted) mappings_.push_back(mapping);
  return it->second;
}

ProfileAssembler::FrameIndex ProfileAssembler::marker_frame(const std::string& name, const std::string& type) {
  const std::string key = type + '\0' + name;
  if (auto it = marker_cache_.find(key); it != marker_cache_.end()) return it->second;
  NamedFrame frame;
  frame.line.function = name;
  // "[unknown python]" is a Python frame all the same.
  if (!type.empty()) {
    frame.line.system_name = typed_system_name(type, name);
    frame.role = FrameRole::kInterpreter;
  }
  FrameIndex index = add_frame(std::move(frame));
  marker_cache_.emplace(key, index);
  return index;
}

ProfileAssembler::FrameIndex ProfileAssembler::native_frame(const ProcessSnapshot* process, int32_t pid,
                                                           uint64_t address, bool leaf) {
  auto key = std::make_tuple(pid, process, address, leaf);
  if (auto it = native_cache_.find(key); it != native_cache_.end()) return it->second;
  stats_.frames++;
  const uint64_t pc = omniprof_code_address(address, !leaf);

  const ProcMapping* mapping = process ? process->mapping_for(pc) : nullptr;
  if (process && !mapping) requests_.stale_mappings.insert(pid);
  NamedFrame named;
  named.address = pc;
  if (!mapping) {
    stats_.unnamed_frames++;
    named.line.function = fmt::format("[unknown]+{:#x}", pc);
  } else {
    const ExecutableRef* executable = process->executable_for(*mapping);
    const uint64_t file_id = executable ? executable->file_id : 0;
    if (file_id != 0) requests_.sampled_files.insert(file_id);
    if (file_id != 0 && std::find(process->interpreter_file_ids.begin(), process->interpreter_file_ids.end(),
                                  file_id) != process->interpreter_file_ids.end()) {
      named.role = FrameRole::kInterpreterNative;
    }
    const auto symbolize_start = std::chrono::steady_clock::now();
    const std::string host_path = process->host_path(*mapping);
    // Named only through its FileID (the file identified, and its load bias
    // found, when the process was read): the name of this address of this
    // file may be cached from any process or round.
    const bool identified = file_id != 0 && !host_path.empty();
    std::optional<ElfSymbolizer::Symbol> symbol;
    const uint64_t elf_address = identified ? pc - executable->load_bias : pc - mapping->start + mapping->offset;
    std::string build_id;
    if (identified) {
      // Used only if the file is not parsed yet (it usually was, when the
      // process was read): its debug file under the process's root.
      char root[32];
      const auto root_end = fmt::format_to_n(root, sizeof(root), "/proc/{}/root", pid);
      const ElfSymbolizer::DebugLookup debug{
          mapping->path, process->exited ? std::string_view() : std::string_view(root, root_end.size)};
      auto found = symbols_.lookup(file_id, host_path, elf_address, debug);
      if (found) {
        symbol = *found;
      } else {
        stats_.symbolizer_errors++;
        log().debug("symbolize {} ({}): {}", mapping->path, host_path, found.error().message);
      }
      build_id = symbols_.build_id(file_id, host_path, debug);
    }
    ProfileLine& line = named.line;
    if (symbol) {
      line.function = symbol->name;
      line.system_name = symbol->system_name == symbol->name ? "" : symbol->system_name;
    } else if (auto start = identified ? unnamed_function_start(file_id, host_path, elf_address) : std::nullopt) {
      // One row per function, not per address; the location keeps the pc.
      stats_.frames_named_by_function_start++;
      line.function = fmt::format("{}+{:#x}", module_name(mapping->path), *start);
    } else {
      stats_.unnamed_frames++;
      line.function = fmt::format("{}+{:#x}", module_name(mapping->path), elf_address);
    }
    stats_.native_symbolize_ns += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - symbolize_start)
            .count());
    named.mapping = add_mapping(
        ProfileMapping{mapping->start, mapping->end, mapping->offset, mapping->path, build_id, true});
  }
  FrameIndex index = add_frame(std::move(named));
  native_cache_.emplace(key, index);
  return index;
}

std::optional<uint64_t> ProfileAssembler::unnamed_function_start(uint64_t file_id, const std::string& host_path,
                                                                uint64_t elf_address) {
  Plugin* native = plugins_ ? plugins_->native_plugin() : nullptr;
  if (!native) return std::nullopt;
  auto bounds = function_starts_.lookup(file_id, elf_address, [&](uint64_t address) {
    return PluginHost::function_bounds(*native, file_id, host_path, address);
  });
  if (!bounds) {
    stats_.symbolizer_errors++;
    log().debug("function bounds in {} at {:#x}: {}", host_path, elf_address, bounds.error().message);
    return std::nullopt;
  }
  if (!*bounds) return std::nullopt;
  return (*bounds)->start;
}

ProfileAssembler::FrameIndex ProfileAssembler::kernel_frame(uint64_t address) {
  if (auto it = kernel_cache_.find(address); it != kernel_cache_.end()) return it->second;
  stats_.frames++;
  NamedFrame named;
  named.role = FrameRole::kKernel;
  named.address = address;
  named.mapping = add_mapping(ProfileMapping{kKernelStart, UINT64_MAX, 0, std::string(kKernelMappingName), "", true});
  if (kernel_) {
    if (auto symbol = kernel_->lookup(address)) {
      named.line.function =
          symbol->module.empty() ? symbol->name : fmt::format("{} [{}]", symbol->name, symbol->module);
    }
  }
  if (named.line.function.empty()) {
    stats_.unnamed_frames++;
    named.line.function = fmt::format("[kernel]+{:#x}", address);
  }
  FrameIndex index = add_frame(std::move(named));
  kernel_cache_.emplace(address, index);
  return index;
}

ProfileAssembler::FrameIndex ProfileAssembler::plugin_frame(int32_t pid, const omniprof_frame& frame) {
  stats_.frames++;
  PluginFrameKey cache_key{pid, frame.address, frame.detail, frame.kind};
  if (auto it = plugin_cache_.find(cache_key); it != plugin_cache_.end()) return it->second;
  Plugin* plugin = plugins_ ? plugins_->plugin_for_frame_kind(frame.kind) : nullptr;
  FrameIndex index = 0;
  if (!plugin) {
    stats_.unnamed_frames++;
    index = marker_frame(fmt::format("[frame kind {}]+{:#x}", frame.kind, frame.address));
  } else if (auto symbol = PluginHost::symbolize_frame(*plugin, pid, frame); !symbol) {
    // Explicit and counted, never dropped: the interpreter frame was there.
    stats_.unnamed_frames++;
    stats_.unreadable_interpreter_frames++;
    index = marker_frame(fmt::format("[unknown {}]", plugin->runtime), plugin->frame_type);
  } else {
    NamedFrame named;
    named.role = FrameRole::kInterpreter;
    // The plugin's name, verbatim: the type in system_name also keeps pprof
    // readers from taking `<module>` for a C++ template (profile/frame_type.h).
    named.line = ProfileLine{symbol->function, typed_system_name(plugin->frame_type, symbol->function), symbol->file,
                             symbol->line};
    index = add_frame(std::move(named));
  }
  plugin_cache_.emplace(cache_key, index);
  return index;
}

std::vector<ProfileBuilder> ProfileAssembler::assemble(const RoundSamples& round, const KnownProcesses& processes,
                                                       int64_t period_ns, int64_t start_unix_ns, int64_t duration_ns,
                                                       const std::vector<bool>& fold) {
  requests_ = {};
  frames_.clear();
  mappings_.clear();
  mapping_index_.clear();
  native_cache_.clear();
  kernel_cache_.clear();
  marker_cache_.clear();
  plugin_cache_.clear();
  // Files no process maps any more (their last process was forgotten after
  // the previous round) leave the symbol cache; the exited processes of
  // this round are still known.
  std::unordered_set<uint64_t> mapped;
  for (const auto& [pid, process] : processes.by_pid) {
    for (const ExecutableRef& executable : process->executables) mapped.insert(executable.file_id);
  }
  for (const auto& [key, image] : round.images) {
    for (const ExecutableRef& executable : image->executables) mapped.insert(executable.file_id);
  }
  symbols_.forget_if([&](uint64_t file_id) { return mapped.count(file_id) == 0; });

  // Each output's pprof location id of each named frame (0: not added yet).
  std::vector<ProfileBuilder> builders;
  std::vector<std::vector<uint64_t>> location_ids(fold.size());
  std::vector<std::vector<uint64_t>> mapping_ids(fold.size());
  for (size_t out = 0; out < fold.size(); ++out) {
    builders.emplace_back(period_ns, start_unix_ns);
    builders.back().set_duration_ns(duration_ns);
    builders.back().add_comment(fold[out] ? kFoldedComment : kKeptComment);
  }
  auto location_of = [&](size_t out, FrameIndex index) {
    if (location_ids[out].size() <= index) location_ids[out].resize(frames_.size(), 0);
    uint64_t& id = location_ids[out][index];
    if (id != 0) return id;
    const NamedFrame& frame = frames_[index];
    uint64_t mapping_id = 0;
    if (frame.mapping != 0) {
      if (mapping_ids[out].size() < frame.mapping) mapping_ids[out].resize(mappings_.size(), 0);
      uint64_t& mid = mapping_ids[out][frame.mapping - 1];
      if (mid == 0) mid = builders[out].add_mapping(mappings_[frame.mapping - 1]);
      mapping_id = mid;
    }
    id = builders[out].add_location(mapping_id, frame.address, {frame.line});
    return id;
  };

  std::vector<FrameIndex> frames, user_frames;
  std::vector<FrameRole> roles;
  std::vector<uint32_t> kept;
  std::vector<uint64_t> locations;
  for (const auto& [key, count] : round.counts) {
    frames.clear();
    user_frames.clear();
    int32_t pid = static_cast<int32_t>(key.pid);
    // A process that exec'd in the round: the image the sample ran in, as
    // the drain that brought it chose.
    auto pinned = round.images.find(key);
    const ProcessSnapshot* process = pinned != round.images.end() ? pinned->second.get() : processes.find(pid);
    // User frames are named first so that a process's main executable, not
    // the kernel, is the profile's first mapping (pprof shows it as "File").
    if (key.user_stack_id == OMNIPROF_STACK_ID_LOST) {
      user_frames.push_back(marker_frame("[user stack lost: stack_traces full]"));
    } else if (key.user_stack_id != OMNIPROF_STACK_ID_NONE) {
      auto it = round.stacks.find(key.user_stack_id);
      if (it == round.stacks.end()) {
        user_frames.push_back(marker_frame("[user stack missing]"));
      } else {
        const StackFrames& stack = it->second;
        for (size_t i = 0; i < stack.frames.size(); ++i) {
          const omniprof_frame& frame = stack.frames[i];
          if (frame.kind == OMNIPROF_FRAME_NATIVE) {
            user_frames.push_back(native_frame(process, pid, frame.address, i == 0));
          } else {
            user_frames.push_back(plugin_frame(pid, frame));
          }
        }
      }
    }
    // Leaf first: kernel frames sit below (are called by) the user frames.
    if (key.kernel_stack_id == OMNIPROF_STACK_ID_LOST) {
      frames.push_back(marker_frame("[kernel stack lost: stack_traces full]"));
    } else if (key.kernel_stack_id != OMNIPROF_STACK_ID_NONE) {
      auto it = round.stacks.find(key.kernel_stack_id);
      if (it == round.stacks.end()) {
        frames.push_back(marker_frame("[kernel stack missing]"));
      } else {
        for (const auto& frame : it->second.frames) frames.push_back(kernel_frame(frame.address));
      }
    }
    frames.insert(frames.end(), user_frames.begin(), user_frames.end());
    std::string thread_name(key.thread_name, strnlen(key.thread_name, sizeof(key.thread_name)));
    if (!process) stats_.unknown_processes += count;
    SampleLabels labels;
    labels.pid = pid;
    labels.tid = static_cast<int64_t>(key.tid);
    labels.comm = process ? process->comm : thread_name;
    labels.thread_name = thread_name;
    if (process) labels.resource = process->resource;
    if (key.label_slot != 0 && plugins_) {
      if (Plugin* plugin = plugins_->plugin_for_frame_kind(key.label_slot)) {
        if (auto label = PluginHost::label(*plugin, key.label_value)) {
          labels.extra_key = label->first;
          labels.extra_value = label->second;
        }
      }
    }
    roles.clear();
    for (FrameIndex index : frames) roles.push_back(frames_[index].role);
    fold_interpreter_frames(roles, kept);
    auto times = round.times.find(key);
    const std::vector<uint64_t>* sample_times = times == round.times.end() ? nullptr : &times->second;
    bool counted_folds = false;
    for (size_t out = 0; out < fold.size(); ++out) {
      locations.clear();
      if (fold[out]) {
        for (uint32_t i : kept) locations.push_back(location_of(out, frames[i]));
        if (!counted_folds) {
          stats_.folded_frames += frames.size() - kept.size();
          counted_folds = true;
        }
      } else {
        for (FrameIndex index : frames) locations.push_back(location_of(out, index));
      }
      builders[out].add_sample(locations, static_cast<int64_t>(count), labels, sample_times);
    }
  }
  return builders;
}

}  // namespace omniprof
