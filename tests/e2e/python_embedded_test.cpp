// End-to-end: the python plugin finds CPython embedded in a C program, whether
// the program links libpython (embed_linked) or dlopen()s it after omniprof
// has described it (embed_dlopen: the host must notice the new mapping and
// ask the plugins again), on pyenv's 3.12 and on Debian's own 3.13, 3.14 and
// 3.15 (run by their own C library), and says once, by version and pid, when
// it meets a CPython it has no offsets for while the native frames still come
// through.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <thread>

#include "e2e_support.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

constexpr const char* kEvalLoop = "_PyEval_EvalFrameDefault";

#define OMNIPROF_REQUIRE_EMBED_WORKLOAD(name)                                                                \
  do {                                                                                                       \
    if (!fs::exists(workload(name))) {                                                                       \
      if (in_ci()) FAIL() << workload(name) << " not built (its CPython was missing when CMake configured)"; \
      GTEST_SKIP() << workload(name) << " not built (its CPython was missing when CMake configured)";        \
    }                                                                                                        \
  } while (0)

// A libpython the workloads embed: pyenv's 3.12, or a Debian build
// (tests/workloads/CMakeLists.txt builds embed_linked_NAME and
// embed_dlopen_NAME against each).
struct EmbeddedBuild {
  std::string name;
  std::string linked, dlopen;  // the workloads
};

std::vector<EmbeddedBuild> embedded_builds() {
  std::vector<EmbeddedBuild> builds = {{"cpython_3_12", "embed_linked", "embed_dlopen"}};
  for (const char* name : {"debian13_python3_13", "debian_python3_14", "debian_python3_15"}) {
    builds.push_back({name, std::string("embed_linked_") + name, std::string("embed_dlopen_") + name});
  }
  return builds;
}

// ctest's entry names: the build's, not the struct's bytes.
void PrintTo(const EmbeddedBuild& build, std::ostream* out) { *out << build.name; }

class PythonEmbeddedTest : public ::testing::TestWithParam<EmbeddedBuild> {};

std::string describe(const PprofTrace& trace) {
  std::string text;
  for (const auto& f : trace.frames) text += (text.empty() ? "" : " <- ") + f;
  return text;
}

// Samples whose leaf is in the eval loop or below (the loop is on the stack),
// and how many of them read embedded_hot, right below it embedded_caller,
// and further down the C program's main. The interpreter's own start-up
// (Py_Initialize importing the standard library's modules: a second of an
// emulated guest's time, in the recording when libpython is dlopen()ed
// while it runs) runs the eval loop for other Python code: not judged,
// counted apart. It is known by Py_Initialize's frame or, in a stack that
// does not reach it, importlib's own frames (an emulated guest's samples of
// a 3.12 start-up stopped at _LoaderBasics.exec_module).
struct EmbeddedCount {
  int64_t in_eval = 0;
  int64_t whole = 0;
  int64_t start_up = 0;
  std::string counterexample;
};

bool in_start_up(const std::vector<std::string>& frames) {
  return std::any_of(frames.begin(), frames.end(), [](const std::string& f) {
    return f == "Py_Initialize" || f == "Py_InitializeEx" || f == "Py_InitializeFromConfig" ||
           f == "_find_and_load" || f == "_load_unlocked" || f == "_LoaderBasics.exec_module" ||
           f == "SourceLoader.get_code";
  });
}

EmbeddedCount count_embedded(const std::vector<PprofTrace>& traces) {
  EmbeddedCount count;
  for (const auto& t : traces) {
    const auto& f = t.frames;
    auto eval = std::find(f.begin(), f.end(), kEvalLoop);
    if (eval == f.end()) continue;
    if (in_start_up(f)) {
      count.start_up += t.count;
      continue;
    }
    count.in_eval += t.count;
    auto hot = std::find(eval, f.end(), "embedded_hot");
    bool whole = hot != f.end() && hot + 1 != f.end() && hot[1] == "embedded_caller" &&
                 std::find(hot + 2, f.end(), "main") != f.end();
    if (whole) {
      count.whole += t.count;
    } else if (count.counterexample.empty()) {
      count.counterexample = describe(t);
    }
  }
  return count;
}

CommandResult record(const std::string& binary, const std::vector<std::string>& args) {
  // The embedding program's stack is judged through the interpreter's own
  // frames (its evaluation loop): every native frame kept.
  std::vector<std::string> argv = {binary, "record", "--keep-interpreter-internals"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

void expect_python_under_main(const std::string& profile, pid_t pid, const std::string& log) {
  std::string error;
  auto traces = traces_of_pid(read_traces_with_go(profile, &error), pid);
  ASSERT_FALSE(traces.empty()) << error << "\n" << log;
  auto [in_eval, whole, start_up, example] = count_embedded(traces);
  std::printf("%lld of %lld samples in the eval loop carry embedded_hot <- embedded_caller <- ... main (%lld more "
              "in the interpreter's start-up)\n",
              static_cast<long long>(whole), static_cast<long long>(in_eval), static_cast<long long>(start_up));
  // Slow guests give few samples; a handful is too few to judge.
  ASSERT_GE(in_eval, 30) << "too few samples in the eval loop to judge\n" << log;
  EXPECT_GE(whole * 100, in_eval * 90) << whole << " of " << in_eval
                                       << " samples in the eval loop carry embedded_hot <- embedded_caller <- ... "
                                          "main; one that does not: "
                                       << example;
}

// libpython linked into the program: found at the first description.
TEST_P(PythonEmbeddedTest, LinkedLibpythonGivesPythonFramesUnderTheProgramsMain) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  OMNIPROF_REQUIRE_EMBED_WORKLOAD(GetParam().linked);
  BackgroundProcess embedded({workload(GetParam().linked), "40"});
  std::string out = temp_dir("embed-linked-" + GetParam().name) + "/profile.pb.gz";
  auto result = record(OMNIPROF_BINARY, {"-d", "6", "-F", "99", "-p", std::to_string(embedded.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  expect_python_under_main(out, embedded.pid(), result.out + result.err);
}

// libpython dlopen()ed once omniprof samples: the process was
// described without it, so its Python frames appear only if the native
// walk's request for unknown pcs makes the host re-read the mappings and
// the plugin's detect_process run again.
TEST_P(PythonEmbeddedTest, LibpythonDlopenedAfterDescriptionIsFoundOnRefresh) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  OMNIPROF_REQUIRE_EMBED_WORKLOAD(GetParam().dlopen);
  std::string dir = temp_dir("embed-dlopen-" + GetParam().name);
  std::string go = dir + "/go";
  // No delay after `go`: the agent has described the process once it records.
  BackgroundProcess embedded({workload(GetParam().dlopen), "40", go, "0"});
  std::string out = dir + "/profile.pb.gz";
  // Every native frame kept, as record() above.
  BackgroundRecord recording(OMNIPROF_BINARY,
                             {"--keep-interpreter-internals", "-d", "8", "-F", "99", "-p",
                              std::to_string(embedded.pid()), "-o", out},
                             dir + "/record.log");
  ASSERT_TRUE(recording.wait_until_recording()) << recording.output();
  std::ofstream(go) << "sampling\n";
  ASSERT_EQ(recording.wait(), 0) << recording.output();
  const std::string log = recording.output();
  // Described once (no libpython yet), re-read at least once for the pcs of
  // the library mapped since.
  EXPECT_NE(log.find("host.processes_described"), std::string::npos) << log;
  EXPECT_NE(log.find("host.maps_refreshes"), std::string::npos) << log;
  expect_python_under_main(out, embedded.pid(), log);
}

// `src` with the entry of CPython `minor` ("3.12") left out of its versions.
std::string yaml_without_version(const std::string& src, const std::string& minor) {
  std::ifstream in(src);
  std::string line, text;
  bool skipping = false;
  while (std::getline(in, line)) {
    if (line.rfind("  - version:", 0) == 0) skipping = line.find("\"" + minor + "\"") != std::string::npos;
    if (!skipping) text += line + "\n";
  }
  return text;
}

// An installed-like tree (bin/omniprof, its plugins, their data) whose
// python.yaml has no 3.12: the binary finds plugins and data next to itself.
std::string tree_without_python_312(const std::string& dir) {
  const fs::path build = OMNIPROF_BUILD_DIR;
  const fs::path root = dir;
  fs::create_directories(root / "bin");
  fs::copy_file(OMNIPROF_BINARY, root / "bin/omniprof");
  fs::create_directories(root / OMNIPROF_PLUGIN_SUBDIR);
  fs::copy(build / OMNIPROF_PLUGIN_SUBDIR, root / OMNIPROF_PLUGIN_SUBDIR, fs::copy_options::recursive);
  fs::create_directories(root / OMNIPROF_DATA_SUBDIR);
  fs::copy(build / OMNIPROF_DATA_SUBDIR, root / OMNIPROF_DATA_SUBDIR, fs::copy_options::recursive);
  const fs::path yaml = root / OMNIPROF_DATA_SUBDIR / "plugins/python/python.yaml";
  std::string text = yaml_without_version(yaml.string(), "3.12");
  std::ofstream(yaml, std::ios::trunc) << text;
  return (root / "bin/omniprof").string();
}

INSTANTIATE_TEST_SUITE_P(Libpythons, PythonEmbeddedTest, ::testing::ValuesIn(embedded_builds()),
                         [](const ::testing::TestParamInfo<EmbeddedBuild>& info) { return info.param.name; });

// pyenv's 3.12 with 3.12 taken out of the plugin's offsets.
TEST(PythonEmbeddedUnsupportedTest, UnsupportedVersionIsLoggedOnceAndNativeFramesRemain) {
  OMNIPROF_REQUIRE_BPF();
  OMNIPROF_REQUIRE_GO();
  OMNIPROF_REQUIRE_EMBED_WORKLOAD("embed_linked");
  std::string dir = temp_dir("embed-unsupported");
  const std::string binary = tree_without_python_312(dir + "/prefix");
  {
    std::ifstream in(dir + "/prefix/" OMNIPROF_DATA_SUBDIR "/plugins/python/python.yaml");
    std::stringstream yaml;
    yaml << in.rdbuf();
    ASSERT_EQ(yaml.str().find("version: \"3.12\""), std::string::npos);
    ASSERT_NE(yaml.str().find("version: \"3.11\""), std::string::npos);
  }
  BackgroundProcess embedded({workload("embed_linked"), "40"});
  std::string out = dir + "/profile.pb.gz";
  auto result = record(binary, {"-d", "6", "-F", "99", "-p", std::to_string(embedded.pid()), "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string log = result.out + result.err;
  EXPECT_NE(log.find("plugin python"), std::string::npos) << "the python plugin did not load:\n" << log;

  std::vector<std::string> unsupported;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("not supported") != std::string::npos) unsupported.push_back(line);
  }
  ASSERT_EQ(unsupported.size(), 1u) << log;
  EXPECT_NE(unsupported[0].find("CPython 3.12."), std::string::npos) << unsupported[0];
  EXPECT_NE(unsupported[0].find("pid " + std::to_string(embedded.pid()) + " "), std::string::npos) << unsupported[0];

  std::string error;
  auto traces = traces_of_pid(read_traces_with_go(out, &error), embedded.pid());
  ASSERT_FALSE(traces.empty()) << error << "\n" << log;
  int64_t in_eval = 0, under_main = 0, python_frames = 0;
  for (const auto& t : traces) {
    auto eval = std::find(t.frames.begin(), t.frames.end(), kEvalLoop);
    if (eval == t.frames.end()) continue;
    in_eval += t.count;
    if (std::find(eval, t.frames.end(), "main") != t.frames.end()) under_main += t.count;
    if (std::find(t.frames.begin(), t.frames.end(), "embedded_hot") != t.frames.end()) python_frames += t.count;
  }
  ASSERT_GE(in_eval, 30) << "too few samples in the eval loop to judge\n" << log;
  EXPECT_GE(under_main * 100, in_eval * 90) << under_main << " of " << in_eval << " eval-loop samples reach main";
  EXPECT_EQ(python_frames, 0) << "Python frames without offsets for 3.12?";
}

}  // namespace
}  // namespace omniprof::e2e
