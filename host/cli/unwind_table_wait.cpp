#include "cli/unwind_table_wait.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "agent/agent.h"
#include "log/logger.h"

namespace omniprof {

namespace {

// The files not ready yet, by name, at most `shown` of them.
std::string waiting_list(const std::vector<std::string>& waiting, size_t shown) {
  std::string text;
  for (size_t i = 0; i < waiting.size() && i < shown; ++i) text += (i ? ", " : "") + waiting[i];
  if (waiting.size() > shown) text += fmt::format(" and {} more", waiting.size() - shown);
  return text;
}

std::string progress_line(const Agent::StartupProgress& progress) {
  if (!progress.files_known) return "loading unwind tables: reading processes";
  std::string line = fmt::format("loading unwind tables: {}/{}", progress.settled, progress.total);
  if (!progress.building.empty()) {
    line += fmt::format(" ({})", std::filesystem::path(progress.building).filename().string());
  }
  return line;
}

}  // namespace

bool wait_for_unwind_tables(const Agent& agent, std::chrono::seconds limit, bool tty,
                            const std::atomic<bool>& stop) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + limit;
  auto last_print = start - std::chrono::seconds(1);
  std::string last_line;
  Agent::StartupProgress progress = agent.startup_progress();
  while (!progress.ready && !stop && std::chrono::steady_clock::now() < deadline) {
    std::string line = progress_line(progress);
    auto now = std::chrono::steady_clock::now();
    if (tty) {
      // Padded: a shorter line must cover the longer one before it.
      if (line != last_line) std::cerr << "\r" << fmt::format("{:<79}", line) << std::flush;
      last_line = line;
    } else if (line != last_line && now - last_print >= std::chrono::seconds(1)) {
      std::cerr << line << "\n";
      last_line = line;
      last_print = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    progress = agent.startup_progress();
  }
  if (tty && !last_line.empty()) std::cerr << "\r" << fmt::format("{:<79}", "") << "\r" << std::flush;
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (progress.ready) {
    log().info("unwind tables ready: {} files in {:.1f} s; samples are recorded from now on", progress.total,
               waited);
    return true;
  }
  if (stop) return false;
  if (limit.count() == 0) {
    log().info("unwind tables not waited for (startup.unwind_tables_wait_seconds: 0); recording now");
    return false;
  }
  // One line, naming what was not ready: walks through those files may stop
  // short (native.walks_table_building counts them).
  std::string what;
  if (!progress.files_known) {
    what = "the processes found at start are still being read";
  } else if (!progress.waiting.empty()) {
    what = fmt::format("{}/{} files; not ready: {}", progress.settled, progress.total,
                       waiting_list(progress.waiting, 8));
  } else {
    what = fmt::format("{}/{} files; a -p process is being read again", progress.settled, progress.total);
  }
  if (!progress.building.empty()) what += fmt::format("; building {}", progress.building);
  log().warn("unwind tables not ready after {} s ({}); recording anyway, walks through them may stop short "
             "(raise startup.unwind_tables_wait_seconds)",
             limit.count(), what);
  return false;
}

}  // namespace omniprof
