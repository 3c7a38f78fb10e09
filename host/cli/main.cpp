// omniprof command line: record, run, plugins, config, debug, flamegraph. Fatal errors are exceptions
// caught here; everything recoverable comes back as a Result.
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "agent/agent.h"
#include "export/destinations.h"
#include "metrics/metrics_page.h"
#include "cli/unwind_table_wait.h"
#include "bpf/bpf_maps.h"
#include "bpf/bpf_support.h"
#include "config/config.h"
#include "config/config_sources.h"
#include "log/logger.h"
#include "plugins/plugin_abi.h"
#include "plugins/plugin_host.h"
#include "profile/flamegraph.h"
#include "profile/pprof_reader.h"
#include "profile/round_output.h"
#include "symbolize/elf_symbolizer.h"

namespace fs = std::filesystem;
using namespace omniprof;

namespace {

std::atomic<bool> g_stop{false};
// Written by the signal handler, whichever thread it runs on, so the main
// thread's sleep ends at once instead of polling g_stop (each poll a
// wake-up of an otherwise idle agent).
int g_stop_fd = -1;

void on_signal(int) {
  g_stop = true;
  if (g_stop_fd >= 0) {
    const int saved = errno;
    uint64_t one = 1;
    (void)!write(g_stop_fd, &one, sizeof(one));
    errno = saved;
  }
}

void install_signal_handlers() {
  if (g_stop_fd < 0) g_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// From the second round of `run` on. Each round allocates and frees a few
// large buffers (a drain's batch of stack fragments, the profile being
// built, its gzip). By default glibc raises its threshold for giving a
// buffer its own mapping to the size of each such buffer freed (up to
// 32 MiB), and its threshold for giving back the heap's free top with it:
// these buffers then come from the heap and their pages stay resident.
// Fixed thresholds map and unmap buffers of 256 KiB or more and give back a
// free top past 1 MiB: ~6 MB less RSS on an interpreter-heavy machine at the
// same steady CPU (bench/agent_overhead interp), where malloc_trim after
// each round saved as much but cost a fifth of the agent's CPU in page
// faults. Not from the start: the start-up's table builds grow vectors of
// megabytes, and mapping each growth cost 0.3 s more CPU there.
void keep_less_free_memory() {
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
  malloc_trim(0);  // once: what the start-up left free
}

// Sleeps up to `ms`, waking early on SIGINT/SIGTERM.
void interruptible_sleep(int64_t ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!g_stop) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) return;
    if (g_stop_fd < 0) {  // no eventfd: poll the flag
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(left, 50)));
      continue;
    }
    pollfd wake{g_stop_fd, POLLIN, 0};
    (void)poll(&wake, 1, static_cast<int>(left));
  }
}

[[noreturn]] void fail(const std::string& message, int code = 1) {
  std::cerr << "omniprof: " << message << "\n";
  std::exit(code);
}

// The main file and its conf.d/ drop-ins (config/config_sources.h).
LoadedConfig load_merged_config(const std::string& path, uint32_t default_hz) {
  auto loaded = load_config_sources(config_sources(path), default_hz);
  if (!loaded) fail(loaded.error().message);
  return std::move(*loaded);
}

Config load_config(const std::string& path, uint32_t default_hz) {
  return load_merged_config(path, default_hz).config;
}

int cmd_config(const std::string& config_path) {
  // As `run` sees it (record's default frequency is 99 Hz, not 19).
  std::cout << describe_config(load_merged_config(config_path, kRunDefaultFrequencyHz));
  return 0;
}

void print_top(const ProfileBuilder& profile, size_t n, bool folded) {
  int64_t total = profile.total_samples();
  std::cout << fmt::format("{} samples, top {} functions by self time (interpreter internals {}):\n", total, n,
                           folded ? "folded into Python/Ruby frames" : "kept");
  std::cout << fmt::format("{:>8} {:>6} {:>8} {:>6}  {:<7} {}\n", "flat", "flat%", "cum", "cum%", "kind", "function");
  for (const auto& f : profile.top_functions(n)) {
    double flat_pct = total ? 100.0 * f.flat / total : 0;
    double cum_pct = total ? 100.0 * f.cumulative / total : 0;
    std::cout << fmt::format("{:>8} {:>5.1f}% {:>8} {:>5.1f}%  {:<7} {}\n", f.flat, flat_pct, f.cumulative,
                             cum_pct, f.type, f.function);
  }
}

void print_stats(const Agent& agent, std::ostream& out) {
  out << "counters:\n";
  for (const auto& line : agent.stats()) out << fmt::format("  {:<40} {}\n", line.name, line.value);
}

// `omniprof flamegraph PROFILE -o FILE.html`: the page of a saved profile
// (host/profile/flamegraph.h).
int cmd_flamegraph(const std::string& profile_path, const std::string& output) {
  auto profile = read_pprof_file(profile_path);
  if (!profile) fail(profile.error().message);
  if (auto r = write_flamegraph_page(*profile, fs::path(profile_path).filename().string(), output); !r) {
    fail(r.error().message);
  }
  std::cout << fmt::format("wrote {}\n", output);
  return 0;
}

// What `record` writes besides its profile.
struct RecordViews {
  bool keep_interpreter_internals = false;  // --keep-interpreter-internals
  std::string other_view_output;            // --other-view-output FILE
  std::string flamegraph;                   // --flamegraph FILE.html
};

int cmd_record(const std::string& config_path, uint32_t hz, const std::vector<int32_t>& pids,
               uint32_t seconds, const std::string& output, size_t top, bool bpf_stats, const RecordViews& views) {
  Config config = load_config(config_path, kRecordDefaultFrequencyHz);
  if (hz) config.frequency_hz = hz;
  if (views.keep_interpreter_internals) config.fold_interpreter_internals = false;
  if (!pids.empty()) config.pids = pids;
  for (int32_t pid : config.pids) {
    if (kill(pid, 0) != 0 && errno == ESRCH) fail(fmt::format("-p {}: no such process", pid));
  }
  // Before any BPF is loaded: a profile that could not be written at the end
  // would waste the whole recording.
  if (auto r = check_profile_writable(output); !r) fail(r.error().message, 2);
  if (!views.other_view_output.empty()) {
    if (auto r = check_profile_writable(views.other_view_output); !r) fail(r.error().message, 2);
  }
  if (!views.flamegraph.empty()) {
    if (auto r = check_profile_writable(views.flamegraph); !r) fail("--flamegraph: " + r.error().message, 2);
  }
  set_log_level(config.log_level);
  // Before any BPF is loaded: an endpoint that cannot be used is said now.
  auto exporters = make_exporters(config);
  if (!exporters) fail(exporters.error().message, 2);
  Agent agent(config, bpf_stats);
  if (auto r = agent.start(); !r) fail(r.error().message, 2);
  install_signal_handlers();

  bool tty = isatty(STDERR_FILENO);
  // The clock starts once the tables of the processes found at start are
  // stored; what was sampled before is dropped (cli/unwind_table_wait.h).
  wait_for_unwind_tables(agent, std::chrono::seconds(config.unwind_tables_wait_seconds), tty, g_stop);
  agent.discard_round();
  auto start = std::chrono::steady_clock::now();
  for (uint32_t s = 1; s <= seconds && !g_stop; ++s) {
    interruptible_sleep(1000);
    (void)agent.collect();
    auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string progress = fmt::format("recording: {:.0f}/{} s, {} samples", elapsed, seconds,
                                       agent.samples_in_round());
    if (tty) {
      std::cerr << "\r" << progress << std::flush;
    } else if (s % 5 == 0 || s == seconds) {
      std::cerr << progress << "\n";
    }
  }
  if (tty) std::cerr << "\n";
  // Stop sampling first so that every sample counted lands in the profile.
  agent.stop_sampling();
  log().info("sampling stopped after {:.1f} s; naming the frames of {} samples",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
             agent.samples_in_round());
  std::vector<bool> fold{config.fold_interpreter_internals};
  if (!views.other_view_output.empty()) fold.push_back(!config.fold_interpreter_internals);
  std::vector<ProfileBuilder> profiles = agent.finish_round(fold);
  const ProfileBuilder& profile = profiles.front();
  agent.stop();
  if (auto r = profile.write_gzip(output); !r) fail(r.error().message, 1);
  std::cout << fmt::format("wrote {} ({} samples)\n", output, profile.total_samples());
  // The page of the very profile just written (not read back: the same
  // message ProfileBuilder serialized).
  if (!views.flamegraph.empty()) {
    if (auto r = write_flamegraph_page(profile.build(), fs::path(output).filename().string(), views.flamegraph); !r) {
      fail(r.error().message, 1);
    }
    std::cout << fmt::format("wrote {}\n", views.flamegraph);
  }
  if (profiles.size() > 1) {
    if (auto r = profiles[1].write_gzip(views.other_view_output); !r) fail(r.error().message, 1);
    std::cout << fmt::format("wrote {} ({} samples)\n", views.other_view_output, profiles[1].total_samples());
  }
  // Exported after the file is written: a backend that is down costs the
  // shutdown wait, never the local profile.
  for (ConfiguredExporter& exporter : *exporters) exporter.exporter->submit(profile);
  for (ConfiguredExporter& exporter : *exporters) {
    exporter.exporter->shutdown(std::chrono::seconds(config.export_to.shutdown_wait_seconds));
    ExporterStats es = exporter.exporter->stats();
    if (es.rounds_sent > 0) {
      std::cout << fmt::format("exported to {} ({} bytes)\n", exporter.exporter->name(), es.bytes_sent);
    } else if (profile.total_samples() > 0) {
      std::cout << fmt::format("not exported to {}: see the log above\n", exporter.exporter->name());
    }
  }
  print_top(profile, top, fold.front());
  print_stats(agent, std::cout);
  for (ConfiguredExporter& exporter : *exporters) {
    for (const auto& [name, value] : exporter_stat_lines(exporter.stats_prefix, exporter.exporter->stats())) {
      if (value) std::cout << fmt::format("  {:<40} {}\n", name, value);
    }
  }
  return 0;
}

// An agent or exporter figure as a metric: a gauge if it says how much there
// is now (a queue's depth, a map's bytes), else a counter.
Metric stat_metric(const std::string& name, uint64_t value) {
  const bool gauge = name.ends_with("queue_depth") || name.ends_with("_bytes") || name == "host.round_samples";
  return Metric{prometheus_name(name), "omniprof " + name + (gauge ? " (now)" : " (since start)"),
                gauge ? Metric::Kind::kGauge : Metric::Kind::kCounter, static_cast<double>(value), {}};
}

std::string round_file_name() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm utc{};
  gmtime_r(&ts.tv_sec, &utc);
  char buffer[64];
  strftime(buffer, sizeof(buffer), "%Y%m%dT%H%M%S", &utc);
  return fmt::format("profile-{}.{:03d}Z.pb.gz", buffer, ts.tv_nsec / 1000000);
}

int cmd_run(const std::string& config_path, uint32_t rounds) {
  Config config = load_config(config_path, kRunDefaultFrequencyHz);
  set_log_level(config.log_level);
  std::error_code ec;
  if (!config.output_directory.empty()) {
    fs::create_directories(config.output_directory, ec);
    if (ec) fail(fmt::format("output.directory {}: {}", config.output_directory, ec.message()));
  }
  auto exporters = make_exporters(config);
  if (!exporters) fail(exporters.error().message, 2);
  if (config.output_directory.empty() && exporters->empty()) {
    fail("output.directory is empty and no export endpoint is set: the profiles would go nowhere", 2);
  }
  Agent agent(config);
  if (auto r = agent.start(); !r) fail(r.error().message, 2);
  install_signal_handlers();

  RoundOutput output(config.output_directory);
  // /metrics: the agent's counters as of the last round's end (reading them
  // touches BPF maps the main thread owns), the exporters' and the agent's
  // resource use as of the scrape.
  std::mutex metrics_mutex;
  std::vector<Metric> round_metrics;
  std::unique_ptr<MetricsServer> metrics_server;
  if (!config.metrics_listen.empty()) {
    auto server = MetricsServer::start(config.metrics_listen, [&]() {
      std::vector<Metric> metrics;
      {
        std::lock_guard lock(metrics_mutex);
        metrics = round_metrics;
      }
      for (ConfiguredExporter& exporter : *exporters) {
        for (const auto& [name, value] : exporter_stat_lines(exporter.stats_prefix, exporter.exporter->stats())) {
          metrics.push_back(stat_metric(name, value));
        }
      }
      for (Metric& metric : process_metrics()) metrics.push_back(std::move(metric));
      return metrics;
    });
    if (!server) fail(server.error().message, 2);
    metrics_server = std::move(*server);
    log().info("serving /metrics on {}", config.metrics_listen);
  }
  auto round_end = std::chrono::steady_clock::now();
  for (uint32_t round = 1; !g_stop && (rounds == 0 || round <= rounds); ++round) {
    // Rounds keep to the clock: one ends round_seconds after the last ended,
    // however long writing it took (unless that took a whole round). In
    // between, the agent looks at the maps when BPF says they fill, not
    // every second.
    round_end += std::chrono::seconds(config.round_seconds);
    if (const auto now = std::chrono::steady_clock::now(); round_end <= now) {
      round_end = now + std::chrono::seconds(config.round_seconds);
    }
    while (!g_stop && std::chrono::steady_clock::now() < round_end) {
      agent.wait_until_collect_due(round_end, g_stop_fd);
      if (!g_stop && std::chrono::steady_clock::now() < round_end) (void)agent.collect_when_due();
    }
    if (round == 1) keep_less_free_memory();
    if (g_stop) agent.stop_sampling();  // the last round: keep every sample counted
    ProfileBuilder profile = agent.finish_round();
    std::string file_name = round_file_name();
    std::vector<std::string> written;
    if (!config.output_directory.empty()) written = output.write(file_name, profile);  // failures logged there
    for (ConfiguredExporter& exporter : *exporters) exporter.exporter->submit(profile);
    std::string counters;
    const std::vector<StatLine> agent_stats = agent.stats();
    for (const auto& line : agent_stats) counters += fmt::format(" {}={}", line.name, line.value);
    if (metrics_server) {
      std::vector<Metric> metrics;
      for (const auto& line : agent_stats) metrics.push_back(stat_metric(line.name, line.value));
      metrics.push_back(stat_metric("host.rounds", round));
      metrics.push_back(stat_metric("host.round_samples", static_cast<uint64_t>(profile.total_samples())));
      std::lock_guard lock(metrics_mutex);
      round_metrics = std::move(metrics);
    }
    for (ConfiguredExporter& exporter : *exporters) {
      for (const auto& [name, value] : exporter_stat_lines(exporter.stats_prefix, exporter.exporter->stats())) {
        if (value) counters += fmt::format(" {}={}", name, value);
      }
    }
    auto os = output.stats();
    for (const auto& [name, value] : {std::pair<const char*, uint64_t>{"host.rounds_waiting", os.pending},
                                      {"host.round_write_failures", os.write_failures},
                                      {"host.rounds_dropped", os.dropped}}) {
      if (value) counters += fmt::format(" {}={}", name, value);
    }
    bool this_round_written = !written.empty() && fs::path(written.back()).filename() == file_name;
    if (config.output_directory.empty()) {
      log().info("round {}: {} samples queued for export;{}", round, profile.total_samples(), counters);
    } else if (this_round_written) {
      log().info("round {}: wrote {} ({} samples{});{}", round, written.back(), profile.total_samples(),
                 written.size() > 1 ? fmt::format(", and {} kept earlier rounds", written.size() - 1) : "",
                 counters);
    } else {
      log().warn("round {}: {} ({} samples) not written yet;{}", round, file_name, profile.total_samples(),
                 counters);
    }
  }
  agent.stop();
  for (ConfiguredExporter& exporter : *exporters) {
    exporter.exporter->shutdown(std::chrono::seconds(config.export_to.shutdown_wait_seconds));
  }
  if (output.stats().pending > 0) {
    output.flush();
    if (auto left = output.stats().pending; left > 0) {
      log().error("{} round(s) could not be written to {} before exit: lost", left, output.directory());
      return 1;
    }
  }
  return 0;
}

int cmd_plugins(const std::string& config_path) {
  Config config = load_config(config_path, kRunDefaultFrequencyHz);
  set_log_level("warn");
  InstallLayout layout = InstallLayout::from_executable();
  PluginHostOptions options = plugin_options(config, layout);

  // Load into real maps when this machine can run BPF, so a plugin whose
  // object fails the verifier shows as refused; otherwise check only.
  std::unique_ptr<BpfMaps> maps;
  auto usable = check_bpf_usable();
  if (usable) {
    install_libbpf_logging();
    auto opened = BpfMaps::open();
    if (opened && (*opened)->load()) maps = std::move(*opened);
  }
  ElfSymbolizer symbolizer;
  PluginHost host(maps.get(), &symbolizer);
  host.load_all(options);
  std::cout << host_accepted_abi_text() << "\n";
  std::cout << fmt::format("plugin directories: {}\n", fmt::join(options.directories, ", "));
  if (!maps) {
    std::cout << fmt::format("BPF objects not loaded ({}): showing ABI checks only\n",
                             usable ? "the host's BPF object did not load" : usable.error().message);
  } else {
    // What each object cost the kernel to load: the start-up's BPF part.
    std::cout << fmt::format("host BPF object loaded in {}\n", describe_load_cost(maps->load_cost()));
  }
  if (host.plugins().empty()) std::cout << "no plugins found\n";
  for (const auto& p : host.plugins()) {
    if (p->state == PluginState::kNotInstalled) {
      // Not an error: the exit status stays 0 (a removed plugin package).
      std::cout << fmt::format("{} {}.so (runtime {})\n          reason: {}\n", plugin_state_name(p->state),
                               p->runtime, p->runtime, p->reason);
      continue;
    }
    std::string what = p->name.empty() ? fs::path(p->path).filename().string()
                                       : fmt::format("{} {} (runtime {})", p->name, p->version, p->runtime);
    // A refused plugin's versions, when its entry could be read: what to
    // rebuild it against.
    if (p->state == PluginState::kRefused && !p->abi_versions.empty()) what += " (" + p->abi_versions + ")";
    std::cout << fmt::format("{:<9} {}  {}", plugin_state_name(p->state), what, p->path);
    if (p->state == PluginState::kLoaded) std::cout << fmt::format("  slot {}", p->slot);
    if (!p->reason.empty()) std::cout << fmt::format("\n          reason: {}", p->reason);
    if (p->state == PluginState::kLoaded) {
      std::cout << fmt::format("\n          BPF object loaded in {}", describe_load_cost(p->load_cost));
    }
    std::cout << "\n";
  }
  return 0;
}

int cmd_debug(const std::string& config_path, const std::string& command, const std::string& argument) {
  Config config = load_config(config_path, kRunDefaultFrequencyHz);
  set_log_level("warn");
  PluginHostOptions options = plugin_options(config, InstallLayout::from_executable());
  options.create_without_bpf = true;
  ElfSymbolizer symbolizer;
  PluginHost host(nullptr, &symbolizer);
  host.load_all(options);
  Plugin* plugin = host.plugin_for_debug_command(command);
  if (!plugin) fail(fmt::format("no loaded plugin offers 'debug {}'", command));
  std::string error;
  auto write = [](void*, const char* text, size_t len) { std::cout.write(text, static_cast<std::streamsize>(len)); };
  omniprof_status status = PluginHost::debug_command(*plugin, command, argument, write, nullptr, error);
  std::cout.flush();
  if (status != OMNIPROF_OK) fail(fmt::format("{} {}: {}", command, argument, error));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc gives each thread that allocates its own arena (up to 8 per CPU),
  // each keeping the memory it freed: the agent's threads (drains, events,
  // ticks, table builds, exports) held ~6 MB more RSS that way on an
  // interpreter-heavy machine (bench/agent_overhead interp). They rarely
  // allocate at once, so two arenas cost no waiting worth measuring.
  mallopt(M_ARENA_MAX, 2);
  CLI::App app{"omniprof: whole-system CPU profiler (eBPF, pprof output)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", OMNIPROF_VERSION);

  std::string config_path;
  const std::string config_help = fmt::format(
      "YAML config file; the *.yaml drop-ins in the conf.d/ beside it are applied over it in "
      "name order (default: {0}/omniprof.yaml and {0}/conf.d/, or ${1} instead of {0})",
      kDefaultConfigDirectory, kConfigDirectoryVariable);
  uint32_t hz = 0, seconds = 10;
  std::vector<int32_t> pids;
  std::string output = "profile.pb.gz";
  size_t top = 20;
  auto* record = app.add_subcommand("record", "profile for a while and write one pprof file");
  record->add_option("-F,--frequency", hz, "samples per second per CPU (default 99)")->check(CLI::Range(1, 1000));
  record->add_option("-p,--pid", pids, "only these processes (repeatable)")->check(CLI::PositiveNumber);
  record->add_option("-d,--duration", seconds, "seconds to record")->check(CLI::Range(1, 86400));
  record->add_option("-o,--output", output, "pprof file to write (gzip'd)");
  record->add_option("--config", config_path, config_help)->check(CLI::ExistingFile);
  record->add_option("--top", top, "functions to print");
  bool bpf_stats = false;
  record->add_flag("--bpf-stats", bpf_stats, "time the BPF programs and print their cost per sample");
  RecordViews views;
  record->add_flag("--keep-interpreter-internals", views.keep_interpreter_internals,
                   "show every native frame of the Python/Ruby interpreter instead of folding them into the "
                   "Python/Ruby frames they run (config: profile.interpreter_internals: keep)");
  record->add_option("--other-view-output", views.other_view_output,
                     "also write the same samples with interpreter internals the other way (kept if the profile "
                     "folds them, folded if it keeps them), to compare");
  record->add_option("--flamegraph", views.flamegraph, "also write the profile's flamegraph page (HTML) here");

  uint32_t rounds = 0;
  auto* run = app.add_subcommand("run", "profile continuously, one pprof file per round");
  run->add_option("--config", config_path, config_help)->check(CLI::ExistingFile);
  run->add_option("--rounds", rounds, "stop after this many rounds (default: until SIGINT/SIGTERM)");

  auto* plugins = app.add_subcommand("plugins", "list plugins: loaded, disabled by config, refused, or enabled but not installed");
  plugins->add_option("--config", config_path, config_help)->check(CLI::ExistingFile);

  std::string debug_command, debug_argument;
  auto* debug = app.add_subcommand("debug", "plugin debugging commands, e.g. `debug unwind-table FILE`");
  debug->add_option("command", debug_command, "unwind-table")->required();
  debug->add_option("argument", debug_argument, "the command's argument (a file path)")->required();
  debug->add_option("--config", config_path, config_help)->check(CLI::ExistingFile);

  auto* config_command = app.add_subcommand(
      "config", "print the merged configuration, each value with the file and line it came from");
  config_command->add_option("--config", config_path, config_help)->check(CLI::ExistingFile);

  std::string flamegraph_profile, flamegraph_output;
  auto* flamegraph = app.add_subcommand("flamegraph", "write a profile's flamegraph as one self-contained HTML page");
  flamegraph->add_option("profile", flamegraph_profile, "pprof file (gzip'd or not)")->required();
  flamegraph->add_option("-o,--output", flamegraph_output, "HTML file to write")->required();

  CLI11_PARSE(app, argc, argv);
  try {
    if (*record) return cmd_record(config_path, hz, pids, seconds, output, top, bpf_stats, views);
    if (*flamegraph) return cmd_flamegraph(flamegraph_profile, flamegraph_output);
    if (*run) return cmd_run(config_path, rounds);
    if (*plugins) return cmd_plugins(config_path);
    if (*config_command) return cmd_config(config_path);
    if (*debug) return cmd_debug(config_path, debug_command, debug_argument);
  } catch (const std::exception& e) {
    fail(e.what(), 1);
  }
  return 1;
}
