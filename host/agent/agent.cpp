#include "agent/agent.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <unordered_set>

#include "common/clock.h"
#include "common/thread_priority.h"
#include "bpf/bpf_support.h"
#include "entry.skel.h"
#include "log/logger.h"

namespace omniprof {

namespace fs = std::filesystem;

namespace {

int64_t now_ns(clockid_t clock) { return static_cast<int64_t>(clock_ns(clock)); }

// Names of the host's counters (enum omniprof_host_stat).
const char* const kHostStatNames[OMNIPROF_NUM_HOST_STATS] = {
    "samples",
    "samples_idle_skipped",
    "samples_filtered_out",
    "samples_recorded",
    "kernel_stack_errors",
    "kernel_thread_samples",
    "stack_traces_full",
    "stack_counts_full_dropped",
    "tail_call_failed",
    "events_lost",
    "process_requests",
    "unwind_state_missing_dropped",
    "tail_call_limit_truncated",
    "stack_truncated_max_depth",
    "user_regs_errors",
    "interpreter_marks_full",
    "interpreter_frames_truncated",
    "sample_times_lost",
    "user_memory_gone_samples",
    "fork_copies_failed",
    "stack_counts_keys_added",
    "stack_fragments_stored",
};

// How many executables' descriptors OpenExecutables may hold: the soft
// RLIMIT_NOFILE is raised to the hard one (allowed unprivileged), and half
// of it, at most 4096, is left to executables; the rest is for perf events
// (one per CPU), BPF objects and files opened while reading.
size_t executable_descriptor_budget() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return OpenExecutables::kDefaultMaxOpen / 4;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  const rlim_t half = limit.rlim_cur == RLIM_INFINITY ? 8192 : limit.rlim_cur / 2;
  return static_cast<size_t>(std::clamp<rlim_t>(half, 16, 4096));
}

}  // namespace

PluginHostOptions plugin_options(const Config& config, const InstallLayout& layout) {
  PluginHostOptions options;
  options.directories.push_back(layout.plugin_dir);
  for (const auto& dir : config.plugin_directories) options.directories.push_back(dir);
  options.data_root = (fs::path(layout.data_dir) / "plugins").string();
  options.runtime_enabled = [config](const std::string& runtime) {
    return config.runtime_enabled(runtime);
  };
  for (const auto& [runtime, enabled] : config.runtimes) {
    if (enabled) options.enabled_runtimes.push_back(runtime);
  }
  return options;
}

Agent::Agent(Config config, bool bpf_stats)
    : config_(std::move(config)), layout_(InstallLayout::from_executable()), bpf_stats_(bpf_stats) {}

Agent::~Agent() { stop(); }

Result<void> Agent::start() {
  if (auto r = check_bpf_usable(); !r) return r;
  install_libbpf_logging();

  auto maps = BpfMaps::open();
  if (!maps) return maps.error();
  maps_ = std::move(*maps);
  const uint32_t cpus = static_cast<uint32_t>(std::max(1, libbpf_num_possible_cpus()));
  const uint32_t stack_traces_entries = config_.stack_traces_entries
                                            ? config_.stack_traces_entries
                                            : fitted_stack_traces_entries(cpus, config_.frequency_hz);
  const uint32_t stack_counts_entries = config_.stack_counts_entries
                                            ? config_.stack_counts_entries
                                            : fitted_stack_counts_entries(cpus, config_.frequency_hz, config_.round_seconds);
  MapSizes sizes{stack_traces_entries, stack_counts_entries, config_.process_entries, config_.unwind_memory_mb,
                 config_.executable_entries};
  if (auto r = maps_->adjust_map_sizes(sizes); !r) return r;
  maps_->enable_pid_filter(!config_.pids.empty());
  // OTLP carries each sample's time (pprof has no place for one): only then
  // does BPF record them. The ring holds four seconds of samples at the
  // rate, and is read at every drain: `run` drains once a quarter of it
  // fills (drain_schedule.h), `record` every second.
  uint64_t sample_time_records = 0;
  if (!config_.export_to.otlp.endpoint.empty()) {
    const uint64_t record_bytes = sizeof(omniprof_sample_time) + 8;  // + the ring's header
    sample_time_records = static_cast<uint64_t>(cpus) * config_.frequency_hz * 4;
    if (auto r = maps_->record_sample_times(sample_time_records * record_bytes); !r) return r;
  }
  drain_schedule_.emplace(stack_counts_entries, stack_traces_entries, sample_time_records);
  if (auto r = maps_->load(); !r) {
    return make_error(fmt::format("{} ({})", r.error().message, take_libbpf_log_tail(4)));
  }
  log().debug("host BPF object loaded in {}", describe_load_cost(maps_->load_cost()));
  if (!config_.pids.empty()) {
    if (auto r = maps_->set_debug_pids(config_.pids); !r) return r;
  }

  symbolizer_ = std::make_unique<ElfSymbolizer>();
  plugins_ = std::make_unique<PluginHost>(maps_.get(), symbolizer_.get());
  plugins_->load_all(plugin_options(config_, layout_));
  bool native_loaded = false;
  for (const auto& p : plugins_->plugins()) native_loaded |= p->state == PluginState::kLoaded && p->runtime == "native";
  if (!native_loaded) {
    log().warn("no native unwinder loaded (looked in {}): samples will carry kernel frames only",
               layout_.plugin_dir);
  }

  executable_loader_ = std::make_unique<PluginExecutableLoader>(*plugins_, maps_.get());
  executables_ = std::make_unique<ExecutableInfoManager>(*executable_loader_);
  processes_ = std::make_unique<ProcessTracker>(maps_.get(), plugins_.get());
  open_executables_ = std::make_unique<OpenExecutables>(file_ids_, executable_descriptor_budget());
  processes_->track_executables(executables_.get(), open_executables_.get(), symbolizer_.get());
  processes_->set_resource_settings(config_.resource);
  assembler_ = std::make_unique<ProfileAssembler>(*symbolizer_, nullptr, plugins_.get());

  // A fork's child gets its parent's process_info in the kernel (a BTF
  // tracepoint, 5.5+); without it the host writes each child from the fork's record.
  if (kernel_feature_hidden("fork_copy")) {
    log().info("fork copies hidden (OMNIPROF_HIDE_BPF_FEATURES): the host writes each fork's child");
  } else if (bpf_link* link = bpf_program__attach(maps_->skeleton()->progs.omniprof_fork)) {
    lifecycle_links_.push_back(link);
    processes_->set_fork_copies(true);
  } else {
    log().warn("cannot attach omniprof_fork: {}; a fork's child is walked whole once the host has read its record",
               strerror(errno));
  }
  collect_notice_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!collect_notice_fd_.valid()) {
    log().warn("cannot make the main thread's eventfd ({}): it looks at the maps every {} ms", strerror(errno),
               kLookIntervalWithoutNotices.count());
  }
  // DRAIN_DUE comes on a ring of its own, read by the main thread while it
  // waits (wait_until_collect_due): the event thread may be seconds into
  // describing processes when the maps fill.
  drain_due_ = ring_buffer__new(
      maps_->drain_due_fd(),
      [](void* ctx, void*, size_t) -> int {
        static_cast<std::atomic<uint64_t>*>(ctx)->fetch_add(1, std::memory_order_relaxed);
        return 0;
      },
      &drain_notices_, nullptr);
  if (!drain_due_) {
    log().warn("cannot open the drain_due ring buffer ({}): the maps are looked at every {} ms", strerror(errno),
               kLookIntervalWithoutNotices.count());
  }
  // A deferred table's retry is a time the main thread waits for too.
  executables_->set_retry_scheduled([this] { notify_collect(); });
  event_loop_ = std::make_unique<EventLoop>([this](const omniprof_event& event) {
    switch (event.type) {
      case OMNIPROF_EVENT_TICK_DUE:
        request_tick(true);
        return;
      default:
        processes_->handle_event(event);
    }
  });
  events_ = ring_buffer__new(
      maps_->events_fd(),
      [](void* ctx, void* data, size_t size) -> int {
        return static_cast<EventLoop*>(ctx)->dispatch(data, size);
      },
      event_loop_.get(), nullptr);
  if (!events_) return make_error(fmt::format("cannot open the events ring buffer: {}", strerror(errno)));
  if (auto r = open_process_records(); !r) return r;
  // Exec and exit notices are BTF tracepoints (5.5+); without them the host
  // still notices both at the end of each round, later. With process records
  // they are not attached: the records carry both, in order with the
  // mappings, and each notice would wake the event thread once more.
  if (!process_records_) {
    for (bpf_program* prog : {maps_->skeleton()->progs.omniprof_exec, maps_->skeleton()->progs.omniprof_exit}) {
      bpf_link* link = bpf_program__attach(prog);
      if (!link) {
        log().warn("cannot attach {}: {}; exec/exit are noticed at round ends only",
                   bpf_program__name(prog), strerror(errno));
        continue;
      }
      lifecycle_links_.push_back(link);
    }
  }
  event_thread_ = std::thread([this] {
    // It describes new processes while their first samples are taken
    // (common/thread_priority.h).
    if (config_.describe_nice != 0) {
      if (auto r = set_current_thread_nice(config_.describe_nice); !r) {
        log().warn("processes.nice: {}; processes are described at the agent's own priority, and a busy "
                   "machine's new processes are walked whole less often",
                   r.error().message);
      }
    }
    event_loop_->run(
        [this](int timeout_ms) {
          epoll_event ready[4];
          const bool paced = process_records_ && records_pacing_.storm();
          if (paced) {
            // A storm of process records: read on the clock, not at each
            // record (agent/records_pacing.h); never past what is due.
            const auto now = std::chrono::steady_clock::now();
            const auto until = std::min(records_pacing_.next_read_at(), now + std::chrono::milliseconds(timeout_ms));
            if (until > now) std::this_thread::sleep_until(until);
            event_thread_paced_reads_.fetch_add(1, std::memory_order_relaxed);
          }
          int n = epoll_wait(event_epoll_.get(), ready, 4, paced ? 0 : timeout_ms);
          if (n < 0) return -errno;
          if (n > 0 && !paced) event_thread_wakes_.fetch_add(1, std::memory_order_relaxed);
          for (int i = 0; i < n; ++i) {
            if (ready[i].data.fd == event_loop_->wake_fd()) event_loop_->clear_wake();
          }
          // Records first: a process BPF asks about (unknown, or a pc in
          // no known mapping) is often one they describe.
          int handled = 0;
          if (process_records_) {
            const uint64_t read_began_ns = monotonic_ns();
            process_records_->drain(records_drained_);
            processes_->apply_records(records_drained_, read_began_ns);  // also when empty: deferred reads are due
            handled = static_cast<int>(records_drained_.size());
            records_pacing_.read(std::chrono::steady_clock::now(), records_drained_.size());
          } else {
            processes_->reread_execs_due();
          }
          int events = ring_buffer__consume(events_);
          // A look at the maps is due: the ring may have been full
          // (read_counters finds a lost TICK_DUE), or exited processes pile
          // up (their memory goes at a drain; one a round sampled stays
          // until the round's end, so at most one such look a second, as
          // when the main thread looked every second).
          if (events >= kEventsRingMayHaveFilled) notify_collect();
          if (const auto now = std::chrono::steady_clock::now();
              now - exits_noticed_at_ >= kExitsNoticeInterval &&
              processes_->exits_awaiting_drain() >= DrainSchedule::kExitsWaiting) {
            exits_noticed_at_ = now;
            notify_collect();
          }
          return events < 0 ? events : handled + events;
        },
        stopping_,
        // Held views, deferred reads and exec re-reads are due at a time no
        // record or event brings.
        [this] { return processes_->ms_until_due(); });
  });

  // Plugins read, while processes live, what they will need to name frames
  // at the round's end (plugin.h: tick): at once when a walk noted something
  // new (a process may live only milliseconds more), when a TICK_DUE event
  // may have been lost (read_counters), and every kTickInterval for plugins
  // that ask for it (ABI 2.3 and older, or without
  // OMNIPROF_TICK_ON_NOTICE_ONLY). Requests that come while a tick runs
  // make one more tick after it.
  tick_thread_ = std::thread([this] {
    std::vector<Plugin*> every_second;
    for (const auto& plugin : plugins_->plugins()) {
      if (plugin->state == PluginState::kLoaded && PluginHost::ticks_every_second(*plugin)) {
        every_second.push_back(plugin.get());
      }
    }
    auto requested = [this] { return stopping_.load() || tick_due_on_request_ || tick_due_for_lost_events_; };
    std::unique_lock<std::mutex> lock(tick_mutex_);
    for (;;) {
      const bool woken = every_second.empty() ? (tick_wakeup_.wait(lock, requested), true)
                                              : tick_wakeup_.wait_for(lock, kTickInterval, requested);
      if (stopping_.load()) return;
      std::atomic<uint64_t>& count = !woken                ? ticks_every_second_
                                     : tick_due_on_request_ ? ticks_on_request_
                                                            : ticks_for_lost_events_;
      count.fetch_add(1, std::memory_order_relaxed);
      tick_due_on_request_ = tick_due_for_lost_events_ = false;
      lock.unlock();
      if (woken) {
        for (const auto& plugin : plugins_->plugins()) {
          if (plugin->state == PluginState::kLoaded) PluginHost::tick(*plugin);
        }
      } else {
        for (Plugin* plugin : every_second) {
          if (plugin->state == PluginState::kLoaded) PluginHost::tick(*plugin);
        }
      }
      lock.lock();
    }
  });

  // The processes running now (or -p's) are read and their tables built on
  // a thread of their own while sampling starts: `record` waits for them
  // (startup_progress) before its clock starts, `run` does not wait.
  startup_scan_thread_ = std::thread([this] {
    processes_->scan(
        config_.pids,
        [this](const std::vector<ProcessTracker::ScannedFile>& files) {
          std::lock_guard<std::mutex> lock(startup_mutex_);
          startup_files_ = files;
          startup_files_known_ = true;
        },
        &stopping_);
    startup_scan_done_ = true;
  });

  if (bpf_stats_) {
    int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    if (fd < 0) {
      log().warn("cannot enable BPF run-time statistics: {}", strerror(errno));
    } else {
      bpf_stats_fd_.reset(fd);
    }
  }
  auto sampler = PerfSampler::attach(maps_->skeleton()->progs.omniprof_entry, config_.frequency_hz);
  if (!sampler) return sampler.error();
  sampler_.emplace(std::move(*sampler));
  round_start_mono_ns_ = now_ns(CLOCK_MONOTONIC);
  log().info("sampling {} CPUs at {} Hz{}", sampler_->cpu_count(), config_.frequency_hz,
             config_.pids.empty() ? "" : fmt::format(", {} processes", config_.pids.size()));
  kernel_symbols_thread_ = std::thread([this] {
    auto kernel = KernelSymbols::load();
    if (kernel) {
      kernel_symbols_ = std::move(*kernel);
    } else {
      log().warn("kernel frames will not be named: {}", kernel.error().message);
    }
  });
  return ok();
}

void Agent::use_kernel_symbols() {
  if (kernel_symbols_thread_.joinable()) kernel_symbols_thread_.join();  // stop() may have joined it
  assembler_->set_kernel_symbols(kernel_symbols_ ? &*kernel_symbols_ : nullptr);
}

Result<void> Agent::open_process_records() {
  int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) return make_error(fmt::format("epoll_create1: {}", strerror(errno)));
  event_epoll_.reset(epoll);
  auto watch = [&](int fd, const char* what) -> Result<void> {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;  // tells the sources apart (strace, a debugger)
    if (epoll_ctl(event_epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
      return make_error(fmt::format("epoll_ctl({}): {}", what, strerror(errno)));
    }
    return ok();
  };
  if (auto r = watch(ring_buffer__epoll_fd(events_), "events ring buffer"); !r) return r;
  if (event_loop_->wake_fd() >= 0) {
    if (auto r = watch(event_loop_->wake_fd(), "event thread's eventfd"); !r) return r;
  }
  // With -p the samples are of those processes alone: /proc tells the rest.
  if (!config_.pids.empty()) return ok();
  if (kernel_feature_hidden("process_records")) {
    log().info("process records hidden (OMNIPROF_HIDE_BPF_FEATURES): processes are read from /proc when first sampled");
    return ok();
  }
  auto stream = ProcessRecordStream::open(kProcessRecordPages);
  if (!stream) {
    log().warn("the kernel gives no process records ({}): processes are read from /proc when first sampled, "
               "and the first samples of short-lived ones are lost",
               stream.error().message);
    return ok();
  }
  process_records_ = std::move(*stream);
  if (auto r = watch(process_records_->mappings_epoll_fd(), "process records (mappings, forks, exits)"); !r) return r;
  return watch(process_records_->names_epoll_fd(), "process records (exec names)");
}

void Agent::stop_sampling() { sampler_.reset(); }

void Agent::stop() {
  stop_sampling();
  {
    std::lock_guard<std::mutex> lock(tick_mutex_);
    stopping_ = true;
  }
  tick_wakeup_.notify_all();
  if (event_loop_) event_loop_->wake();
  // The scan stops between processes (a table build under way finishes).
  if (startup_scan_thread_.joinable()) startup_scan_thread_.join();
  if (kernel_symbols_thread_.joinable()) kernel_symbols_thread_.join();
  if (event_thread_.joinable()) event_thread_.join();
  if (tick_thread_.joinable()) tick_thread_.join();
  if (events_) ring_buffer__free(events_);
  events_ = nullptr;
  if (drain_due_) ring_buffer__free(drain_due_);
  drain_due_ = nullptr;
  process_records_.reset();
  for (bpf_link* link : lifecycle_links_) bpf_link__destroy(link);
  lifecycle_links_.clear();
}

Agent::StartupProgress Agent::startup_progress() const {
  StartupProgress progress;
  if (!executables_) return progress;
  const bool scan_done = startup_scan_done_.load();
  {
    std::lock_guard<std::mutex> lock(startup_mutex_);
    progress.files_known = startup_files_known_;
    progress.total = startup_files_.size();
    for (const auto& file : startup_files_) {
      // Once the scan is over, a file no process references was mapped only
      // by processes that exited before they were published.
      if (executables_->settled(file.file_id) || (scan_done && !executables_->referenced(file.file_id))) {
        progress.settled++;
      } else {
        progress.waiting.push_back(file.name);
      }
    }
  }
  progress.building = executables_->building();
  // A -p process re-read meanwhile (a library it loaded since) may be
  // building a table of a file the scan did not see.
  progress.ready = scan_done && progress.waiting.empty() && !processes_->busy(config_.pids);
  return progress;
}

void Agent::discard_round() {
  (void)collect();
  round_.clear();
  round_start_mono_ns_ = now_ns(CLOCK_MONOTONIC);
}

void Agent::request_tick(bool on_request) {
  {
    std::lock_guard<std::mutex> lock(tick_mutex_);
    (on_request ? tick_due_on_request_ : tick_due_for_lost_events_) = true;
  }
  tick_wakeup_.notify_all();
}

Result<MapInflow> Agent::read_counters() {
  auto events_lost = maps_->read_stat(OMNIPROF_STAT_EVENTS_LOST);
  if (!events_lost || *events_lost != events_lost_seen_) {
    if (events_lost) events_lost_seen_ = *events_lost;
    request_tick(false);
  }
  auto totals = maps_->read_inflow_totals();
  if (!totals) return totals.error();
  MapInflow inflow;
  inflow.count_keys_added = totals->added[OMNIPROF_INFLOW_COUNT_KEYS];
  inflow.fragments_stored = totals->added[OMNIPROF_INFLOW_FRAGMENTS];
  inflow.sample_times_recorded = totals->added[OMNIPROF_INFLOW_SAMPLE_TIMES];
  return inflow;
}

void Agent::notify_collect() {
  if (!collect_notice_fd_.valid()) return;
  uint64_t one = 1;
  // EAGAIN: the counter is full, so a look is due already.
  (void)!write(collect_notice_fd_.get(), &one, sizeof(one));
}

void Agent::arm_drain_notice() {
  // Only `run` waits for DRAIN_DUE; `record` drains every second and never
  // arms it (nor sends BPF's event for nothing).
  if (!drain_schedule_ || !waits_on_drain_notices_) return;
  auto armed = maps_->arm_drain_thresholds(drain_schedule_->thresholds());
  if (!armed && (drain_notices_armed_ || !drain_notice_tried_)) {
    log().error("{}: the maps are looked at every {} ms until it can be written again", armed.error().message,
                kLookIntervalWithoutNotices.count());
  }
  drain_notice_tried_ = true;
  drain_notices_armed_ = static_cast<bool>(armed) && drain_due_ && collect_notice_fd_.valid();
}

void Agent::wait_until_collect_due(std::chrono::steady_clock::time_point deadline, int stop_fd) {
  using Clock = std::chrono::steady_clock;
  if (!waits_on_drain_notices_) {
    waits_on_drain_notices_ = true;
    arm_drain_notice();
  }
  const Clock::time_point now = Clock::now();
  Clock::time_point until = deadline;
  if (!drain_notices_armed_) until = std::min(until, now + kLookIntervalWithoutNotices);
  // A retry due now may be held up by a build: looked for again a second on.
  if (Clock::time_point retry = executables_->retry_due(); retry < until) {
    until = std::max(retry, now + kShortestRetryWait);
  }
  if (until <= now) return;
  pollfd fds[3] = {{collect_notice_fd_.get(), POLLIN, 0},
                   {drain_due_ ? ring_buffer__epoll_fd(drain_due_) : -1, POLLIN, 0},
                   {stop_fd, POLLIN, 0}};
  const auto timeout = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
  // An fd of -1 is skipped by poll; EINTR (a signal) ends the wait early.
  (void)poll(fds, 3, static_cast<int>(std::min<int64_t>(timeout, std::numeric_limits<int>::max())));
  if (fds[0].revents & POLLIN) {
    uint64_t count = 0;
    (void)!read(collect_notice_fd_.get(), &count, sizeof(count));
  }
  // Counted in drain_notices_; a notice sent during the look that follows
  // stays in the ring and ends the next wait at once.
  if (fds[1].revents & POLLIN) (void)ring_buffer__consume(drain_due_);
}

Result<void> Agent::collect_when_due() {
  collect_looks_++;
  auto inflow = read_counters();
  // Counters unreadable: drain, as every second before the schedule.
  DrainReason reason = DrainReason::kCountersWrong;
  if (inflow && drain_schedule_) reason = drain_schedule_->due(*inflow, processes_->exits_awaiting_drain());
  switch (reason) {
    case DrainReason::kNotDue:
      executables_->retry_deferred();
      // BPF disarmed it if it sent one (a look past a threshold drains, so
      // this one came early: a race with the last drain's arming).
      arm_drain_notice();
      return ok();
    case DrainReason::kMapsFilling:
      drains_for_filling_maps_++;
      break;
    case DrainReason::kExitsWaiting:
      drains_for_exits_++;
      break;
    case DrainReason::kCountersWrong:
      drains_for_unreadable_counters_++;
      break;
  }
  return drain(inflow);
}

Result<void> Agent::collect() { return drain(read_counters()); }

Result<void> Agent::drain(const Result<MapInflow>& inflow) {
  executables_->retry_deferred();
  auto r = drain_into(*maps_, round_);
  drains_++;
  // Counters unreadable: the schedule keeps the previous drain's totals, so
  // it counts more than the maps hold and drains sooner, never later.
  if (inflow && drain_schedule_) drain_schedule_->drained(*inflow, maps_->stack_fragments_kept());
  arm_drain_notice();
  if (!r) {
    drain_errors_++;
    log().error("draining BPF maps: {}", r.error().message);
  }
  // Before the tracker lets go of the images execs replaced: the samples
  // just drained that ran in one are named with it.
  round_.pin_images(processes_->recent_images());
  std::unordered_set<int32_t> sampled;
  for (const auto& [key, count] : round_.counts) sampled.insert(static_cast<int32_t>(key.pid));
  processes_->drained(sampled);
  return r;
}

ProfileBuilder Agent::finish_round() {
  return std::move(finish_round({config_.fold_interpreter_internals}).front());
}

std::vector<ProfileBuilder> Agent::finish_round(const std::vector<bool>& fold) {
  // The next round starts before this one's last drain, and this one ends
  // after it: a sample taken during the drain may be counted in either, and
  // its time then falls within that round's range. The two overlap by the
  // drain (milliseconds) rather than leave a gap.
  const int64_t close_unix_ns = now_ns(CLOCK_REALTIME);
  const int64_t close_mono_ns = now_ns(CLOCK_MONOTONIC);
  (void)collect();
  const int64_t end_mono_ns = now_ns(CLOCK_MONOTONIC);
  // The round's range and its samples' times are all CLOCK_MONOTONIC, put on
  // the wall clock with this one offset: a wall clock stepped between two
  // rounds (NTP, a VM's clock sync) moves a whole round, never its samples
  // out of its own range.
  const int64_t unix_minus_mono_ns = close_unix_ns - close_mono_ns;
  if (!config_.export_to.otlp.endpoint.empty()) {
    round_.settle_times(static_cast<uint64_t>(close_mono_ns), unix_minus_mono_ns, sample_time_stats_);
  }
  use_kernel_symbols();
  int64_t period_ns = 1000000000LL / config_.frequency_hz;
  int64_t duration = end_mono_ns - round_start_mono_ns_;
  std::vector<ProfileBuilder> profiles = assembler_->assemble(
      round_, *known_processes(), period_ns, round_start_mono_ns_ + unix_minus_mono_ns, duration, fold);
  // What naming learnt goes on, never waited for: the files it sampled, and
  // the processes to read again for the next round (mappings added since).
  const NamingRequests& requests = assembler_->requests();
  for (uint64_t file_id : requests.sampled_files) executables_->mark_sampled(file_id);
  // Applied now, not at the next look (which may be a round away): an
  // evicted table sampled again is queued for its reload at once.
  executables_->retry_deferred();
  for (int32_t pid : requests.stale_mappings) {
    event_loop_->post(omniprof_event{OMNIPROF_EVENT_MAPPINGS_STALE, static_cast<uint32_t>(pid), 0});
  }
  for (ProfileBuilder& profile : profiles) profile.add_comment(fmt::format("omniprof {}", OMNIPROF_VERSION));
  round_.clear();
  // Every exit of the round reached the tracker as a record (none lost to a
  // full ring, none malformed): it need not ask /proc whether each process
  // it knows still lives (a syscall per process per round).
  bool every_exit_seen = false;
  if (process_records_) {
    const ProcessRecordStats rs = process_records_->stats();
    every_exit_seen = rs.lost + rs.malformed == records_missed_at_round_end_;
    records_missed_at_round_end_ = rs.lost + rs.malformed;
  }
  processes_->end_round(every_exit_seen);
  round_start_mono_ns_ = close_mono_ns;
  return profiles;
}

std::shared_ptr<const KnownProcesses> Agent::known_processes() {
  auto known = processes_->snapshot();
  // A sampled process not read yet (BPF asked for it; the event thread may
  // not have got to it) is asked for once more and waited for, so that the
  // round names it as it would have been named a moment later.
  std::unordered_set<uint32_t> unknown;
  for (const auto& [key, count] : round_.counts) {
    if (!known->find(static_cast<int32_t>(key.pid)) && unknown.insert(key.pid).second) {
      event_loop_->post(omniprof_event{OMNIPROF_EVENT_PROCESS_UNKNOWN, key.pid, 0});
    }
  }
  if (unknown.empty()) return known;
  if (!event_loop_->wait_for_posted(kUnknownProcessesWait)) {
    log().warn("{} processes of this round not read after {} s: their samples are not named", unknown.size(),
               kUnknownProcessesWait.count() / 1000);
  }
  return processes_->snapshot();
}

std::vector<StatLine> Agent::stats() const {
  std::vector<StatLine> lines;
  if (!maps_) return lines;
  auto values = maps_->read_stats();
  if (values) {
    for (int i = 0; i < OMNIPROF_NUM_HOST_STATS; ++i) {
      if ((*values)[i]) lines.push_back({kHostStatNames[i], (*values)[i]});
    }
    for (const auto& [index, name] : plugins_->stat_names()) {
      if ((*values)[index]) lines.push_back({name, (*values)[index]});
    }
  } else {
    lines.push_back({"percpu_stats_unreadable", 1});
  }
  if (bpf_stats_fd_.valid()) {
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(bpf_program__fd(maps_->skeleton()->progs.omniprof_entry), &info, &len) == 0 &&
        info.run_cnt > 0) {
      // Tail calls run inside the program that made them: this is the
      // whole walk of a sample, entry to STOP.
      lines.push_back({"bpf.entry_runs", info.run_cnt});
      lines.push_back({"bpf.ns_per_entry_run", info.run_time_ns / info.run_cnt});
      // Idle and filtered-out runs cost next to nothing: charging all the
      // time to the samples recorded slightly overstates a walk's cost.
      if (values && (*values)[OMNIPROF_STAT_RECORDED] > 0) {
        lines.push_back({"bpf.ns_per_recorded_sample", info.run_time_ns / (*values)[OMNIPROF_STAT_RECORDED]});
      }
    }
  }
  // A map's charge is fixed when it is made, and the agent makes maps at
  // start and as unwind shards grow: the scan of every descriptor (a
  // readlink each, a bpf() per map; BpfMapMemory) is redone when a shard
  // was added, else at most once a minute.
  const auto now = std::chrono::steady_clock::now();
  const uint32_t shards = maps_->inner_maps(OMNIPROF_MAP_UNWIND_SHARDS);
  if (map_bytes_read_at_ == std::chrono::steady_clock::time_point{} || shards != map_bytes_shards_ ||
      now - map_bytes_read_at_ >= kMapBytesRefresh) {
    if (auto bytes = map_memory_.measure()) {
      map_bytes_ = *bytes;
    } else {
      // The figure is for the metrics page; say why it is stale, keep going.
      log().warn("host.bpf_map_bytes: {}", bytes.error().message);
    }
    map_bytes_read_at_ = now;
    map_bytes_shards_ = shards;
  }
  lines.push_back({"host.bpf_map_bytes", map_bytes_});
  lines.push_back({"host.plugin_ticks_on_request", ticks_on_request_.load(std::memory_order_relaxed)});
  // Ticks for a notice the full events ring lost (or counters unreadable),
  // and the periodic ones of plugins that ask for them (plugin.h: tick_flags).
  lines.push_back({"host.plugin_ticks_for_lost_events", ticks_for_lost_events_.load(std::memory_order_relaxed)});
  lines.push_back({"host.plugin_ticks_every_second", ticks_every_second_.load(std::memory_order_relaxed)});
  // Unwind shards in use, of the budget (maps.unwind_memory_mb).
  lines.push_back({"host.unwind_shards", maps_->inner_maps(OMNIPROF_MAP_UNWIND_SHARDS)});
  lines.push_back({"host.unwind_shard_budget", maps_->inner_map_budget(OMNIPROF_MAP_UNWIND_SHARDS)});
  auto ps = processes_->stats();
  const auto& as = assembler_->stats();
  auto es = executables_->stats();
  auto fs = open_executables_->stats();
  auto cs = assembler_->symbol_cache().stats();
  for (const auto& [name, value] :
       std::initializer_list<std::pair<const char*, uint64_t>>{
           {"host.processes_described", ps.described},
           {"host.processes_gone_before_read", ps.gone_before_read},
           {"host.process_info_errors", ps.process_info_errors},
           {"host.maps_refreshes", ps.maps_refreshes},
           {"host.notes_answered_by_records", ps.notes_answered_by_records},
           {"host.event_thread_wakes", event_thread_wakes_.load(std::memory_order_relaxed)},
           {"host.event_thread_paced_reads", event_thread_paced_reads_.load(std::memory_order_relaxed)},
           {"host.exec_rereads", ps.exec_rereads},
           {"host.exec_rereads_dropped", ps.exec_rereads_dropped},
           {"host.mappings_truncated", ps.mappings_truncated},
           {"host.unidentified_files", ps.unidentified_files},
           {"host.processes_described_from_records", ps.described_from_records},
           {"host.process_records", process_records_ ? process_records_->stats().records : 0},
           {"host.process_records_lost", process_records_ ? process_records_->stats().lost : 0},
           {"host.process_records_malformed", process_records_ ? process_records_->stats().malformed : 0},
           {"host.process_records_of_unknown", ps.records_of_unknown},
           {"host.process_records_dropped", ps.records_dropped},
           {"host.publishes_held_for_exec", ps.publishes_held_for_exec},
           {"host.forks_held", ps.forks_held},
           {"host.earlier_images_kept", ps.earlier_images_kept},
           {"host.earlier_images_dropped", ps.earlier_images_dropped},
           {"host.forks_copied_in_kernel", ps.forks_copied_in_kernel},
           {"host.process_record_delay_us_mean",
            ps.described_from_records ? ps.record_delay_us_total / ps.described_from_records : 0},
           {"host.process_record_delay_us_max", ps.record_delay_us_max},
           {"host.process_record_delays_under_1ms", ps.record_delays_under_1ms},
           {"host.process_record_delays_1_to_10ms", ps.record_delays_under_10ms},
           {"host.process_record_delays_10ms_or_more",
            ps.described_from_records - ps.record_delays_under_1ms - ps.record_delays_under_10ms},
           {"host.executable_files_not_kept", fs.not_kept},
           {"host.symbol_cache_hits", cs.hits},
           {"host.symbol_cache_misses", cs.misses},
           {"host.symbol_cache_evicted", cs.evicted},
           {"host.executables_loaded", es.loaded},
           {"host.executables_deferred", es.deferred},
           {"host.executable_load_failures", es.load_failures},
           {"host.executable_no_space", es.no_space},
           {"host.executable_permanent_failures", es.permanent_failures},
           {"host.executable_partial_loads", es.partial_loads},
           {"host.executables_unloaded", es.unloaded},
           {"host.executables_kept_unmapped", es.kept_unmapped},
           {"host.executables_reused", es.reused},
           {"host.executables_evicted", es.evicted},
           {"host.frames_symbolized", as.frames},
           {"host.frames_unnamed", as.unnamed_frames},
           {"host.frames_named_by_function_start", as.frames_named_by_function_start},
           {"host.function_bounds_asked", assembler_->function_start_cache().stats().asked},
           {"host.function_bounds_cache_cleared", assembler_->function_start_cache().stats().cleared},
           {"host.symbolizer_errors", as.symbolizer_errors},
           {"host.interpreter_frames_unreadable", as.unreadable_interpreter_frames},
           {"host.interpreter_internal_frames_folded", as.folded_frames},
           {"host.samples_of_unknown_processes", as.unknown_processes},
           {"host.stacks_missing", round_.missing_stacks},
           {"host.samples_without_times", sample_time_stats_.untimed},
           {"host.sample_times_unmatched", sample_time_stats_.unmatched},
           {"host.drains", drains_},
           {"host.drains_for_filling_maps", drains_for_filling_maps_},
           {"host.drains_for_exits", drains_for_exits_},
           {"host.drains_for_unreadable_counters", drains_for_unreadable_counters_},
           // run's looks at BPF's totals between round ends, and the
           // DRAIN_DUE events among what woke it for them.
           {"host.drain_looks", collect_looks_},
           {"host.drain_notices", drain_notices_.load(std::memory_order_relaxed)},
           {"host.drain_errors", drain_errors_},
           {"host.event_errors", event_loop_ ? event_loop_->event_errors() : 0},
           {"host.event_poll_errors", event_loop_ ? event_loop_->poll_errors() : 0}}) {
    if (value) lines.push_back({name, value});
  }
  return lines;
}

}  // namespace omniprof
