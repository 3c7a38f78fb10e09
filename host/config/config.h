// The agent's configuration: what the YAML file (default
// /etc/omniprof/omniprof.yaml) may set, its defaults, and how it is validated.
//
// Every key is optional; a key that is present replaces the default (lists
// are replaced, not appended to). Loading is strict: an unknown key, a wrong
// type or an out-of-range value is an error naming the file, line and key
// path, because a silently ignored typo in a profiler config shows up much
// later as "why is it sampling at the wrong rate".
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "omniprof/support/result.h"
#include "omniprof/bpf/abi.h"
#include "process/process_identity.h"

namespace omniprof {

// The sampling frequency differs per command: `run` is always on, so it
// samples lightly; `record` is a short interactive session and wants detail.
inline constexpr uint32_t kRunDefaultFrequencyHz = 19;
inline constexpr uint32_t kRecordDefaultFrequencyHz = 99;

// export.otlp: where OTLP profiles go. The OTEL_EXPORTER_OTLP_* variables
// fill what the files leave unset (config_sources.h), as an OpenTelemetry
// SDK's explicit configuration wins over its environment.
struct OtlpSettings {
  // "" = no OTLP export. http/protobuf: a base URL (http://host:4318), to
  // which /v1development/profiles is appended unless endpoint_is_full_url
  // (OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT is used as given); grpc: host:port,
  // or http://host:port (plaintext) / https://host:port (TLS).
  std::string endpoint;
  bool endpoint_is_full_url = false;
  std::string protocol = "http/protobuf";  // or "grpc"; the OTLP default
  std::vector<std::pair<std::string, std::string>> headers;
  bool insecure = false;    // grpc without a scheme: plaintext instead of TLS
  std::string certificate;  // PEM file of the CAs to trust ("" = the system's)
  uint32_t timeout_ms = 10000;
};

// export.pyroscope: Pyroscope's own ingest API (for servers without OTLP).
struct PyroscopeSettings {
  std::string url;  // "" = none; http://host:4040
  std::string basic_auth_user;
  std::string basic_auth_password;
  std::string tenant_id;  // X-Scope-OrgID, for a multi-tenant server
};

struct ExportConfig {
  OtlpSettings otlp;
  PyroscopeSettings pyroscope;
  uint32_t queue_rounds = 10;          // export.queue_rounds: rounds kept while a backend is down
  uint32_t retry_max_seconds = 300;    // export.retry_max_seconds: a round is given up after this
  uint32_t shutdown_wait_seconds = 5;  // export.shutdown_wait_seconds: what a stop waits to send
};

// A busy machine's new process runs its first milliseconds before a thread
// of nice 0 that wakes for it gets a CPU: walked meanwhile without its
// mappings (bench/process_churn: 94.5% of walks whole at 0, 96.6% at -10).
constexpr int32_t kDefaultDescribeNice = -10;

struct Config {
  uint32_t frequency_hz = kRunDefaultFrequencyHz;               // sampling.frequency_hz, 1..1000
  uint32_t round_seconds = 10;                                  // round_seconds, 1..3600
  std::string output_directory = "/var/lib/omniprof/profiles";  // output.directory
  // plugins.directories: searched after the built-in plugin directory.
  std::vector<std::string> plugin_directories;
  // runtimes.<name>: a plugin whose `runtime` maps to false is disabled.
  std::map<std::string, bool> runtimes = {{"native", true}, {"python", true}, {"ruby", true}};
  std::vector<int32_t> pids;              // empty = the whole machine
  // processes.nice, -20..19: the nice value of the agent's thread that
  // describes processes as the kernel starts them (common/thread_priority.h).
  int32_t describe_nice = kDefaultDescribeNice;
  // maps.stack_traces: fragments of 16 frames; 0 ("auto", the default):
  // fitted_stack_traces_entries of the machine's CPUs and the frequency.
  uint32_t stack_traces_entries = 0;
  // maps.stack_counts: count keys; 0 ("auto", the default):
  // fitted_stack_counts_entries of the machine's CPUs, the frequency and
  // the round.
  uint32_t stack_counts_entries = 0;
  uint32_t process_entries = 4096;        // maps.processes
  // maps.unwind_memory_mb: unwind rows grow on demand, 1 MiB shard by shard,
  // up to this. (maps.unwind_shards, the fixed preallocated count it
  // replaces, is an error saying so.)
  uint32_t unwind_memory_mb = OMNIPROF_DEFAULT_UNWIND_MEMORY_MB;
  uint32_t executable_entries = 2048;     // maps.executables: executables with unwind tables
  std::string log_level = "info";         // debug, info, warn or error
  // startup.unwind_tables_wait_seconds, 0..3600: how long `record` waits for
  // the unwind tables of the processes found at start before its clock
  // starts anyway (cli/unwind_table_wait.h). Generous: a cold page cache, or
  // a QEMU guest without KVM, takes seconds per large library.
  uint32_t unwind_tables_wait_seconds = 300;
  // profile.interpreter_internals: "fold" (native frames of the interpreter's
  // own code fold into the Python/Ruby frames they run: their samples are
  // that function's self time) or "keep" (every native frame, for people
  // working on the interpreter itself). agent/stack_folding.h.
  bool fold_interpreter_internals = true;
  // resource: who each process is, on its samples (process/process_identity.h):
  // resource.service_name (the default service.name), resource.attributes
  // (added to every process's), resource.service_names (rules, first match
  // wins). OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES fill what the files
  // leave unset (config_sources.h).
  ResourceSettings resource;
  // export: where profiles go beyond output.directory (export/exporter.h).
  ExportConfig export_to;
  // metrics.listen: HOST:PORT of the /metrics page (`omniprof run`), "" = off.
  std::string metrics_listen;

  // True unless the config disables `runtime`: a third-party plugin's runtime
  // that the config does not mention is enabled.
  bool runtime_enabled(const std::string& runtime) const;
};

// stack_traces' size when the config leaves it to the machine: four seconds
// of samples on every CPU at `frequency_hz`, each storing 8 new fragments
// (a 128-frame stack not seen before), rounded up to a power of two, at
// least 4096 and at most OMNIPROF_DEFAULT_STACK_TRACES (the size it had for
// every machine before). Four: a stack stays until two drains in a row
// found no count of it, so with a drain every second (record; run at the
// worst, agent/drain_schedule.h) a second's stacks are held up to three. A
// 2-CPU machine takes 4096 at 19 Hz (1.4 MB of kernel memory instead of
// 11) and 8192 at 99 Hz; at 99 Hz, 11 CPUs or more take the maximum.
uint32_t fitted_stack_traces_entries(uint32_t cpus, uint32_t frequency_hz);

// stack_counts' size when the config leaves it to the machine: four rounds
// of samples on every CPU at `frequency_hz`, each a key of its own (an
// interpreter's stacks make nearly every sample one: 290 keys of a round's
// 380 samples in issue 19's scene), rounded up to a power of two, at least
// 1024 and at most OMNIPROF_DEFAULT_STACK_COUNTS (the size it had for every
// machine before). Four: a drain is due once a quarter of the map fills
// (agent/drain_schedule.h), so a round drains once, at its end, as it did
// with the former size. A 2-CPU machine takes 2048 at 19 Hz (10 s rounds),
// 8192 at 99 Hz; 16 CPUs or more at 19 Hz the maximum.
uint32_t fitted_stack_counts_entries(uint32_t cpus, uint32_t frequency_hz, uint32_t round_seconds);

// The defaults, with the sampling frequency of the command being run
// (kRunDefaultFrequencyHz or kRecordDefaultFrequencyHz).
Config default_config(uint32_t default_frequency_hz);

// Where a setting's value came from: the file and its 1-based line.
struct ValueOrigin {
  std::string file;
  int line = 0;
};
// By key path ("sampling.frequency_hz", "runtimes.ruby"): the document that
// set it last. A key no document set has no entry (it has its default).
using ValueOrigins = std::map<std::string, ValueOrigin>;

// Applies one YAML document over `config`: only the keys it names change
// (a list is replaced whole; `runtimes` is merged name by name), which is how
// conf.d drop-ins go over the main file. On error `config` is left as it
// was. With `origins`, each key set is recorded there under `source_name`.
Result<void> apply_config_document(const std::string& yaml_text, const std::string& source_name,
                                   Config& config, ValueOrigins* origins = nullptr);

// Reads a file's contents; the error names the path.
Result<std::string> read_config_text(const std::string& path);

// Reads and parses `path` alone (no drop-ins, no trust check: the agent
// reads its files through load_config_sources, config/config_sources.h);
// errors are prefixed with `path`.
Result<Config> load_config_file(const std::string& path, uint32_t default_frequency_hz);

// Parses one YAML document over the defaults. `source_name` prefixes errors
// ("omniprof.yaml:4: sampling.frequncy_hz: unknown key ..."). An empty
// document (or one holding only comments) yields the defaults.
Result<Config> parse_config(const std::string& yaml_text, const std::string& source_name,
                            uint32_t default_frequency_hz);

}  // namespace omniprof
