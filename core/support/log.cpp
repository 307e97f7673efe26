#include "ninfer/support/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace ninfer {

void init_logging(bool verbose) {
  auto logger = spdlog::stderr_color_mt("ninfer");
  logger->set_pattern("[%^%l%$] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
}

} // namespace ninfer
