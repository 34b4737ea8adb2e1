// rotor: one command, many subcommands (see src/cli/cmd_*.cpp).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "cli/command.h"
#include "cli/errors.h"
#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/signals.h"

namespace rotor::cli {
std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
}  // namespace rotor::cli

namespace {
// OpenMP threads that spin-wait between parallel regions steal the cores that
// OpenBLAS and the other OpenMP threads need: on a 2-core machine that made a
// training step 6x slower. libgomp reads OMP_WAIT_POLICY before main() runs,
// so when the user has not chosen one, rotor re-executes itself once with the
// passive policy -- and a short spin (GOMP_SPINCOUNT 20000, tens of
// microseconds, unless set) before a thread sleeps: a training step runs a
// few hundred parallel regions, and waking a sleeping thread for each cost
// 4-15 % of a tiny model's update (docs/design.md).
void ensure_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  setenv("GOMP_SPINCOUNT", "20000", 0);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with the default policy.
}

// The limits of the operating system are errors with a message, not deaths
// by signal (docs/design.md, "Errors"): past `ulimit -f` write() fails with
// EFBIG instead of SIGXFSZ killing, and a write to a pipe whose reader has
// gone fails with EPIPE instead of SIGPIPE. Each write site then names its
// file; standard output is checked once at the end (check_stdout).
void ignore_fatal_io_signals() {
  std::signal(SIGXFSZ, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
}

// A command's exit status, made 1 when what it printed could not all be
// written (a full disk, a closed pipe, `> /dev/full`): such output is lost,
// and a script must not take it for a result.
int check_stdout(int status) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && !std::ferror(stdout)) return status;
  std::fprintf(stderr, "rotor: error: cannot write standard output: %s\n",
               !flushed && err != 0 ? std::strerror(err) : "an earlier write failed");
  std::fflush(stderr);
  return status == 0 ? 1 : status;
}
}  // namespace

int main(int argc, char** argv) {
  ensure_passive_openmp(argv);
  // Before any thread starts: SIGTERM/SIGINT/SIGHUP are taken by one thread
  // that never runs a GEMM (parallel/signals.h says why).
  rotor::parallel::route_stop_signals();
  ignore_fatal_io_signals();
  using namespace rotor::cli;
  CLI::App app{"rotor: train Transformers with rotary position embedding", "rotor"};
  app.set_version_flag("--version", std::string("rotor ") + ROTOR_VERSION);
  app.require_subcommand(1);
  auto specs = command_registry();
  std::sort(specs.begin(), specs.end(),
            [](const CommandSpec& a, const CommandSpec& b) { return a.order < b.order; });
  std::function<int()> action;
  for (auto& spec : specs) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.description);
    auto run = spec.setup(*sub);
    // The command's name is the default activity of an out-of-memory message.
    sub->callback([&action, run, name = spec.name] {
      action = [run, name] {
        Activity activity("rotor " + name);
        return run();
      };
    });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // One line in rotor's words, exit 2 (--help and --version: 0).
    return check_stdout(report_parse_error(app, e, argc, argv));
  }
  try {
    return check_stdout(action ? action() : 0);
  } catch (const std::exception& e) {
    report_exception(e);  // one line; std::bad_alloc as "out of memory (what was being done)"
    rotor::parallel::finalize(1);  // in a distributed run, take the other ranks down too
    return 1;
  }
}
