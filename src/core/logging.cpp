#include "core/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <filesystem>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace rotor {
namespace {

constexpr const char* kPattern = "%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v";

std::mutex& logger_mutex() {
  static std::mutex m;
  return m;
}

std::shared_ptr<spdlog::logger>& logger_slot() {
  static std::shared_ptr<spdlog::logger> logger;
  return logger;
}

std::shared_ptr<spdlog::logger> make_logger(const LogOptions& o) {
  std::vector<spdlog::sink_ptr> sinks;
  auto console =
      std::make_shared<spdlog::sinks::stderr_color_sink_mt>(spdlog::color_mode::automatic);
  sinks.push_back(console);
  bool muted = o.only_rank0 && o.rank != 0;
  if (!o.file.empty() && !muted) {
    std::filesystem::path parent = std::filesystem::path(o.file).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    try {
      sinks.push_back(
          std::make_shared<spdlog::sinks::basic_file_sink_mt>(o.file, /*truncate=*/false));
    } catch (const spdlog::spdlog_ex& e) {
      ROTOR_FAIL("cannot open log file {}: {}", o.file, e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("rotor", sinks.begin(), sinks.end());
  std::string pattern = kPattern;
  if (o.world_size > 1) pattern = fmt::format("%Y-%m-%d %H:%M:%S.%e [rank {}] %^%-5l%$ %v", o.rank);
  logger->set_pattern(pattern);
  auto level = parse_log_level(o.level);
  // Muted ranks still report errors: a failure on rank 3 must not be silent.
  logger->set_level(muted ? std::max(level, spdlog::level::err) : level);
  // Training logs are a few lines a second at most: flush each, so that a
  // killed run keeps its log.
  logger->flush_on(spdlog::level::info);
  return logger;
}

}  // namespace

spdlog::level::level_enum parse_log_level(std::string_view name) {
  if (name == "trace") return spdlog::level::trace;
  if (name == "debug") return spdlog::level::debug;
  if (name == "info") return spdlog::level::info;
  if (name == "warn" || name == "warning") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  if (name == "off") return spdlog::level::off;
  ROTOR_FAIL("unknown log level \"{}\" (expected trace, debug, info, warn, error or off)", name);
}

void setup_logging(const LogOptions& options) {
  auto logger = make_logger(options);
  std::lock_guard<std::mutex> lock(logger_mutex());
  if (auto& old = logger_slot()) {
    old->flush();
    // References from log() may still be in use on other threads: keep the
    // old logger alive (a handful of setups per process at most).
    static std::vector<std::shared_ptr<spdlog::logger>> retired;
    retired.push_back(old);
  }
  logger_slot() = std::move(logger);
}

spdlog::logger& log() {
  std::lock_guard<std::mutex> lock(logger_mutex());
  auto& slot = logger_slot();
  if (!slot) slot = make_logger(LogOptions{});
  return *slot;
}

void set_log_level(std::string_view name) {
  log().set_level(parse_log_level(name));
}

void flush_log() {
  log().flush();
}

}  // namespace rotor
