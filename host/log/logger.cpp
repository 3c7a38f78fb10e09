#include "log/logger.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace omniprof {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>(
        "omniprof", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    l->set_level(spdlog::level::info);
    return l;
  }();
  return *logger;
}

void set_log_level(const std::string& level) {
  log().set_level(spdlog::level::from_str(level));
}

}  // namespace omniprof
