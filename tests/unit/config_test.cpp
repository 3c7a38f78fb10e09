#include "config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

namespace omniprof {
namespace {

// Parses `yaml` as the file "omniprof.yaml" with `run`'s default frequency.
Result<Config> parse(const std::string& yaml) {
  return parse_config(yaml, "omniprof.yaml", kRunDefaultFrequencyHz);
}

// The error message of parsing `yaml`, or a marker if it parsed.
std::string parse_error(const std::string& yaml) {
  Result<Config> config = parse(yaml);
  if (config) return "<parsed without error>";
  return config.error().message;
}

// A file under the test's temporary directory, removed at scope exit.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    std::string pattern = ::testing::TempDir() + "omniprof_config_XXXXXX";
    int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    ::close(fd);
    path_ = pattern;
    std::ofstream(path_) << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void expect_defaults(const Config& config, uint32_t frequency_hz) {
  EXPECT_EQ(config.frequency_hz, frequency_hz);
  EXPECT_EQ(config.round_seconds, 10u);
  EXPECT_EQ(config.output_directory, "/var/lib/omniprof/profiles");
  EXPECT_TRUE(config.plugin_directories.empty());
  EXPECT_EQ(config.runtimes,
            (std::map<std::string, bool>{{"native", true}, {"python", true}, {"ruby", true}}));
  EXPECT_TRUE(config.pids.empty());
  EXPECT_EQ(config.stack_traces_entries, 0u);  // auto: fitted_stack_traces_entries
  EXPECT_EQ(config.stack_counts_entries, 0u);  // auto: fitted_stack_counts_entries
  EXPECT_EQ(config.process_entries, 4096u);
  EXPECT_EQ(config.unwind_memory_mb, 48u);
  EXPECT_EQ(config.unwind_tables_wait_seconds, 300u);
  EXPECT_EQ(config.log_level, "info");
}

TEST(ConfigTest, DefaultsDependOnTheCommandsFrequency) {
  expect_defaults(default_config(kRunDefaultFrequencyHz), 19);
  expect_defaults(default_config(kRecordDefaultFrequencyHz), 99);
}

TEST(ConfigTest, RuntimeEnabledDefaultsToTrueForUnknownRuntimes) {
  Config config = default_config(kRunDefaultFrequencyHz);
  config.runtimes["ruby"] = false;
  EXPECT_TRUE(config.runtime_enabled("native"));
  EXPECT_FALSE(config.runtime_enabled("ruby"));
  EXPECT_TRUE(config.runtime_enabled("some_vendor_vm"));
}

TEST(ConfigTest, EmptyDocumentsAreTheDefaults) {
  for (const char* yaml : {"", "\n\n", "# nothing set\n", "---\n", "~\n"}) {
    Result<Config> config = parse_config(yaml, "omniprof.yaml", kRecordDefaultFrequencyHz);
    ASSERT_TRUE(config) << "for \"" << yaml << "\": " << config.error().message;
    expect_defaults(*config, kRecordDefaultFrequencyHz);
  }
}

TEST(ConfigTest, FullValidFile) {
  Result<Config> config = parse(R"(# every key set
sampling:
  frequency_hz: 250
round_seconds: 60
output:
  directory: /srv/profiles
plugins:
  directories: [/opt/omniprof/plugins, /usr/local/lib/omniprof]
runtimes:
  native: true
  python: false
  ruby: yes
  acme-jvm_2: off
pids:
  - 1
  - 4242
  - 2147483647
maps:
  stack_traces: 1048576
  stack_counts: 0x4000
  processes: 64
log_level: debug
)");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->frequency_hz, 250u);
  EXPECT_EQ(config->round_seconds, 60u);
  EXPECT_EQ(config->output_directory, "/srv/profiles");
  EXPECT_EQ(config->plugin_directories,
            (std::vector<std::string>{"/opt/omniprof/plugins", "/usr/local/lib/omniprof"}));
  EXPECT_EQ(config->runtimes,
            (std::map<std::string, bool>{
                {"native", true}, {"python", false}, {"ruby", true}, {"acme-jvm_2", false}}));
  EXPECT_TRUE(config->runtime_enabled("native"));
  EXPECT_FALSE(config->runtime_enabled("python"));
  EXPECT_FALSE(config->runtime_enabled("acme-jvm_2"));
  EXPECT_EQ(config->pids, (std::vector<int32_t>{1, 4242, 2147483647}));
  EXPECT_EQ(config->stack_traces_entries, 1048576u);
  EXPECT_EQ(config->stack_counts_entries, 0x4000u);
  EXPECT_EQ(config->process_entries, 64u);
  EXPECT_EQ(config->log_level, "debug");
}

TEST(ConfigTest, UnsetKeysKeepTheirDefaults) {
  Result<Config> config = parse("maps:\n  processes: 100\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->process_entries, 100u);
  EXPECT_EQ(config->stack_traces_entries, 0u);  // auto
  EXPECT_EQ(config->frequency_hz, kRunDefaultFrequencyHz);
}

TEST(ConfigTest, SectionsAndListsLeftEmptySetNothing) {
  // What remains when every entry of a section or list is commented out.
  Result<Config> config = parse(R"(sampling:
#  frequency_hz: 99
maps:
pids:
#  - 12
plugins:
  directories:
runtimes:
round_seconds: 5
)");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->frequency_hz, kRunDefaultFrequencyHz);
  EXPECT_TRUE(config->pids.empty());
  EXPECT_TRUE(config->plugin_directories.empty());
  EXPECT_EQ(config->round_seconds, 5u);
}

TEST(ConfigTest, DecimalWithLeadingZeroIsNotOctal) {
  Result<Config> config = parse("maps:\n  stack_traces: 010240\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->stack_traces_entries, 10240u);
}

TEST(ConfigTest, StackMapsAutoAreFittedToTheMachine) {
  Result<Config> config = parse("maps:\n  stack_traces: 8192\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->stack_traces_entries, 8192u);
  config = parse("maps:\n  stack_traces: auto\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->stack_traces_entries, 0u);
  // Four seconds of new 128-frame stacks (8 fragments) on every CPU, a power
  // of two in 4096..32768.
  EXPECT_EQ(fitted_stack_traces_entries(2, 19), 4096u);     // 1216
  EXPECT_EQ(fitted_stack_traces_entries(2, 99), 8192u);     // 6336
  EXPECT_EQ(fitted_stack_traces_entries(4, 99), 16384u);    // 12672
  EXPECT_EQ(fitted_stack_traces_entries(2, 999), 32768u);   // 63936
  EXPECT_EQ(fitted_stack_traces_entries(11, 99), 32768u);   // 34848
  EXPECT_EQ(fitted_stack_traces_entries(128, 99), 32768u);  // never past the former default
  EXPECT_EQ(fitted_stack_traces_entries(0, 19), 4096u);
  // stack_counts likewise: four rounds of samples on every CPU, each a new
  // key, a power of two from 1024, at most the former default.
  config = parse("maps:\n  stack_counts: auto\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->stack_counts_entries, 0u);
  config = parse("maps:\n  stack_counts: 4096\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->stack_counts_entries, 4096u);
  EXPECT_EQ(fitted_stack_counts_entries(2, 19, 10), 2048u);    // 1520
  EXPECT_EQ(fitted_stack_counts_entries(2, 99, 10), 8192u);    // 7920
  EXPECT_EQ(fitted_stack_counts_entries(1, 19, 5), 1024u);     // 380
  EXPECT_EQ(fitted_stack_counts_entries(4, 19, 10), 4096u);    // 3040
  EXPECT_EQ(fitted_stack_counts_entries(16, 19, 10), 10240u);  // 12160: never past the former default
  EXPECT_EQ(fitted_stack_counts_entries(0, 19, 0), 1024u);
  EXPECT_EQ(parse_error("maps:\n  stack_counts: lots\n"),
            "omniprof.yaml:2: maps.stack_counts: expected auto or an integer from 1024 to 1048576, got \"lots\"");
  // A value that is neither says both are accepted.
  EXPECT_EQ(parse_error("maps:\n  stack_traces: lots\n"),
            "omniprof.yaml:2: maps.stack_traces: expected auto or an integer from 1024 to 1048576, got \"lots\"");
  EXPECT_EQ(parse_error("maps:\n  stack_traces: 512\n"),
            "omniprof.yaml:2: maps.stack_traces: 512 is out of range 1024..1048576");
}

TEST(ConfigTest, UnknownTopLevelKey) {
  EXPECT_EQ(parse_error("round_seconds: 5\nsampling_hz: 99\n"),
            "omniprof.yaml:2: sampling_hz: unknown key (known: sampling, round_seconds, output, "
            "plugins, runtimes, pids, processes, maps, startup, log_level, profile, resource, export, metrics)");
}

TEST(ConfigTest, UnknownNestedKey) {
  EXPECT_EQ(parse_error("# comment\n\nlog_level: warn\nsampling:\n  frequncy_hz: 99\n"),
            "omniprof.yaml:5: sampling.frequncy_hz: unknown key (known: frequency_hz)");
  EXPECT_EQ(parse_error("maps:\n  stack_traces: 2048\n  stacks: 2048\n"),
            "omniprof.yaml:3: maps.stacks: unknown key (known: stack_traces, stack_counts, "
            "processes, unwind_memory_mb, unwind_shards, executables)");
  EXPECT_EQ(parse_error("output:\n  dir: /tmp\n"),
            "omniprof.yaml:2: output.dir: unknown key (known: directory)");
}

TEST(ConfigTest, DuplicateKey) {
  EXPECT_EQ(parse_error("sampling:\n  frequency_hz: 10\n  frequency_hz: 20\n"),
            "omniprof.yaml:3: sampling.frequency_hz: duplicate key (first set on line 2)");
  EXPECT_EQ(parse_error("log_level: info\nround_seconds: 1\nlog_level: debug\n"),
            "omniprof.yaml:3: log_level: duplicate key (first set on line 1)");
}

TEST(ConfigTest, TopLevelMustBeAMapping) {
  EXPECT_EQ(parse_error("- sampling\n- maps\n"),
            "omniprof.yaml:1: expected a mapping of settings at the top level, got a list");
  EXPECT_EQ(parse_error("just some words\n"),
            "omniprof.yaml:1: expected a mapping of settings at the top level, got \"just some "
            "words\"");
}

TEST(ConfigTest, MultipleDocumentsAreAnError) {
  EXPECT_EQ(parse_error("round_seconds: 5\n---\nlog_level: debug\n"),
            "omniprof.yaml:3: expected one YAML document, found 2");
}

TEST(ConfigTest, NonIntegers) {
  EXPECT_EQ(parse_error("log_level: info\n\n\n\n\n\nround_seconds: abc\n"),
            "omniprof.yaml:7: round_seconds: expected an integer from 1 to 3600, got \"abc\"");
  EXPECT_EQ(parse_error("sampling:\n  frequency_hz: 9.5\n"),
            "omniprof.yaml:2: sampling.frequency_hz: expected an integer from 1 to 1000, got "
            "\"9.5\"");
  EXPECT_EQ(parse_error("sampling:\n  frequency_hz: [99]\n"),
            "omniprof.yaml:2: sampling.frequency_hz: expected an integer from 1 to 1000, got a "
            "list");
  // A key with no value is blamed on the key's own line, not the next one.
  EXPECT_EQ(parse_error("round_seconds:\nlog_level: info\n"),
            "omniprof.yaml:1: round_seconds: expected an integer from 1 to 3600, got nothing");
}

TEST(ConfigTest, OutOfRange) {
  EXPECT_EQ(parse_error("sampling:\n  frequency_hz: 5000\n"),
            "omniprof.yaml:2: sampling.frequency_hz: 5000 is out of range 1..1000");
  EXPECT_EQ(parse_error("sampling:\n  frequency_hz: 0\n"),
            "omniprof.yaml:2: sampling.frequency_hz: 0 is out of range 1..1000");
  EXPECT_EQ(parse_error("round_seconds: 3601\n"),
            "omniprof.yaml:1: round_seconds: 3601 is out of range 1..3600");
  EXPECT_EQ(parse_error("maps:\n  stack_traces: 1023\n"),
            "omniprof.yaml:2: maps.stack_traces: 1023 is out of range 1024..1048576");
  EXPECT_EQ(parse_error("maps:\n  stack_counts: 1048577\n"),
            "omniprof.yaml:2: maps.stack_counts: 1048577 is out of range 1024..1048576");
  EXPECT_EQ(parse_error("maps:\n  processes: 63\n"),
            "omniprof.yaml:2: maps.processes: 63 is out of range 64..1048576");
  // Too large even for 64 bits: still "out of range", not "not an integer".
  EXPECT_EQ(parse_error("round_seconds: 99999999999999999999999\n"),
            "omniprof.yaml:1: round_seconds: 99999999999999999999999 is out of range 1..3600");
}

TEST(ConfigTest, UnwindMemoryBudget) {
  auto config = parse("maps:\n  unwind_memory_mb: 200\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->unwind_memory_mb, 200u);
  EXPECT_EQ(parse_error("maps:\n  unwind_memory_mb: 0\n"),
            "omniprof.yaml:2: maps.unwind_memory_mb: 0 is out of range 1..4096");
  // The fixed shard count it replaces says what to use instead.
  EXPECT_EQ(parse_error("maps:\n  unwind_shards: 8\n"),
            "omniprof.yaml:2: maps.unwind_shards: replaced by maps.unwind_memory_mb: unwind shards "
            "(1 MiB each) are now created as tables need them, up to that many MiB");
}

TEST(ConfigTest, UnwindTablesWait) {
  auto config = parse("startup:\n  unwind_tables_wait_seconds: 0\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->unwind_tables_wait_seconds, 0u);  // 0: record does not wait
  EXPECT_EQ(parse_error("startup:\n  unwind_tables_wait_seconds: 3601\n"),
            "omniprof.yaml:2: startup.unwind_tables_wait_seconds: 3601 is out of range 0..3600");
  EXPECT_EQ(parse_error("startup:\n  unwind_tables_wait: 10\n"),
            "omniprof.yaml:2: startup.unwind_tables_wait: unknown key (known: unwind_tables_wait_seconds)");
}

TEST(ConfigTest, DescribeThreadNice) {
  auto defaults = parse("");
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->describe_nice, -10);
  auto config = parse("processes:\n  nice: 0\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->describe_nice, 0);  // 0: the agent's own priority
  EXPECT_EQ(parse_error("processes:\n  nice: -21\n"),
            "omniprof.yaml:2: processes.nice: -21 is out of range -20..19");
  EXPECT_EQ(parse_error("processes:\n  priority: 5\n"),
            "omniprof.yaml:2: processes.priority: unknown key (known: nice)");
}

TEST(ConfigTest, NegativeNumbersDoNotWrapAround) {
  EXPECT_EQ(parse_error("sampling:\n  frequency_hz: -1\n"),
            "omniprof.yaml:2: sampling.frequency_hz: -1 is out of range 1..1000");
  EXPECT_EQ(parse_error("maps:\n  processes: -4294967232\n"),
            "omniprof.yaml:2: maps.processes: -4294967232 is out of range 64..1048576");
}

TEST(ConfigTest, Pids) {
  EXPECT_EQ(parse_error("pids: 1234\n"),
            "omniprof.yaml:1: pids: expected a list of process ids, got \"1234\"");
  EXPECT_EQ(parse_error("pids:\n  - 10\n  - 0\n"),
            "omniprof.yaml:3: pids[1]: 0 is out of range 1..2147483647");
  EXPECT_EQ(parse_error("pids: [10, -3]\n"),
            "omniprof.yaml:1: pids[1]: -3 is out of range 1..2147483647");
  EXPECT_EQ(parse_error("pids: [10, 2147483648]\n"),
            "omniprof.yaml:1: pids[1]: 2147483648 is out of range 1..2147483647");
  EXPECT_EQ(parse_error("pids:\n  - 10\n  - init\n"),
            "omniprof.yaml:3: pids[1]: expected an integer from 1 to 2147483647, got \"init\"");
  EXPECT_EQ(parse_error("pids:\n  - 10\n  - 11\n  - 10\n"),
            "omniprof.yaml:4: pids[2]: process 10 is listed twice");
  EXPECT_EQ(parse_error("pids: {a: 1}\n"),
            "omniprof.yaml:1: pids: expected a list of process ids, got a mapping");
}

TEST(ConfigTest, Runtimes) {
  EXPECT_EQ(parse_error("runtimes:\n  native: true\n  Python: false\n"),
            "omniprof.yaml:3: runtimes.Python: runtime names are lowercase letters, digits, '_' "
            "and '-'");
  EXPECT_EQ(parse_error("runtimes:\n  ruby.3: false\n"),
            "omniprof.yaml:2: runtimes.ruby.3: runtime names are lowercase letters, digits, '_' "
            "and '-'");
  EXPECT_EQ(parse_error("runtimes:\n  ruby: maybe\n"),
            "omniprof.yaml:2: runtimes.ruby: expected true or false, got \"maybe\"");
  EXPECT_EQ(parse_error("runtimes:\n  ruby: 1\n"),
            "omniprof.yaml:2: runtimes.ruby: expected true or false, got \"1\"");
  EXPECT_EQ(parse_error("runtimes:\n  ruby:\n"),
            "omniprof.yaml:2: runtimes.ruby: expected true or false, got nothing");
  EXPECT_EQ(parse_error("runtimes: [native]\n"),
            "omniprof.yaml:1: runtimes: expected a mapping, got a list");
}

TEST(ConfigTest, InterpreterInternalsFoldByDefaultOrAreKept) {
  EXPECT_TRUE(parse("")->fold_interpreter_internals);
  EXPECT_FALSE(parse("profile:\n  interpreter_internals: keep\n")->fold_interpreter_internals);
  EXPECT_TRUE(parse("profile:\n  interpreter_internals: fold\n")->fold_interpreter_internals);
  EXPECT_EQ(parse_error("profile:\n  interpreter_internals: hide\n"),
            "omniprof.yaml:2: profile.interpreter_internals: expected fold or keep, got \"hide\"");
  EXPECT_EQ(parse_error("profile:\n  native_frames: keep\n"),
            "omniprof.yaml:2: profile.native_frames: unknown key (known: interpreter_internals)");
}

// output.directory "" writes no local files (an agent that only exports).
TEST(ConfigTest, EmptyOutputDirectoryWritesNone) {
  auto config = parse_config("output:\n  directory: \"\"\n", "omniprof.yaml", kRunDefaultFrequencyHz);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->output_directory, "");
}

TEST(ConfigTest, ExportAndMetrics) {
  auto config = parse_config(
      "export:\n  queue_rounds: 3\n  retry_max_seconds: 60\n  shutdown_wait_seconds: 2\n"
      "  otlp:\n    endpoint: collector:4317\n    protocol: grpc\n    insecure: true\n"
      "    headers:\n      Authorization: Bearer abc\n      X-Scope-OrgID: team\n    timeout_seconds: 3\n"
      "  pyroscope:\n    url: http://pyroscope:4040\n    tenant_id: team\n"
      "metrics:\n  listen: 127.0.0.1:9464\n",
      "omniprof.yaml", kRunDefaultFrequencyHz);
  ASSERT_TRUE(config) << config.error().message;
  const ExportConfig& e = config->export_to;
  EXPECT_EQ(e.queue_rounds, 3u);
  EXPECT_EQ(e.retry_max_seconds, 60u);
  EXPECT_EQ(e.shutdown_wait_seconds, 2u);
  EXPECT_EQ(e.otlp.endpoint, "collector:4317");
  EXPECT_EQ(e.otlp.protocol, "grpc");
  EXPECT_TRUE(e.otlp.insecure);
  EXPECT_EQ(e.otlp.timeout_ms, 3000u);
  EXPECT_EQ(e.otlp.headers, (std::vector<std::pair<std::string, std::string>>{{"Authorization", "Bearer abc"},
                                                                               {"X-Scope-OrgID", "team"}}));
  EXPECT_EQ(e.pyroscope.url, "http://pyroscope:4040");
  EXPECT_EQ(e.pyroscope.tenant_id, "team");
  EXPECT_EQ(config->metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(parse_error("export:\n  otlp:\n    protocol: http/json\n"),
            "omniprof.yaml:3: export.otlp.protocol: expected grpc or http/protobuf, got \"http/json\"");
  EXPECT_EQ(parse_error("export:\n  queue_rounds: 0\n"), "omniprof.yaml:2: export.queue_rounds: 0 is out of range 1..1000");
  EXPECT_EQ(parse_error("export:\n  otlp:\n    insecure: maybe\n"),
            "omniprof.yaml:3: export.otlp.insecure: expected true or false, got \"maybe\"");
}

TEST(ConfigTest, WrongTypes) {
  EXPECT_EQ(parse_error("sampling: 99\n"),
            "omniprof.yaml:1: sampling: expected a mapping, got \"99\"");
  EXPECT_EQ(parse_error("output:\n  directory: [a, b]\n"),
            "omniprof.yaml:2: output.directory: expected a directory path, got a list");
  EXPECT_EQ(parse_error("plugins:\n  directories: /opt/plugins\n"),
            "omniprof.yaml:2: plugins.directories: expected a list of directory paths, got "
            "\"/opt/plugins\"");
  EXPECT_EQ(parse_error("plugins:\n  directories:\n    - /opt/a\n    - {x: 1}\n"),
            "omniprof.yaml:4: plugins.directories[1]: expected a directory path, got a mapping");
  EXPECT_EQ(parse_error("log_level: verbose\n"),
            "omniprof.yaml:1: log_level: expected one of debug, info, warn, error, got "
            "\"verbose\"");
  EXPECT_EQ(parse_error("? [a, b]\n: 1\n"),
            "omniprof.yaml:1: keys must be plain names, got a list");
}

TEST(ConfigTest, YamlSyntaxErrorGivesLineAndParserMessage) {
  EXPECT_EQ(parse_error("round_seconds: 5\npids: [1, 2\nlog_level: info\n"),
            "omniprof.yaml:3: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(parse_error("sampling:\n  frequency_hz: 1\n bad_indent: 2\n"),
            "omniprof.yaml:3: invalid YAML: end of map not found");
}

TEST(ConfigTest, LoadsAFile) {
  TempFile file("round_seconds: 30\nlog_level: warn\n");
  Result<Config> config = load_config_file(file.path(), kRecordDefaultFrequencyHz);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->round_seconds, 30u);
  EXPECT_EQ(config->log_level, "warn");
  EXPECT_EQ(config->frequency_hz, kRecordDefaultFrequencyHz);
}

TEST(ConfigTest, FileErrorsNameThePath) {
  TempFile file("\nround_seconds: 0\n");
  Result<Config> config = load_config_file(file.path(), kRunDefaultFrequencyHz);
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().message, file.path() + ":2: round_seconds: 0 is out of range 1..3600");
}

TEST(ConfigTest, EmptyFileIsTheDefaults) {
  TempFile file("");
  Result<Config> config = load_config_file(file.path(), kRunDefaultFrequencyHz);
  ASSERT_TRUE(config) << config.error().message;
  expect_defaults(*config, kRunDefaultFrequencyHz);
}

TEST(ConfigTest, MissingFile) {
  const std::string path = ::testing::TempDir() + "omniprof_no_such_dir/omniprof.yaml";
  Result<Config> config = load_config_file(path, kRunDefaultFrequencyHz);
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().message, "cannot open " + path + ": No such file or directory");
}

TEST(ConfigTest, DirectoryInsteadOfFile) {
  Result<Config> config = load_config_file(::testing::TempDir(), kRunDefaultFrequencyHz);
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().message, "cannot read " + ::testing::TempDir() + ": Is a directory");
}

}  // namespace
}  // namespace omniprof
