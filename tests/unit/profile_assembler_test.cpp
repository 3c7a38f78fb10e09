// ProfileAssembler without BPF: samples of this very test process, whose
// functions have known names, and kernel frames from a kallsyms fixture.
#include <gtest/gtest.h>
#include <unistd.h>

#include "agent/profile_assembler.h"
#include "executables/executable_info_manager.h"
#include "executables/open_executables.h"
#include "process/process_tracker.h"
#include "symbolize/elf_symbolizer.h"
#include "symbolize/kernel_symbols.h"

extern "C" __attribute__((noinline, used)) int omniprof_assembler_test_marker(int x) {
  return x * 3 + 1;
}

namespace omniprof {
namespace {

StackFrames frames_of(std::initializer_list<uint64_t> addresses, uint8_t kind) {
  StackFrames stack;
  for (uint64_t address : addresses) {
    omniprof_frame frame{};
    frame.address = address;
    frame.kind = kind;
    stack.frames.push_back(frame);
  }
  return stack;
}

struct Names {
  std::vector<std::string> frames;  // leaf first
  int64_t count = 0;
  std::map<std::string, std::string> labels;
};

std::vector<Names> decode(const perftools::profiles::Profile& p) {
  auto str = [&](int64_t i) { return p.string_table(static_cast<int>(i)); };
  std::map<uint64_t, std::string> function_names;
  for (const auto& f : p.function()) function_names[f.id()] = str(f.name());
  std::map<uint64_t, std::string> location_names;
  for (const auto& l : p.location()) {
    location_names[l.id()] = l.line_size() ? function_names[l.line(0).function_id()] : "";
  }
  std::vector<Names> out;
  for (const auto& s : p.sample()) {
    Names n;
    for (uint64_t id : s.location_id()) n.frames.push_back(location_names[id]);
    n.count = s.value(0);
    for (const auto& l : s.label()) n.labels[str(l.key())] = l.str() ? str(l.str()) : std::to_string(l.num());
    out.push_back(n);
  }
  return out;
}

omniprof_stack_key key_for(uint64_t user, uint64_t kernel) {
  omniprof_stack_key key{};
  key.pid = static_cast<uint32_t>(getpid());
  key.tid = static_cast<uint32_t>(getpid());
  key.user_stack_id = user;
  key.kernel_stack_id = kernel;
  std::snprintf(key.thread_name, sizeof(key.thread_name), "worker-1");
  return key;
}

TEST(ProfileAssemblerTest, NamesUserAndKernelFramesAndKeepsUnnamedOnes) {
  FileIdCache ids;
  OpenExecutables files(ids);
  ElfSymbolizer symbolizer;
  ProcessTracker processes(nullptr, nullptr);
  processes.track_executables(nullptr, &files, &symbolizer);
  ASSERT_NE(processes.get(getpid()), nullptr);
  auto kernel = KernelSymbols::parse(
      "ffffffff81000000 T _stext\nffffffff81100000 T vfs_read\nffffffff81100400 T ksys_read\n"
      "ffffffff81200000 t my_mod_fn\t[my_mod]\nffffffff81200100 T _etext\n",
      "fixture");
  ASSERT_TRUE(kernel) << kernel.error().message;

  auto marker = reinterpret_cast<uint64_t>(&omniprof_assembler_test_marker);
  RoundSamples round;
  // User stack: leaf inside the marker function, then a return address one
  // past a (pretend) call in it, then an address in no mapping.
  round.stacks[100] = frames_of({marker + 2, marker + 1, 0x10}, OMNIPROF_FRAME_NATIVE);
  round.stacks[200] = frames_of({0xffffffff81100010, 0xffffffff81100410, 0xffffffff81200010}, OMNIPROF_FRAME_KERNEL);
  round.counts[key_for(100, 200)] = 7;
  round.counts[key_for(OMNIPROF_STACK_ID_LOST, OMNIPROF_STACK_ID_NONE)] = 2;
  round.counts[key_for(300, OMNIPROF_STACK_ID_NONE)] = 1;  // stack 300 was never read

  ProfileAssembler assembler(symbolizer, &*kernel, nullptr);
  ProfileBuilder builder = assembler.assemble(round, *processes.snapshot(), 10101010, 0, 1000000000);
  auto samples = decode(builder.build());
  ASSERT_EQ(samples.size(), 3u);
  std::map<int64_t, Names> by_count;
  for (const auto& s : samples) by_count[s.count] = s;

  const Names& full = by_count[7];
  ASSERT_EQ(full.frames.size(), 6u);
  EXPECT_EQ(full.frames[0], "vfs_read");
  EXPECT_EQ(full.frames[1], "ksys_read");
  EXPECT_EQ(full.frames[2], "my_mod_fn [my_mod]");
  EXPECT_EQ(full.frames[3], "omniprof_assembler_test_marker");
  // A return address is looked up one byte earlier: marker + 1 - 1 = marker.
  EXPECT_EQ(full.frames[4], "omniprof_assembler_test_marker");
  EXPECT_EQ(full.frames[5], "[unknown]+0xf");
  EXPECT_EQ(full.labels.at("thread_name"), "worker-1");
  EXPECT_EQ(full.labels.at("pid"), std::to_string(getpid()));
  EXPECT_FALSE(full.labels.at("comm").empty());

  EXPECT_EQ(by_count[2].frames, std::vector<std::string>{"[user stack lost: stack_traces full]"});
  EXPECT_EQ(by_count[1].frames, std::vector<std::string>{"[user stack missing]"});
  EXPECT_EQ(builder.total_samples(), 10);
  EXPECT_GE(assembler.stats().unnamed_frames, 1u);
  // 0x10 is in no mapping of this process: its mappings are to be read
  // again; the marker's file was sampled.
  EXPECT_EQ(assembler.requests().stale_mappings, std::unordered_set<int32_t>{getpid()});
  EXPECT_EQ(assembler.requests().sampled_files.size(), 1u);
}

TEST(ProfileAssemblerTest, ProcessGoneBeforeItWasReadKeepsItsSamples) {
  ElfSymbolizer symbolizer;
  RoundSamples round;
  omniprof_stack_key key = key_for(100, OMNIPROF_STACK_ID_NONE);
  key.pid = 0x7ffffff0;  // no such process
  round.stacks[100] = frames_of({0x401000}, OMNIPROF_FRAME_NATIVE);
  round.counts[key] = 3;
  ProfileAssembler assembler(symbolizer, nullptr, nullptr);
  ProfileBuilder builder = assembler.assemble(round, KnownProcesses{}, 1000, 0, 1);
  auto samples = decode(builder.build());
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].count, 3);
  EXPECT_EQ(samples[0].frames, std::vector<std::string>{"[unknown]+0x401000"});
  EXPECT_EQ(samples[0].labels.at("comm"), "worker-1");  // falls back to the thread name
  EXPECT_EQ(assembler.stats().unknown_processes, 3u);
  EXPECT_TRUE(assembler.requests().stale_mappings.empty());  // nothing known to read again
}

// A process that exec'd in the round: a sample taken before the exec is
// named with the image it ran in (this test process, kept as an earlier
// image and chosen at the drain), with that image's name; one taken after,
// with the new image.
TEST(ProfileAssemblerTest, SamplesTakenBeforeAnExecAreNamedWithTheImageTheyRanIn) {
  FileIdCache ids;
  OpenExecutables files(ids);
  ElfSymbolizer symbolizer;
  ProcessTracker processes(nullptr, nullptr);
  processes.track_executables(nullptr, &files, &symbolizer);
  auto before = processes.get(getpid());
  ASSERT_NE(before, nullptr);
  auto after = std::make_shared<ProcessSnapshot>();
  after->pid = getpid();
  after->comm = "newimage";
  ProcMapping mapping;
  mapping.start = 0x10000;
  mapping.end = 0x20000;
  mapping.perms = "r-xp";
  mapping.path = "/nonexistent/newimage";
  after->mappings = {mapping};
  after->executables.resize(1);
  KnownProcesses known;
  known.by_pid[getpid()] = after;

  auto marker = reinterpret_cast<uint64_t>(&omniprof_assembler_test_marker);
  RoundSamples round;
  round.stacks[100] = frames_of({marker + 2, marker + 1}, OMNIPROF_FRAME_NATIVE);
  round.stacks[101] = frames_of({0x10010}, OMNIPROF_FRAME_NATIVE);
  omniprof_stack_key old_key = key_for(100, OMNIPROF_STACK_ID_NONE);
  std::snprintf(old_key.thread_name, sizeof(old_key.thread_name), "%s", before->comm.c_str());
  omniprof_stack_key new_key = key_for(101, OMNIPROF_STACK_ID_NONE);
  std::snprintf(new_key.thread_name, sizeof(new_key.thread_name), "newimage");
  round.counts[old_key] = 5;
  round.counts[new_key] = 3;
  // As the drains that brought them chose, from the image replaced and the
  // current one.
  KnownProcesses recent;
  recent.by_pid[getpid()] = after;
  recent.earlier_by_pid[getpid()] = {before};
  round.pin_images(recent);
  ASSERT_EQ(round.images.size(), 1u) << "only a replaced image is pinned; the current one names at the close";
  EXPECT_EQ(round.images[old_key], before);

  ProfileAssembler assembler(symbolizer, nullptr, nullptr);
  ProfileBuilder builder = assembler.assemble(round, known, 1000, 0, 1);
  std::map<int64_t, Names> by_count;
  for (const auto& s : decode(builder.build())) by_count[s.count] = s;
  ASSERT_EQ(by_count.size(), 2u);
  EXPECT_EQ(by_count[5].frames,
            (std::vector<std::string>{"omniprof_assembler_test_marker", "omniprof_assembler_test_marker"}));
  EXPECT_EQ(by_count[5].labels.at("comm"), before->comm);
  EXPECT_EQ(by_count[3].frames, std::vector<std::string>{"newimage+0x10"});
  EXPECT_EQ(by_count[3].labels.at("comm"), "newimage");
  // Every frame was in a mapping of the image chosen: nothing to read again.
  EXPECT_TRUE(assembler.requests().stale_mappings.empty());
}

// Of images that all map a sample's addresses, the one with the sample's
// thread name; of none that map them, the current one.
TEST(KnownProcessesTest, ImageForPrefersTheImageNamedAsTheThreadAmongThoseMappingEveryAddress) {
  auto image = [](const std::string& comm, uint64_t start) {
    auto snapshot = std::make_shared<ProcessSnapshot>();
    snapshot->comm = comm;
    ProcMapping m;
    m.start = start;
    m.end = start + 0x1000;
    snapshot->mappings = {m};
    snapshot->executables.resize(1);
    return snapshot;
  };
  KnownProcesses known;
  known.by_pid[7] = image("current", 0x1000);
  known.earlier_by_pid[7] = {image("oldest", 0x1000), image("older", 0x5000), image("old", 0x1000)};
  EXPECT_EQ(known.image_for(7, "current", {0x1010})->comm, "current");
  EXPECT_EQ(known.image_for(7, "oldest", {0x1010})->comm, "oldest");
  EXPECT_EQ(known.image_for(7, "a-thread", {0x1010})->comm, "current");  // no name matches: the newest mapping all
  EXPECT_EQ(known.image_for(7, "current", {0x5010})->comm, "older");
  EXPECT_EQ(known.image_for(7, "old", {0x1010, 0x5010})->comm, "current");  // none maps both
  EXPECT_EQ(known.image_for(8, "x", {0x1010}), nullptr);
}

class NoLoader : public ExecutableLoader {
 public:
  omniprof_status load(uint64_t, const std::string&, std::string&) override { return OMNIPROF_OK; }
  void unload(uint64_t) override {}
};

// With the tracker identifying files (as in the agent), the second round
// names the same frames from the symbol cache, reading nothing; a file no
// process maps any more leaves the cache at the next round.
TEST(ProfileAssemblerTest, SecondRoundNamesFramesFromTheSymbolCache) {
  NoLoader loader;
  ExecutableInfoManager executables(loader);
  FileIdCache ids;
  OpenExecutables files(ids);
  ElfSymbolizer symbolizer;
  ProcessTracker processes(nullptr, nullptr);
  processes.track_executables(&executables, &files, &symbolizer);
  ASSERT_NE(processes.get(getpid()), nullptr);
  ProfileAssembler assembler(symbolizer, nullptr, nullptr);

  auto marker = reinterpret_cast<uint64_t>(&omniprof_assembler_test_marker);
  RoundSamples round;
  round.stacks[100] = frames_of({marker + 2, marker + 1}, OMNIPROF_FRAME_NATIVE);
  round.counts[key_for(100, OMNIPROF_STACK_ID_NONE)] = 5;
  const std::vector<std::string> expected{"omniprof_assembler_test_marker", "omniprof_assembler_test_marker"};

  auto first = decode(assembler.assemble(round, *processes.snapshot(), 1000, 0, 1).build());
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].frames, expected);
  const SymbolCacheStats after_first = assembler.symbol_cache().stats();
  EXPECT_EQ(after_first.misses, 2u);
  EXPECT_EQ(after_first.hits, 0u);

  auto second = decode(assembler.assemble(round, *processes.snapshot(), 1000, 0, 1).build());
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].frames, expected);
  EXPECT_EQ(assembler.symbol_cache().stats().misses, 2u);
  EXPECT_EQ(assembler.symbol_cache().stats().hits, 2u);

  // The process is forgotten (its exit, then the drains that have every
  // sample it took, then the round's end): its files leave the cache when
  // the next round starts.
  processes.handle_event(omniprof_event{OMNIPROF_EVENT_EXIT, static_cast<uint32_t>(getpid()), 0});
  processes.drained({getpid()});
  processes.drained({getpid()});
  processes.end_round();
  RoundSamples empty;
  (void)assembler.assemble(empty, *processes.snapshot(), 1000, 0, 1);
  EXPECT_EQ(assembler.symbol_cache().stats().entries, 0u);
  EXPECT_EQ(assembler.symbol_cache().stats().forgotten, 2u);
}

}  // namespace
}  // namespace omniprof
