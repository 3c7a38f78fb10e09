// End-to-end: the real omniprof binary profiles real processes with real BPF;
// `go tool pprof` reads what it wrote.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <thread>

#include "e2e_support.h"
#include "profile/pprof_reader.h"
#include "omniprof/bpf/abi.h"
#include "omniprof/plugin.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

CommandResult record(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {OMNIPROF_BINARY, "record"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_command(argv);
}

TEST(RecordTest, FramePointerChainIsWholeInNinetyPercentOfLeafSamples) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  BackgroundProcess chain({workload("chain"), "120"});
  std::string out = temp_dir("chain") + "/profile.pb.gz";
  auto result = record({"-d", "6", "-F", "99", "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("wrote " + out), std::string::npos) << result.out;

  std::string error;
  auto traces = traces_of_pid(read_traces_with_go(out, &error), chain.pid());
  ASSERT_FALSE(traces.empty()) << error;
  auto [leaf, whole, example] = count_chain(traces, {"leaf", "stage_c", "stage_b", "stage_a", "main"});
  for (const auto& t : traces) EXPECT_EQ(t.labels.at("comm"), "chain");
  // 6 s at 99 Hz of a process that is always on a CPU: about 600 samples,
  // fewer when the machine is busy with other work (two cores in CI).
  ASSERT_GT(leaf, 100) << "too few leaf samples to judge";
  EXPECT_GE(whole * 100, leaf * 90) << whole << " of " << leaf << " leaf samples carry the whole chain; one that does not: " << example;
  // The chain's stacks repeat: after the first, every store of one meets
  // EEXIST, which must not be taken for a full map on any kernel (6.1 hands
  // the errno back zero-extended). record prints only non-zero counters.
  EXPECT_NE(result.out.find("samples_recorded"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("stack_traces_full"), std::string::npos) << result.out;
}

TEST(RecordTest, SyscallHeavyWorkloadShowsKernelFramesUnderItsUserFrames) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  BackgroundProcess reader({workload("syscall_heavy"), "120"});
  std::string out = temp_dir("syscall") + "/profile.pb.gz";
  auto result = record({"-d", "5", "-p", std::to_string(reader.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;

  std::string error;
  auto traces = traces_of_pid(read_traces_with_go(out, &error), reader.pid());
  ASSERT_FALSE(traces.empty()) << error;
  int64_t total = 0, kernel_under_user = 0;
  for (const auto& t : traces) {
    total += t.count;
    auto user = std::find(t.frames.begin(), t.frames.end(), "read_loop");
    if (user == t.frames.end() || user + 1 == t.frames.end() || *(user + 1) != "main") continue;
    // Leaf first: the kernel's read path must come before (below) read_loop.
    if (std::find(t.frames.begin(), user, "vfs_read") != user) kernel_under_user += t.count;
  }
  ASSERT_GT(total, 100);
  EXPECT_GE(kernel_under_user * 2, total)
      << kernel_under_user << " of " << total << " samples show vfs_read under read_loop <- main";
}

TEST(RecordTest, PidFilterKeepsOnlyThatProcess) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  BackgroundProcess chain({workload("chain"), "120"});
  BackgroundProcess other({workload("syscall_heavy"), "120"});
  std::string out = temp_dir("pidfilter") + "/profile.pb.gz";
  auto result = record({"-d", "4", "-p", std::to_string(chain.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::string error;
  auto traces = read_traces_with_go(out, &error);
  ASSERT_FALSE(traces.empty()) << error;
  int64_t total = 0;
  for (const auto& t : traces) {
    EXPECT_EQ(t.labels.at("pid"), std::to_string(chain.pid()));
    total += t.count;
  }
  // Enough samples for the filter to have had something to drop: 4 s at
  // 99 Hz is ~400 on a CPU of its own, but the two CPUs are shared with the
  // other workload, the agent and (in CI) the rest of the suite; 86 were
  // seen on a loaded machine, so ask for a tenth of a CPU.
  EXPECT_GT(total, 40);
}

TEST(RecordTest, NotRootGivesOneLineAndNonZeroExit) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to switch to an unprivileged user";
  if (run_command({"setpriv", "--version"}).exit_code != 0) {
    if (in_ci()) FAIL() << "setpriv (util-linux) missing";
    GTEST_SKIP() << "setpriv missing";
  }
  auto result = run_command({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             OMNIPROF_BINARY, "record", "-d", "1", "-o", "/tmp/never.pb.gz"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find("root"), std::string::npos) << result.err;
}

TEST(RecordTest, UnwritableOutputFailsBeforeSamplingWithOneLine) {
  // Checked before any BPF is loaded: no root or kernel needed.
  std::string dir = temp_dir("record-output");
  std::ofstream(dir + "/file") << "a file, not a directory\n";
  struct Case {
    std::string output, reason;
  };
  for (const Case& c : {Case{dir + "/missing/profile.pb.gz", "directory " + dir + "/missing does not exist"},
                        Case{dir, "it is a directory"},
                        Case{dir + "/file/profile.pb.gz", dir + "/file is not a directory"}}) {
    auto result = record({"-d", "1", "-o", c.output});
    EXPECT_EQ(result.exit_code, 2) << c.output << ": " << result.err;
    EXPECT_EQ(result.err, "omniprof: cannot write " + c.output + ": " + c.reason + "\n");
    EXPECT_TRUE(result.out.empty()) << result.out;
  }
}

TEST(RunTest, RoundsSurviveTheirDirectoryRemovedOrUnwritable) {
  OMNIPROF_REQUIRE_BPF();
  std::string dir = temp_dir("run-output");
  std::string profiles = dir + "/profiles";
  std::string config = dir + "/omniprof.yaml";
  std::ofstream(config) << "round_seconds: 1\nsampling:\n  frequency_hz: 19\noutput:\n  directory: "
                        << profiles << "\n";
  constexpr int kRounds = 7;
  // Its log in a file the test reads while it runs: the test acts on the
  // agent's own account of a failed write, not after a guessed delay.
  const std::string log = dir + "/agent.log";
  BackgroundProcess agent({"/bin/sh", "-c",
                           std::string("exec '") + OMNIPROF_BINARY + "' run --config '" + config + "' --rounds " +
                               std::to_string(kRounds) + " > '" + log + "' 2>&1"},
                          BackgroundProcess::Role::kJudge);
  auto agent_log = [&] {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  // Written profiles only: a round's temporary file (NAME.pb.gz.tmp.XXXXXX,
  // before its rename) is not one. Acting on it removed the directory under
  // a write in progress, the round was kept and written later into the
  // recreated directory, which the test then removed too: "kept but never
  // written", though the agent had written it.
  auto count_files = [&] {
    std::error_code ec;
    long written = 0;
    if (!fs::is_directory(profiles, ec)) return 0L;
    for (const auto& entry : fs::directory_iterator(profiles, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 6 && name.compare(name.size() - 6, 6, ".pb.gz") == 0) ++written;
    }
    return ec ? 0L : written;
  };
  auto wait_for_a_file = [&](int seconds) {
    for (int i = 0; i < seconds * 10 && count_files() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return count_files() > 0;
  };
  // The first round comes after the agent's start-up, which took over 30 s
  // in the 5.10 guest (2026-12-06; it loads and verifies every plugin's BPF
  // and reads the whole machine's processes under emulation).
  ASSERT_TRUE(wait_for_a_file(120)) << "no first round within 120 s:\n" << agent_log();
  // Removed: the next round recreates it (round 1's file is gone with it).
  fs::remove_all(profiles);
  ASSERT_TRUE(wait_for_a_file(10)) << "the removed output directory was not recreated";
  // A file where the directory was (round 2's file goes): unwritable even
  // for root. The round that fails to write is kept in memory, then written
  // with the next once the path is free again.
  fs::remove_all(profiles);
  std::ofstream(profiles) << "not a directory\n";
  bool failed_write = false;
  std::optional<int> exited;
  for (int i = 0; i < 300 && !failed_write && !exited; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    failed_write = agent_log().find(" kept in memory until ") != std::string::npos;
    if (!failed_write) exited = agent.poll();
  }
  fs::remove(profiles);
  ASSERT_TRUE(failed_write) << "no round failed to write while its directory was a file (30 s):\n" << agent_log();
  CommandResult result;
  result.exit_code = exited ? *exited : agent.wait();
  result.err = agent_log();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("output directory " + profiles + " had disappeared: recreated"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("cannot write profile " + profiles + "/profile-"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("kept in memory until " + profiles + " is writable"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("kept earlier rounds"), std::string::npos) << result.err;
  // Every round kept in memory was written later under its own name.
  size_t kept = 0;
  for (size_t at = result.err.find(" not written yet"); at != std::string::npos;
       at = result.err.find(" not written yet", at + 1)) {
    size_t name_end = result.err.rfind(" (", at);
    size_t name_start = result.err.rfind(": ", name_end) + 2;
    std::string name = result.err.substr(name_start, name_end - name_start);
    EXPECT_TRUE(fs::exists(profiles + "/" + name)) << name << " was kept but never written";
    kept++;
  }
  EXPECT_GE(kept, 1u) << result.err;
  // Every round but the two whose files the test removed is there, and whole.
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(profiles)) files.push_back(entry.path().string());
  EXPECT_EQ(files.size(), static_cast<size_t>(kRounds - 2)) << result.err;
  for (const auto& f : files) {
    EXPECT_EQ(f.find(".tmp"), std::string::npos) << "temporary file left behind";
    auto profile = read_pprof_file(f);
    EXPECT_TRUE(profile) << f << ": " << (profile ? "" : profile.error().message);
  }
}

TEST(RunTest, WritesOneProfilePerRoundAndTheInterruptedRoundOnSigterm) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  std::string dir = temp_dir("run");
  std::string config = dir + "/omniprof.yaml";
  std::ofstream(config) << "round_seconds: 2\nsampling:\n  frequency_hz: 49\noutput:\n  directory: "
                        << dir << "/profiles\n";
  BackgroundProcess chain({workload("chain"), "120"});
  BackgroundProcess agent({OMNIPROF_BINARY, "run", "--config", config}, BackgroundProcess::Role::kJudge);
  // Rounds are counted by their files, never timed: start-up (BPF
  // verification, unwind tables for every running program) and a round's
  // naming and writing take seconds in an emulated guest, so "one more round"
  // can last well over round_seconds. A file still being written ends in
  // .tmp and is not a round yet.
  auto rounds_written = [&] {
    std::error_code ec;
    int written = 0;
    for (auto it = fs::directory_iterator(dir + "/profiles", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().filename().string().find(".tmp") == std::string::npos) ++written;
    }
    return written;
  };
  for (int i = 0; i < 600 && rounds_written() < 2 && !agent.poll(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(rounds_written(), 2) << "two rounds not written within 60 s";
  // SIGTERM half a second into the third round, which lasts round_seconds
  // at the least: its samples so far are the interrupted round's.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0);

  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir + "/profiles")) {
    files.push_back(entry.path().string());
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << "temporary file left behind";
  }
  ASSERT_EQ(files.size(), 3u);
  for (const auto& f : files) {
    std::string error;
    auto traces = read_traces_with_go(f, &error);
    EXPECT_FALSE(traces.empty()) << f << ": " << error;
  }
}

// `runtimes: {ruby: false}` in the main file and python disabled by a conf.d
// drop-in: the running agent has native.so mapped and never mapped ruby.so
// or python.so.
TEST(RunTest, DisabledRuntimesPluginsAreNotInTheAgentsMemory) {
  OMNIPROF_REQUIRE_BPF();
  std::string dir = temp_dir("run-disabled");
  std::string config = dir + "/omniprof.yaml";
  std::ofstream(config) << "round_seconds: 1\noutput:\n  directory: " << dir
                        << "/profiles\nruntimes:\n  ruby: false\n";
  fs::create_directory(dir + "/conf.d");
  std::ofstream(dir + "/conf.d/50-no-python.yaml") << "runtimes:\n  python: false\n";
  BackgroundProcess agent({OMNIPROF_BINARY, "run", "--config", config}, BackgroundProcess::Role::kJudge);
  auto first_round_written = [&] {
    std::error_code ec;
    auto it = fs::directory_iterator(dir + "/profiles", ec);
    return !ec && it != fs::directory_iterator();
  };
  for (int i = 0; i < 300 && !first_round_written() && !agent.poll(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(first_round_written()) << "no first round within 30 s";
  std::ifstream maps_file("/proc/" + std::to_string(agent.pid()) + "/maps");
  std::string maps((std::istreambuf_iterator<char>(maps_file)), std::istreambuf_iterator<char>());
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0);
  EXPECT_NE(maps.find("/native.so\n"), std::string::npos) << maps;
  EXPECT_EQ(maps.find("/ruby.so\n"), std::string::npos) << maps;
  EXPECT_EQ(maps.find("/python.so\n"), std::string::npos) << maps;
}

// The listing says what each BPF object cost the kernel to load (the
// start-up's BPF part): the host's and each loaded plugin's, program by
// program, the costliest first, within the object's whole time.
TEST(PluginsTest, ListsTheNativePluginAsLoadedWithWhatItsBpfLoadCost) {
  OMNIPROF_REQUIRE_BPF();
  auto result = run_command({OMNIPROF_BINARY, "plugins"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("loaded    native"), std::string::npos) << result.out;

  // "BPF object loaded in T ms: maps and set-up M ms, PROGRAM P ms[ (N
  // instructions verified)], ..."
  auto parts_within_whole = [&](const std::string& line) {
    SCOPED_TRACE(line);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex("loaded in ([0-9.]+) ms: maps and set-up ([0-9.]+) ms, (.*)$")));
    const double whole = std::stod(m[1]);
    double parts = std::stod(m[2]);
    std::string programs = m[3];
    const std::regex program(R"(([a-z_0-9]+) ([0-9.]+) ms( \(([0-9]+) instructions verified\))?(, |$))");
    int count = 0;
    double previous = whole;
    for (auto it = std::sregex_iterator(programs.begin(), programs.end(), program); it != std::sregex_iterator();
         ++it, ++count) {
      const double ms = std::stod((*it)[2]);
      EXPECT_LE(ms, previous) << "the costliest program first";
      previous = ms;
      parts += ms;
      if ((*it)[4].matched) EXPECT_GT(std::stoll((*it)[4]), 0);
    }
    EXPECT_GE(count, 1);
    EXPECT_GT(whole, 0.0);
    // Each figure is rounded to 0.1 ms.
    EXPECT_LE(parts, whole + 0.05 * (count + 2));
  };
  auto line_starting = [&](const std::string& start) {
    size_t at = result.out.find(start);
    return at == std::string::npos ? std::string() : result.out.substr(at, result.out.find('\n', at) - at);
  };
  const std::string host = line_starting("host BPF object loaded in ");
  ASSERT_FALSE(host.empty()) << result.out;
  parts_within_whole(host);
  EXPECT_NE(host.find("omniprof_entry "), std::string::npos) << host;
  EXPECT_NE(host.find("omniprof_stop "), std::string::npos) << host;

  // The native plugin's program is the one its slot holds.
  const std::string native = line_starting("loaded    native");
  const size_t next = result.out.find(native) + native.size() + 1;
  const std::string cost = result.out.substr(next, result.out.find('\n', next) - next);
  ASSERT_EQ(cost.rfind("          BPF object loaded in ", 0), 0u) << result.out;
  EXPECT_NE(cost.find(", native_unwind"), std::string::npos) << cost;
  parts_within_whole(cost);
}

}  // namespace
}  // namespace omniprof::e2e

namespace omniprof::e2e {
namespace {

// A config in `dir` that looks for plugins among the fixtures (each
// fixture's runtime is its file name, enabled unless the config says no).
std::string fixture_plugins_config(const std::string& dir, const std::string& more = "") {
  std::string config = dir + "/omniprof.yaml";
  std::ofstream(config) << "plugins:\n  directories: [" << OMNIPROF_FIXTURE_PLUGINS_DIR << "]\n" << more;
  return config;
}

TEST(PluginsTest, LoadsAThirdPartyPluginAndRefusesBadOnesWithReasons) {
  OMNIPROF_REQUIRE_BPF();
  std::string config = fixture_plugins_config(temp_dir("plugins"));
  auto result = run_command({OMNIPROF_BINARY, "plugins", "--config", config});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The third-party plugin's BPF object reuses the host's maps, passes the
  // verifier and gets the first third-party slot.
  EXPECT_NE(result.out.find("loaded    good_plugin 1.0 (runtime good_plugin)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("slot " + std::to_string(OMNIPROF_SLOT_THIRD_PARTY_FIRST)),
            std::string::npos) << result.out;
  EXPECT_NE(result.out.find("major must match"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("no entry symbol"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("cannot load shared object"), std::string::npos) << result.out;
  // The verifier's verdict is part of the reason.
  EXPECT_NE(result.out.find("its BPF object does not load"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("invalid bpf_context access"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("declares runtime 'fixture' but its file is named misnamed_plugin.so"),
            std::string::npos) << result.out;
  EXPECT_NE(result.out.find("loaded    native"), std::string::npos) << result.out;
}

// A runtime the config disables: its plugin's file is never opened (the
// fixtures' constructors note every open in OMNIPROF_FIXTURE_OPEN_LOG), and
// `plugins` lists it as disabled, not refused; the others are opened.
TEST(PluginsTest, DisabledRuntimesPluginFileIsNeverOpened) {
  OMNIPROF_REQUIRE_BPF();
  std::string dir = temp_dir("plugins-not-opened");
  std::string config = fixture_plugins_config(dir, "runtimes:\n  good_plugin: false\n");
  std::string open_log = dir + "/opened.txt";
  auto result = run_command({"env", "OMNIPROF_FIXTURE_OPEN_LOG=" + open_log, OMNIPROF_BINARY, "plugins",
                             "--config", config});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream in(open_log);
  std::string opened((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(opened.find("wrong_abi_plugin\n"), std::string::npos) << "fixtures opened: " << opened;
  EXPECT_EQ(opened.find("good_plugin\n"), std::string::npos) << "fixtures opened: " << opened;
  EXPECT_NE(result.out.find("disabled  good_plugin.so  " + std::string(OMNIPROF_FIXTURE_PLUGINS_DIR) +
                            "/good_plugin.so\n          reason: runtime 'good_plugin' is disabled in the "
                            "config (file not opened)"),
            std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("refused   good_plugin"), std::string::npos) << result.out;
}

// detect_process is shown each mapping under the name it has for the process
// (how an interpreter plugin finds libpython), even though the host reads the
// file through a descriptor or /proc/PID/map_files.
TEST(PluginsTest, DetectProcessSeesTheNamesTheProcessMapsItsFilesBy) {
  OMNIPROF_REQUIRE_BPF();
  std::string dir = temp_dir("plugins-names");
  std::string config = fixture_plugins_config(dir);
  BackgroundProcess chain({workload("chain_nofp_shared"), "120"});
  auto result = record({"-d", "1", "-p", std::to_string(chain.pid()), "--config", config, "-o", dir + "/p.pb.gz"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string prefix = "fixture: pid " + std::to_string(chain.pid()) + " maps ";
  std::string log = result.out + result.err;
  EXPECT_NE(log.find(prefix + workload("chain_nofp_shared") + " read as /proc/"), std::string::npos) << log;
  EXPECT_NE(log.find("libchainlink.so read as /proc/"), std::string::npos) << log;
  EXPECT_EQ(log.find(prefix + "/proc/"), std::string::npos) << "a name that is only a way to read the file: " << log;
}

// No BPF needed: the versions are checked before anything is loaded.
TEST(PluginsTest, ListingSaysWhichVersionsTheHostAcceptsAndARefusedPluginsOwn) {
  std::string config = fixture_plugins_config(temp_dir("plugins-versions"));
  auto result = run_command({OMNIPROF_BINARY, "plugins", "--config", config});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string accepted = "host accepts plugin ABI " + std::to_string(OMNIPROF_PLUGIN_ABI_MAJOR) + "." +
                               std::to_string(OMNIPROF_PLUGIN_ABI_MINOR) + " and older " +
                               std::to_string(OMNIPROF_PLUGIN_ABI_MAJOR) + ".x, BPF ABI " +
                               std::to_string(OMNIPROF_BPF_ABI_VERSION) + "\n";
  EXPECT_EQ(result.out.substr(0, accepted.size()), accepted) << result.out;
  // wrong_abi_plugin claims major 99 (tests/fixtures/plugins).
  const std::string refused = "refused   wrong_abi_plugin.so (plugin ABI 99." +
                              std::to_string(OMNIPROF_PLUGIN_ABI_MINOR) + ", BPF ABI " +
                              std::to_string(OMNIPROF_BPF_ABI_VERSION) + ")  ";
  EXPECT_NE(result.out.find(refused), std::string::npos) << result.out;
  // A plugin refused before its entry was read has no versions to show.
  EXPECT_NE(result.out.find("refused   not_elf_plugin.so  "), std::string::npos) << result.out;
}

TEST(PluginsTest, RuntimeDisabledInConfigIsListedAsDisabled) {
  OMNIPROF_REQUIRE_BPF();
  std::string dir = temp_dir("plugins-disabled");
  std::string config = dir + "/omniprof.yaml";
  std::ofstream(config) << "runtimes:\n  native: false\n";
  auto result = run_command({OMNIPROF_BINARY, "plugins", "--config", config});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("disabled  native"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("runtime 'native' is disabled in the config"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace omniprof::e2e

namespace omniprof::e2e {
namespace {

TEST(InstallTest, InstalledTreeFindsItsPluginsWithoutEnvironment) {
  OMNIPROF_REQUIRE_BPF();
  std::string prefix = temp_dir("install") + "/opt/omniprof";
  auto install = run_command({OMNIPROF_CMAKE_COMMAND, "--install", OMNIPROF_BUILD_DIR, "--prefix", prefix});
  ASSERT_EQ(install.exit_code, 0) << install.out << install.err;
  unsetenv("LD_LIBRARY_PATH");
  auto result = run_command({prefix + "/bin/omniprof", "plugins"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("loaded    native"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(prefix + "/lib/omniprof/plugins/native.so"), std::string::npos) << result.out;
  // The SDK a third party builds against is installed too.
  EXPECT_TRUE(std::filesystem::exists(prefix + "/include/omniprof/plugin.h"));
  EXPECT_TRUE(std::filesystem::exists(prefix + "/include/omniprof/bpf/abi.h"));
}

// The support library a plugin links instead of host code (ElfFile,
// ProcessMemory, ...): installed as an archive with its headers, enough to
// build a program against the installed tree alone (no host/ header needed).
TEST(InstallTest, SdkSupportLibraryBuildsAgainstTheInstalledTree) {
  std::string dir = temp_dir("sdk-support");
  std::string prefix = dir + "/usr";
  auto install = run_command({OMNIPROF_CMAKE_COMMAND, "--install", OMNIPROF_BUILD_DIR, "--prefix", prefix});
  ASSERT_EQ(install.exit_code, 0) << install.out << install.err;
  const std::string archive = prefix + "/" OMNIPROF_INSTALL_LIBDIR "/libomniprof_sdk_support.a";
  ASSERT_TRUE(std::filesystem::exists(archive)) << archive;
  ASSERT_TRUE(std::filesystem::exists(prefix + "/include/omniprof/support/elf_file.h"));

  std::string source = dir + "/consumer.cpp";
  std::ofstream(source) << R"(
#include "omniprof/support/debug_file_finder.h"
#include "omniprof/support/elf_file.h"
#include "omniprof/support/process_memory.h"
#include <unistd.h>
#include <cstdio>
int main() {
  auto elf = omniprof::ElfFile::open("/proc/self/exe");
  if (!elf) { std::fprintf(stderr, "%s\n", elf.error().message.c_str()); return 1; }
  static const char marker[] = "read through ProcessMemory";
  char copy[sizeof(marker)] = {};
  omniprof::ProcessMemory memory(getpid());
  auto read = memory.read_exact(reinterpret_cast<uint64_t>(marker), copy, sizeof(copy));
  if (!read) { std::fprintf(stderr, "%s\n", read.error().message.c_str()); return 1; }
  omniprof::DebugFileFinder finder(")" + dir + R"(");
  std::printf("%s; %zu segments; build id %s; debug file %s\n", copy, elf->load_segments().size(),
              elf->build_id().c_str(), finder.find(*elf, "/proc/self/exe") ? "found" : "none");
  return 0;
}
)";
  std::string binary = dir + "/consumer";
  auto compile = run_command({OMNIPROF_CXX_COMPILER, "-std=c++20", "-Wl,--build-id", "-I" + prefix + "/include", source,
                              archive, "-lelf", "-lz", "-lfmt", "-o", binary});
  ASSERT_EQ(compile.exit_code, 0) << compile.out << compile.err;
  auto result = run_command({binary});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("read through ProcessMemory; "), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("; 0 segments"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("build id ;"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("debug file none"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace omniprof::e2e
