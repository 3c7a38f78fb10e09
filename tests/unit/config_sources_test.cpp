// The agent's configuration as files: the main file and its conf.d/
// drop-ins merged in name order, where each value came from, and the files
// refused because someone other than root could have written them.
#include "config/config_sources.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <optional>
#include <utility>
#include <vector>

#include "temp_tree.h"

namespace omniprof {
namespace {

using testing_support::TempTree;

Result<LoadedConfig> load(const std::string& main_file) {
  return load_config_sources(config_sources(main_file), kRunDefaultFrequencyHz);
}

TEST(ConfigSourcesTest, ConfigFlagReadsTheFileAndTheConfDBesideIt) {
  ConfigSources sources = config_sources("/srv/agent/omniprof.yaml");
  EXPECT_EQ(sources.main_file, "/srv/agent/omniprof.yaml");
  EXPECT_TRUE(sources.main_file_required);
  EXPECT_EQ(sources.drop_in_directory, "/srv/agent/conf.d");
}

TEST(ConfigSourcesTest, WithoutTheFlagEtcOmniprofOrTheVariablesDirectory) {
  ::unsetenv(kConfigDirectoryVariable);
  ConfigSources sources = config_sources("");
  EXPECT_EQ(sources.main_file, "/etc/omniprof/omniprof.yaml");
  EXPECT_FALSE(sources.main_file_required);
  EXPECT_EQ(sources.drop_in_directory, "/etc/omniprof/conf.d");
  ::setenv(kConfigDirectoryVariable, "/opt/test-etc", 1);
  sources = config_sources("");
  ::unsetenv(kConfigDirectoryVariable);
  EXPECT_EQ(sources.main_file, "/opt/test-etc/omniprof.yaml");
  EXPECT_EQ(sources.drop_in_directory, "/opt/test-etc/conf.d");
}

TEST(ConfigSourcesTest, DropInsApplyInNameOrderOverTheMainFileKeyByKey) {
  TempTree tree("config");
  std::string main_file = tree.file("omniprof.yaml",
                                    "sampling:\n  frequency_hz: 50\nround_seconds: 5\n"
                                    "runtimes:\n  ruby: false\npids: [1, 2]\n");
  // Written out of order: the name decides, not the creation time.
  std::string b = tree.file("conf.d/20-b.yaml", "runtimes:\n  ruby: true\npids: [3]\n");
  std::string a = tree.file("conf.d/10-a.yaml", "# python off\nruntimes:\n  python: false\nsampling:\n  frequency_hz: 60\n");
  tree.file("conf.d/10-a.yaml.dpkg-old", "this: is not read\n");
  tree.dir("conf.d/30-dir.yaml");

  auto loaded = load(main_file);
  ASSERT_TRUE(loaded) << loaded.error().message;
  const Config& c = loaded->config;
  EXPECT_EQ(c.frequency_hz, 60u);
  EXPECT_EQ(c.round_seconds, 5u);
  EXPECT_EQ(c.runtimes, (std::map<std::string, bool>{{"native", true}, {"python", false}, {"ruby", true}}));
  EXPECT_EQ(c.pids, (std::vector<int32_t>{3}));
  EXPECT_EQ(loaded->files_read, (std::vector<std::string>{main_file, a, b}));

  auto origin = [&](const std::string& key) {
    auto it = loaded->origins.find(key);
    return it == loaded->origins.end() ? std::string("default")
                                       : it->second.file + ":" + std::to_string(it->second.line);
  };
  EXPECT_EQ(origin("sampling.frequency_hz"), a + ":5");
  EXPECT_EQ(origin("round_seconds"), main_file + ":3");
  EXPECT_EQ(origin("runtimes.ruby"), b + ":2");
  EXPECT_EQ(origin("runtimes.python"), a + ":3");
  EXPECT_EQ(origin("runtimes.native"), "default");
  EXPECT_EQ(origin("pids"), b + ":3");
  EXPECT_EQ(origin("log_level"), "default");
}

TEST(ConfigSourcesTest, DescribeConfigGivesEveryValueAndWhereItCameFrom) {
  TempTree tree("config");
  std::string main_file = tree.file("omniprof.yaml", "log_level: warn\n");
  std::string drop_in = tree.file("conf.d/10-ruby.yaml", "runtimes:\n  ruby: false\n");
  auto loaded = load(main_file);
  ASSERT_TRUE(loaded) << loaded.error().message;
  std::string text = describe_config(*loaded);
  EXPECT_NE(text.find("sampling.frequency_hz: 19"), std::string::npos) << text;
  auto line_of = [&](const std::string& start) {
    size_t at = text.find("\n" + start);
    if (at == std::string::npos) return std::string("<missing>");
    return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  auto squeezed = [](std::string line) {  // the alignment spaces aside
    std::string out;
    for (char ch : line) {
      if (!(ch == ' ' && !out.empty() && out.back() == ' ')) out += ch;
    }
    return out;
  };
  EXPECT_EQ(squeezed(line_of("runtimes.ruby")), "runtimes.ruby: false # " + drop_in + ":2");
  EXPECT_EQ(squeezed(line_of("runtimes.native")), "runtimes.native: true # default");
  // Left to the machine, shown as the value that says so.
  EXPECT_EQ(squeezed(line_of("maps.stack_traces")), "maps.stack_traces: auto # default");
  EXPECT_EQ(squeezed(line_of("log_level")), "log_level: warn # " + main_file + ":1");
  EXPECT_EQ(squeezed(line_of("round_seconds")), "round_seconds: 10 # default");
  EXPECT_EQ(squeezed(line_of("startup.unwind_tables_wait_seconds")),
            "startup.unwind_tables_wait_seconds: 300 # default");
  EXPECT_EQ(squeezed(line_of("plugins.directories")), "plugins.directories: [] # default");
  EXPECT_EQ(squeezed(line_of("processes.nice")), "processes.nice: -10 # default");
  EXPECT_NE(text.find("# files read: " + main_file + ", " + drop_in + "\n"), std::string::npos) << text;
}

TEST(ConfigSourcesTest, BadYamlInADropInNamesTheFileAndLine) {
  TempTree tree("config");
  std::string main_file = tree.file("omniprof.yaml", "round_seconds: 5\n");
  std::string bad = tree.file("conf.d/20-bad.yaml", "runtimes:\n  ruby: [false\n");
  auto loaded = load(main_file);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().message.rfind(bad + ":", 0), 0u) << loaded.error().message;
}

TEST(ConfigSourcesTest, BadValueInADropInNamesTheFileLineAndKey) {
  TempTree tree("config");
  std::string main_file = tree.file("omniprof.yaml", "round_seconds: 5\n");
  tree.file("conf.d/10-good.yaml", "log_level: debug\n");
  std::string bad = tree.file("conf.d/20-bad.yaml", "# too fast\nsampling:\n  frequency_hz: 5000\n");
  auto loaded = load(main_file);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().message, bad + ":3: sampling.frequency_hz: 5000 is out of range 1..1000");
}

TEST(ConfigSourcesTest, UntrustedDropInIsSkippedAndTheOthersApply) {
  TempTree tree("config");
  std::string main_file = tree.file("omniprof.yaml", "round_seconds: 5\n");
  std::string writable = tree.file("conf.d/10-writable.yaml", "round_seconds: 7\n", 0666);
  std::string good = tree.file("conf.d/20-good.yaml", "log_level: debug\n");
  auto loaded = load(main_file);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.round_seconds, 5u);
  EXPECT_EQ(loaded->config.log_level, "debug");
  EXPECT_EQ(loaded->files_read, (std::vector<std::string>{main_file, good}));
  EXPECT_EQ(loaded->refused,
            (std::vector<std::string>{writable + ": file is world-writable (mode 0666)"}));
  EXPECT_NE(describe_config(*loaded).find("# refused: " + writable), std::string::npos);
}

TEST(ConfigSourcesTest, DropInOwnedByAnotherUserIsSkipped) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  TempTree tree("config");
  std::string main_file = tree.file("omniprof.yaml", "");
  std::string theirs = tree.file("conf.d/10-theirs.yaml", "round_seconds: 7\n");
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  auto loaded = load(main_file);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.round_seconds, 10u);
  ASSERT_EQ(loaded->refused.size(), 1u);
  EXPECT_NE(loaded->refused[0].find("owned by uid 65534"), std::string::npos) << loaded->refused[0];
}

TEST(ConfigSourcesTest, UntrustedMainFileIsAnError) {
  TempTree tree("config");
  tree.dir("etc", 0777);
  std::string main_file = tree.file("etc/omniprof.yaml", "round_seconds: 5\n");
  auto loaded = load(main_file);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().message, "config " + main_file + " refused: " + tree.path("etc") +
                                        ": directory is world-writable (mode 0777)");
}

TEST(ConfigSourcesTest, NothingThereIsTheDefaults) {
  TempTree tree("config");
  ::setenv(kConfigDirectoryVariable, tree.path("etc").c_str(), 1);
  auto loaded = load_config_sources(config_sources(""), kRecordDefaultFrequencyHz);
  ::unsetenv(kConfigDirectoryVariable);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.frequency_hz, kRecordDefaultFrequencyHz);
  EXPECT_TRUE(loaded->files_read.empty());
  EXPECT_NE(describe_config(*loaded).find("# files read: none (all defaults)"), std::string::npos);
}

TEST(ConfigSourcesTest, DropInsAloneWithoutAMainFile) {
  TempTree tree("config");
  std::string drop_in = tree.file("etc/conf.d/50-ruby.yaml", "runtimes:\n  ruby: false\n");
  ::setenv(kConfigDirectoryVariable, tree.path("etc").c_str(), 1);
  auto loaded = load_config_sources(config_sources(""), kRunDefaultFrequencyHz);
  ::unsetenv(kConfigDirectoryVariable);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_FALSE(loaded->config.runtime_enabled("ruby"));
  EXPECT_EQ(loaded->files_read, (std::vector<std::string>{drop_in}));
}

TEST(ConfigSourcesTest, MissingConfigFlagFileIsAnError) {
  TempTree tree("config");
  auto loaded = load(tree.path("absent.yaml"));
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().message, "cannot open " + tree.path("absent.yaml") + ": No such file or directory");
}

}  // namespace
}  // namespace omniprof

namespace omniprof {
namespace {

// Sets the variables for one test and restores what was there.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(std::vector<std::pair<std::string, std::string>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        ::setenv(name.c_str(), old->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(ConfigSourcesTest, OtlpVariablesFillWhatTheFilesLeaveUnset) {
  TempTree tree("config");
  std::string main_file = tree.file("etc/omniprof.yaml", "export:\n  otlp:\n    protocol: grpc\n");
  ScopedEnvironment environment({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"},
                                 {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"},
                                 {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b%3Dc, x-tenant = team"},
                                 {"OTEL_EXPORTER_OTLP_PROFILES_INSECURE", "TRUE"},
                                 {"OTEL_EXPORTER_OTLP_INSECURE", "false"},
                                 {"OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ssl/ca.pem"},
                                 {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"}});
  auto loaded = load(main_file);
  ASSERT_TRUE(loaded) << loaded.error().message;
  const OtlpSettings& otlp = loaded->config.export_to.otlp;
  EXPECT_EQ(otlp.endpoint, "http://base:4318");
  EXPECT_FALSE(otlp.endpoint_is_full_url);
  EXPECT_EQ(otlp.protocol, "grpc");  // the file wins
  EXPECT_EQ(otlp.headers, (std::vector<std::pair<std::string, std::string>>{{"api-key", "a b=c"}, {"x-tenant", "team"}}));
  EXPECT_TRUE(otlp.insecure);  // the PROFILES_ variable wins over the general one
  EXPECT_EQ(otlp.certificate, "/etc/ssl/ca.pem");
  EXPECT_EQ(otlp.timeout_ms, 2500u);
  const std::string described = describe_config(*loaded);
  EXPECT_NE(described.find("export.otlp.protocol: grpc"), std::string::npos) << described;
  EXPECT_NE(described.find("# environment OTEL_EXPORTER_OTLP_ENDPOINT"), std::string::npos) << described;
  EXPECT_NE(described.find("# environment OTEL_EXPORTER_OTLP_PROFILES_INSECURE"), std::string::npos) << described;
  // Header values are not printed (they are often credentials).
  EXPECT_EQ(described.find("a b=c"), std::string::npos) << described;

  ScopedEnvironment full(std::vector<std::pair<std::string, std::string>>{
      {"OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "http://full:4318/custom/path"}});
  loaded = load(main_file);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.export_to.otlp.endpoint, "http://full:4318/custom/path");
  EXPECT_TRUE(loaded->config.export_to.otlp.endpoint_is_full_url);
}

TEST(ConfigSourcesTest, MalformedOtlpVariablesAreIgnored) {
  TempTree tree("config");
  std::string main_file = tree.file("etc/omniprof.yaml", "round_seconds: 5\n");
  ScopedEnvironment environment({{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                                 {"OTEL_EXPORTER_OTLP_HEADERS", "novalue"},
                                 {"OTEL_EXPORTER_OTLP_TIMEOUT", "soon"}});
  auto loaded = load(main_file);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->config.export_to.otlp.protocol, "http/protobuf");
  EXPECT_TRUE(loaded->config.export_to.otlp.headers.empty());
  EXPECT_EQ(loaded->config.export_to.otlp.timeout_ms, 10000u);
}

}  // namespace
}  // namespace omniprof
