// `omniprof config`: the merged configuration (the main file, then its
// conf.d/ drop-ins in name order) with the file and line of each value, the
// default directory replaced by OMNIPROF_CONFIG_DIR, and the errors and
// refusals of bad or untrusted files. No BPF needed.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "e2e_support.h"

namespace omniprof::e2e {
namespace {

namespace fs = std::filesystem;

// The line of `text` that starts with `key: `, its alignment spaces squeezed.
std::string setting_line(const std::string& text, const std::string& key) {
  std::string lines = "\n" + text;
  size_t at = lines.find("\n" + key + ": ");
  if (at == std::string::npos) return "<no " + key + ">";
  std::string line = lines.substr(at + 1, lines.find('\n', at + 1) - at - 1), out;
  for (char c : line) {
    if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
  }
  return out;
}

TEST(ConfigCommandTest, PrintsTheMergedConfigWithEachValuesFileAndLine) {
  std::string dir = temp_dir("config-cmd");
  std::string main_file = dir + "/omniprof.yaml";
  std::ofstream(main_file) << "round_seconds: 30\nruntimes:\n  ruby: false\n  python: false\n";
  fs::create_directory(dir + "/conf.d");
  std::string python_on = dir + "/conf.d/50-python.yaml";
  std::ofstream(python_on) << "# from the python package\nruntimes:\n  python: true\n";
  std::string local = dir + "/conf.d/90-local.yaml";
  std::ofstream(local) << "sampling:\n  frequency_hz: 7\n";

  auto result = run_command({OMNIPROF_BINARY, "config", "--config", main_file});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(setting_line(result.out, "round_seconds"), "round_seconds: 30 # " + main_file + ":1");
  EXPECT_EQ(setting_line(result.out, "runtimes.ruby"), "runtimes.ruby: false # " + main_file + ":3");
  EXPECT_EQ(setting_line(result.out, "runtimes.python"), "runtimes.python: true # " + python_on + ":3");
  EXPECT_EQ(setting_line(result.out, "runtimes.native"), "runtimes.native: true # default");
  EXPECT_EQ(setting_line(result.out, "sampling.frequency_hz"), "sampling.frequency_hz: 7 # " + local + ":2");
  EXPECT_EQ(setting_line(result.out, "output.directory"),
            "output.directory: \"/var/lib/omniprof/profiles\" # default");
  EXPECT_NE(result.out.find("# files read: " + main_file + ", " + python_on + ", " + local + "\n"),
            std::string::npos) << result.out;

  // Without --config: OMNIPROF_CONFIG_DIR's omniprof.yaml and conf.d/.
  auto from_dir = run_command({"env", "OMNIPROF_CONFIG_DIR=" + dir, OMNIPROF_BINARY, "config"});
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.err;
  EXPECT_EQ(from_dir.out, result.out);
}

TEST(ConfigCommandTest, BadValueInADropInIsAnErrorNamingFileLineAndKey) {
  std::string dir = temp_dir("config-cmd-bad");
  fs::create_directory(dir + "/conf.d");
  std::string bad = dir + "/conf.d/20-bad.yaml";
  std::ofstream(bad) << "runtimes:\n  ruby: perhaps\n";
  auto result = run_command({"env", "OMNIPROF_CONFIG_DIR=" + dir, OMNIPROF_BINARY, "config"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "omniprof: " + bad + ":2: runtimes.ruby: expected true or false, got \"perhaps\"\n");
}

TEST(ConfigCommandTest, WorldWritableDropInIsRefusedWithOneLineAndTheRestApplies) {
  std::string dir = temp_dir("config-cmd-untrusted");
  fs::create_directory(dir + "/conf.d");
  std::string writable = dir + "/conf.d/10-anyone.yaml";
  std::ofstream(writable) << "round_seconds: 1\n";
  ::chmod(writable.c_str(), 0666);
  std::string good = dir + "/conf.d/20-good.yaml";
  std::ofstream(good) << "log_level: debug\n";
  auto result = run_command({"env", "OMNIPROF_CONFIG_DIR=" + dir, OMNIPROF_BINARY, "config"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(setting_line(result.out, "round_seconds"), "round_seconds: 10 # default");
  EXPECT_EQ(setting_line(result.out, "log_level"), "log_level: debug # " + good + ":1");
  std::string why = "file is world-writable (mode 0666)";
  EXPECT_NE(result.err.find("config drop-in " + writable + " refused: " + why + "\n"), std::string::npos)
      << result.err;
  EXPECT_NE(result.out.find("# refused: " + writable + ": " + why), std::string::npos) << result.out;
}

TEST(ConfigCommandTest, UntrustedMainFileStopsTheAgent) {
  std::string dir = temp_dir("config-cmd-main");
  std::string main_file = dir + "/omniprof.yaml";
  std::ofstream(main_file) << "round_seconds: 5\n";
  ::chmod(main_file.c_str(), 0664);
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another group";
  ASSERT_EQ(::chown(main_file.c_str(), 0, 65534), 0);
  auto result = run_command({OMNIPROF_BINARY, "config", "--config", main_file});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err,
            "omniprof: config " + main_file + " refused: file is group-writable by gid 65534 (mode 0664)\n");
}

}  // namespace
}  // namespace omniprof::e2e
