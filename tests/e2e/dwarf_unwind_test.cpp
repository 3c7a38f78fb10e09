// End-to-end: programs built -O2 -fomit-frame-pointer, as distro code is,
// walked whole by the native plugin's unwind tables in BPF. Checked through
// `go tool pprof` on the written profile.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_support.h"
#include "omniprof/bpf/abi.h"
#include "omniprof/support/cfi/elf_cfi.h"

namespace omniprof::e2e {
namespace {

struct Workload {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> chain;  // leaf first, consecutive frames every leaf sample must carry
  // Whether the workload takes one more argument, a file it waits for
  // before its event: the test creates it once the agent records.
  bool waits_for_recording = false;
};

// gtest prints a failed test's parameter, and ctest's entries are named,
// with this.
void PrintTo(const Workload& w, std::ostream* out) { *out << w.name; }

std::vector<std::string> recursion_chain(int depth) {
  std::vector<std::string> chain = {"leaf"};
  for (int i = 0; i < depth; ++i) chain.push_back("recurse");
  chain.push_back("main");
  return chain;
}

const std::vector<std::string> kChain = {"leaf", "stage_c", "stage_b", "stage_a", "main"};

class DwarfUnwindTest : public ::testing::TestWithParam<Workload> {};

TEST_P(DwarfUnwindTest, NinetyFivePercentOfLeafSamplesCarryTheWholeChain) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  const Workload& w = GetParam();
  const std::string dir = temp_dir(w.name);
  const std::string go = dir + "/go", out = dir + "/profile.pb.gz";
  std::vector<std::string> argv = {workload(w.name)};
  argv.insert(argv.end(), w.args.begin(), w.args.end());
  if (w.waits_for_recording) argv.push_back(go);
  BackgroundProcess target(argv);
  BackgroundRecord record(OMNIPROF_BINARY, {"-d", "5", "-F", "99", "-p", std::to_string(target.pid()), "-o", out},
                          dir + "/record.log");
  ASSERT_TRUE(record.wait_until_recording()) << "omniprof record never started recording:\n" << record.output();
  if (w.waits_for_recording) std::ofstream(go) << "go\n";
  ASSERT_EQ(record.wait(), 0) << record.output();
  const std::string output = record.output();
  EXPECT_NE(output.find("native.dwarf_frames"), std::string::npos) << output;

  std::string error;
  auto traces = read_traces_with_go(out, &error);
  ASSERT_FALSE(traces.empty()) << error;
  // The vDSO's clock_gettime calls static helpers its .dynsym does not name
  // (on kvm-clock, the pvclock reader: most of the time is there), named
  // after their FDE as "[vdso]+0xSTART": those samples' chain starts one
  // frame in.
  for (auto& t : traces) {
    if (!t.frames.empty() && t.frames.front().rfind("[vdso]+0x", 0) == 0) t.frames.erase(t.frames.begin());
  }
  auto [leaf, whole, example] = count_chain(traces, w.chain);
  ASSERT_GT(leaf, 100) << "too few leaf samples to judge";
  EXPECT_GE(whole * 100, leaf * 95) << whole << " of " << leaf
                                    << " leaf samples carry the whole chain; one that does not: " << example
                                    << "\n" << output;
}

// Each workload lives 120 s, far past its test (killed at the end): record's
// start-up in an emulated guest can take a minute before its 5 s.
INSTANTIATE_TEST_SUITE_P(
    Workloads, DwarfUnwindTest,
    ::testing::Values(Workload{"chain_nofp", {"120"}, kChain},
                      Workload{"chain_nofp_nopie", {"120"}, kChain},
                      Workload{"chain_nofp_static", {"120"}, kChain},
                      Workload{"chain_nofp_shared", {"120"}, kChain},
                      Workload{"threads_nofp", {"120"}, {"leaf", "stage_c", "stage_b", "stage_a", "worker"}},
                      Workload{"recursion_nofp", {"120", "60"}, recursion_chain(60)},
                      // The library is mapped once the agent has read the process and records.
                      Workload{"dlopen_nofp", {"120"}, {"dl_leaf", "dl_stage", "main"}, true},
                      // The [vdso] is in no file: its table comes from the process's image.
                      Workload{"vdso_clock_nofp", {"120"},
                               {"__vdso_clock_gettime", "clock_gettime", "read_clock", "main"}}),
    [](const ::testing::TestParamInfo<Workload>& info) { return info.param.name; });

TEST(DwarfUnwindLimitsTest, DeepestStackIsCutAtTheDepthLimitAndCounted) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  // 600 frames of recursion: more than OMNIPROF_MAX_STACK_DEPTH (512), which
  // the bpf_loop walk (5.17+) reaches; before 5.17, the tail-call budget.
  BackgroundProcess target({workload("recursion_nofp"), "120", "600"});
  std::string out = temp_dir("deep") + "/profile.pb.gz";
  auto result = run_command({OMNIPROF_BINARY, "record", "-d", "4", "-p", std::to_string(target.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::string error;
  auto traces = read_traces_with_go(out, &error);
  ASSERT_FALSE(traces.empty()) << error;
  if (result.err.find("program native_unwind_loop)") == std::string::npos) {
    // A kernel without bpf_loop (5.10 to 5.16; the host loaded
    // native_unwind): its walk's limit is the tail-call budget, about 120
    // frames, which the stack reaches first. Counted, and every sample of
    // the leaf is cut the same way (WithoutBpfLoopStacksStayWholeUpToThe-
    // TailCallBudget tests what stays whole under it).
    ASSERT_NE(result.err.find("program native_unwind)"), std::string::npos) << result.err;
    EXPECT_NE(result.out.find("tail_call_limit_truncated"), std::string::npos) << result.out;
    int64_t leaf = 0, cut = 0;
    for (const auto& t : traces) {
      if (t.frames.empty() || t.frames.front() != "leaf") continue;
      leaf += t.count;
      size_t recurse = std::count(t.frames.begin(), t.frames.end(), "recurse");
      if (recurse >= 100 && recurse < 600 && std::find(t.frames.begin(), t.frames.end(), "main") == t.frames.end()) {
        cut += t.count;
      }
    }
    ASSERT_GT(leaf, 100);
    EXPECT_GE(cut * 100, leaf * 95) << cut << " of " << leaf << " cut at the tail-call budget";
    return;
  }
  EXPECT_NE(result.out.find("native.stop_max_depth"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("stack_truncated_max_depth"), std::string::npos) << result.out;
  int64_t leaf = 0, at_limit = 0;
  for (const auto& t : traces) {
    if (t.frames.empty() || t.frames.front() != "leaf") continue;
    leaf += t.count;
    // The walk keeps the innermost OMNIPROF_MAX_STACK_DEPTH frames.
    size_t recurse = std::count(t.frames.begin(), t.frames.end(), "recurse");
    if (recurse == OMNIPROF_MAX_STACK_DEPTH - 1 && t.frames.size() == OMNIPROF_MAX_STACK_DEPTH) at_limit += t.count;
  }
  ASSERT_GT(leaf, 100);
  EXPECT_GE(at_limit * 100, leaf * 95) << at_limit << " of " << leaf;
}

// Kernels before 5.17 have no bpf_loop: the host loads native_unwind, the
// walk that spends a tail call per 5 frames. The host is told to act as on
// such a kernel, so this runs on every kernel of the matrix.
TEST(DwarfUnwindLimitsTest, WithoutBpfLoopStacksStayWholeUpToTheTailCallBudget) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  BackgroundProcess shallow({workload("recursion_nofp"), "120", "40"});
  BackgroundProcess deep({workload("recursion_nofp"), "120", "600"});
  std::string out = temp_dir("noloop") + "/profile.pb.gz";
  auto result = run_command({"/usr/bin/env", "OMNIPROF_HIDE_BPF_FEATURES=bpf_loop", OMNIPROF_BINARY, "record",
                             "-d", "4", "-p", std::to_string(shallow.pid()), "-p", std::to_string(deep.pid()),
                             "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("program native_unwind)"), std::string::npos) << result.err;
  // The deep one runs out of tail calls, counted.
  EXPECT_NE(result.out.find("tail_call_limit_truncated"), std::string::npos) << result.out;
  std::string error;
  auto traces = read_traces_with_go(out, &error);
  ASSERT_FALSE(traces.empty()) << error;
  int64_t leaf = 0, whole = 0;
  for (const auto& t : traces) {
    if (t.frames.empty() || t.frames.front() != "leaf") continue;
    size_t recurse = std::count(t.frames.begin(), t.frames.end(), "recurse");
    if (recurse > 60) continue;  // the deep process
    leaf += t.count;
    if (recurse == 40 && std::find(t.frames.begin(), t.frames.end(), "main") != t.frames.end()) whole += t.count;
  }
  ASSERT_GT(leaf, 50);
  EXPECT_GE(whole * 100, leaf * 95) << whole << " of " << leaf;
}

TEST(DwarfUnwindLimitsTest, ExecReplacesTheMappings) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  // The pid stays, the program changes: a shell that execs the workload
  // once the agent has described the shell, which it has when it records.
  const std::string dir = temp_dir("exec");
  const std::string go = dir + "/go", out = dir + "/profile.pb.gz";
  BackgroundProcess target({"/bin/sh", "-c",
                            "i=0; while [ ! -e \"$0\" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done; "
                            "exec \"$1\" 20",
                            go, workload("chain_nofp_nopie")});
  BackgroundRecord record(OMNIPROF_BINARY, {"-d", "6", "-p", std::to_string(target.pid()), "-o", out},
                          dir + "/record.log");
  ASSERT_TRUE(record.wait_until_recording()) << "omniprof record never started recording:\n" << record.output();
  std::ofstream(go) << "go\n";
  ASSERT_EQ(record.wait(), 0) << record.output();
  std::string error;
  auto traces = read_traces_with_go(out, &error);
  ASSERT_FALSE(traces.empty()) << error;
  auto [leaf, whole, example] = count_chain(traces, kChain);
  ASSERT_GT(leaf, 100);
  EXPECT_GE(whole * 100, leaf * 95) << whole << " of " << leaf << "; one that does not: " << example;
}

TEST(DebugUnwindTableTest, PrintsTheTableOfAFileAndRefusesANonElfOne) {
  // No BPF needed: the command only reads the file.
  auto result = run_command({OMNIPROF_BINARY, "debug", "unwind-table", workload("chain_nofp")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("# unwind-table v1 file=" + workload("chain_nofp"), 0), 0u) << result.out;
  EXPECT_NE(result.out.find(" cfa=rsp+8 rbp=unchanged\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(" end\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(" outermost\n"), std::string::npos) << result.out;  // _start

  std::string text = temp_dir("notelf") + "/notes.txt";
  std::ofstream(text) << "not an ELF file\n";
  auto bad = run_command({OMNIPROF_BINARY, "debug", "unwind-table", text});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find(text), std::string::npos) << bad.err;
}

// The rows of `table_text` (the text form) outside [begin, end].
std::set<std::string> rows_outside(const std::string& table_text, uint64_t begin, uint64_t end) {
  std::set<std::string> rows;
  std::istringstream lines(table_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const uint64_t pc = std::stoull(line.substr(0, 18), nullptr, 16);
    if (pc < begin || pc > end) rows.insert(line);
  }
  return rows;
}

TEST(DebugUnwindTableTest, ACorruptedFdeCostsThatFunctionOnlyAndIsReported) {
  // No BPF needed. A copy of a workload whose first FDE with instructions
  // starts with DW_CFA_GNU_window_save, which is not valid on x86-64.
  const std::string original = workload("chain_nofp");
  const std::string copy = temp_dir("bad-fde") + "/chain_nofp";
  std::filesystem::copy_file(original, copy, std::filesystem::copy_options::overwrite_existing);
  auto cfi = unwind::read_elf_cfi(copy, unwind::CfiReadOptions{"/nonexistent", false});
  ASSERT_TRUE(cfi.ok()) << cfi.error().message;
  ASSERT_FALSE(cfi->sections.empty());
  const unwind::CfiSection& eh_frame = cfi->sections[0];
  ASSERT_EQ(eh_frame.name, ".eh_frame");
  ASSERT_TRUE(eh_frame.file_offset.has_value());
  auto parsed = unwind::parse_cfi(eh_frame.view());
  ASSERT_TRUE(parsed.ok());
  const unwind::Fde* victim = nullptr;
  for (const unwind::Fde& fde : parsed->fdes) {
    if (!fde.instructions.empty() && fde.pc_begin < fde.pc_end) {
      victim = &fde;
      break;
    }
  }
  ASSERT_NE(victim, nullptr);
  const uint64_t at = *eh_frame.file_offset + static_cast<uint64_t>(victim->instructions.data() - eh_frame.data.get());
  {
    std::fstream file(copy, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(at));
    file.put(static_cast<char>(0x2d));
    ASSERT_TRUE(file.good());
  }

  auto good = run_command({OMNIPROF_BINARY, "debug", "unwind-table", original});
  auto bad = run_command({OMNIPROF_BINARY, "debug", "unwind-table", copy});
  ASSERT_EQ(good.exit_code, 0) << good.err;
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  // One line naming the file, the FDE and why.
  char fde_at[32];
  std::snprintf(fde_at, sizeof(fde_at), "FDE at %#llx ", static_cast<unsigned long long>(victim->offset));
  EXPECT_NE(bad.err.find(copy + ": 1 malformed FDE skipped (first: "), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find(fde_at), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("DW_CFA_GNU_window_save"), std::string::npos) << bad.err;
  EXPECT_EQ(good.err.find("malformed"), std::string::npos) << good.err;
  // Every row outside the broken function is still there.
  const std::set<std::string> kept = rows_outside(bad.out, victim->pc_begin, victim->pc_end);
  size_t missing = 0;
  for (const std::string& row : rows_outside(good.out, victim->pc_begin, victim->pc_end)) {
    if (kept.count(row) == 0) {
      ++missing;
      ADD_FAILURE() << "lost: " << row;
    }
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_GT(kept.size(), 10u);
}


TEST(DwarfUnwindLimitsTest, ExitedProcessReleasesItsExecutables) {
  OMNIPROF_REQUIRE_BPF();
  // The workload starts once the agent records, not after a guessed delay:
  // start-up takes seconds under emulation (the kernel matrix), longer than
  // the workload lives. It exits with seconds of recording left. The agent
  // logs at debug level, where it names each exited process that was the
  // last to map some files, and which files they were; their tables are kept
  // for the next process to map them (a minute), and unloaded when the agent
  // stops if none did.
  const std::string dir = temp_dir("exit");
  const std::string out = dir + "/profile.pb.gz";
  std::ofstream(dir + "/omniprof.yaml") << "log_level: debug\n";
  BackgroundRecord record(OMNIPROF_BINARY, {"-d", "5", "-o", out}, dir + "/record.log",
                          {"OMNIPROF_CONFIG_DIR=" + dir});
  ASSERT_TRUE(record.wait_until_recording()) << "omniprof record never started recording:\n" << record.output();
  const std::string executable = std::filesystem::canonical(workload("chain_nofp_nopie")).string();
  BackgroundProcess target({executable, "2"});
  const pid_t pid = target.pid();
  EXPECT_EQ(target.wait(), 0);
  ASSERT_EQ(record.wait(), 0) << record.output();
  // The workload's own executable is mapped by no other process: the agent
  // says so of that pid, and unloads its table at the latest when it stops.
  const std::string released = "pid " + std::to_string(pid) + " gone: the last process mapping";
  std::istringstream lines(record.output());
  std::string line, of_pid;
  while (std::getline(lines, line)) {
    if (line.find(released) != std::string::npos) of_pid = line;
  }
  ASSERT_FALSE(of_pid.empty()) << "no line '" << released << "'";
  EXPECT_NE(of_pid.find(executable), std::string::npos) << of_pid;
  const std::string unloaded = "unloaded " + executable;
  EXPECT_NE(record.output().find(unloaded), std::string::npos) << "no line '" << unloaded << "'";
}

}  // namespace
}  // namespace omniprof::e2e
