// The host's logger. One named spdlog logger owned by the host; plugins log
// through the host API (spdlog's registry is per shared object, so a plugin's
// own spdlog calls would not reach the host's sinks).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace omniprof {

spdlog::logger& log();
// "debug", "info", "warn", "error"; unknown names are rejected by the config.
void set_log_level(const std::string& level);

}  // namespace omniprof
