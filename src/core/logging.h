// Logging (docs/design.md, "Logging and metrics"): one shared spdlog logger writing to stderr
// (colored when stderr is a terminal) and, optionally, to OUTPUT_DIR/train.log.
//
//   rotor::setup_logging({.level = "info", .file = out_dir + "/train.log", .rank = rank});
//   rotor::log().info("step {} loss {:.4f}", step, loss);
//
// Call it rotor::log() qualified or from inside namespace rotor: inside the
// namespace it hides ::log(double), so write std::log for the logarithm.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

namespace rotor {

struct LogOptions {
  std::string level = "info";  // trace | debug | info | warn | error | off
  std::string file;            // "" = console only; appended to, parent directories created
  int rank = 0;                // this process's rank in a distributed run
  int world_size = 1;          // > 1 prefixes every line with the rank
  bool only_rank0 = true;      // mute every rank but 0 (their errors still print)
};

// (Re)configures the shared logger. Safe to call more than once (e.g. first
// console-only, then with the file once the output directory is known).
// A bad level or an unopenable file is a rotor::Error.
void setup_logging(const LogOptions& options);

// The shared logger. Before setup_logging it logs info and above to stderr.
spdlog::logger& log();

// "trace", "debug", "info", "warn" (or "warning"), "error", "off" -> level;
// anything else is a rotor::Error naming the accepted values.
spdlog::level::level_enum parse_log_level(std::string_view name);

void set_log_level(std::string_view name);

// Flushes the console and file sinks (before exiting, or a crash-prone step).
void flush_log();

}  // namespace rotor
