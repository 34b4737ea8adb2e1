// `rotor launch [-n N] [--] train CONFIG ...`: N local ranks without mpirun
// (docs/distributed.md, "The local launcher").
//
// Each rank is this rotor binary (or, with --exec, any program) with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, a fresh rendezvous directory
// (ROTOR_RENDEZVOUS=file:DIR) and run id (ROTOR_RUN_ID) in its environment,
// and, unless set already, OMP_NUM_THREADS = its share of the cores. The
// ranks meet through the file store and connect Gloo (CPU) or NCCL (GPU).
//
// The launcher forwards SIGINT, SIGTERM and SIGHUP to every rank, once per
// signal it receives (the ranks run in their own process group, so a
// terminal's Ctrl-C reaches them only through it): `rotor train` agrees to stop
// on every rank, saves and exits 0. When a rank fails (non-zero exit, killed by
// a signal) the launcher names it, sends SIGTERM to the others, SIGKILL after
// --grace seconds, and exits with the failed rank's status (128 + signal when
// killed). Ranks die with the launcher (PR_SET_PDEATHSIG).
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "core/device.h"
#include "core/error.h"
#include "parallel/rendezvous.h"
#include "parallel/signals.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct LaunchArgs {
  int nproc = 0;
  bool exec = false;
  double grace = 10.0;
  bool quiet = false;
  std::vector<std::string> command;
};

// Signals received by the launcher and not yet forwarded (SIGINT, SIGTERM, SIGHUP).
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
volatile std::sig_atomic_t g_received[3] = {0, 0, 0};

extern "C" void launcher_signal(int sig) {
  for (int i = 0; i < 3; ++i)
    if (kForwarded[i] == sig) g_received[i] = g_received[i] + 1;
}

// Launcher variables of other launchers that would win over RANK/WORLD_SIZE
// (parallel/environment.h): a launch inside mpirun must not inherit them.
bool scrubbed(const std::string& entry) {
  static const char* names[] = {"OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK",
                                "OMPI_COMM_WORLD_LOCAL_SIZE",
                                "PMI_RANK",
                                "PMI_SIZE",
                                "MPI_LOCALRANKID",
                                "MPI_LOCALNRANKS"};
  for (const char* n : names) {
    const size_t len = std::strlen(n);
    if (entry.compare(0, len, n) == 0 && entry.size() > len && entry[len] == '=') return true;
  }
  return false;
}

std::string status_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// PROGRAM as execve needs it: a path, searched in PATH when it has no '/'.
std::string resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    size_t colon = dirs.find(':', pos);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string dir = dirs.substr(pos, colon - pos);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    pos = colon + 1;
  }
  ROTOR_FAIL("launch: {} not found in PATH", program);
}

std::string self_executable() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) ROTOR_FAIL("launch: cannot find the rotor binary (/proc/self/exe: {})", ec.message());
  return p.string();
}

struct Child {
  int rank;
  pid_t pid = -1;
  bool running = false;
};

// Forks rank `rank` with `argv` and `env` prepared beforehand: the child only
// calls async-signal-safe functions before execve.
pid_t spawn(const std::string& program, const std::vector<std::string>& args,
            const std::vector<std::string>& env, pid_t launcher) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string failed = "rotor: error: launch: cannot run " + program + "\n";
  const pid_t pid = ::fork();
  if (pid < 0) ROTOR_FAIL("launch: fork failed: {}", std::strerror(errno));
  if (pid > 0) ::setpgid(pid, pid);  // also here: signals may come before the child runs
  if (pid == 0) {
    ::setpgid(0, 0);  // the terminal's signals reach the launcher, which forwards them
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(1);  // the launcher died before prctl
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : kForwarded) ::sigaction(sig, &dfl, nullptr);
    rotor::parallel::restore_signal_mask_in_child();
    ::execve(program.c_str(), argv.data(), envp.data());
    [[maybe_unused]] const ssize_t written = ::write(2, failed.data(), failed.size());
    ::_exit(127);
  }
  return pid;
}

int run_launch(const LaunchArgs& a, const std::vector<std::string>& command) {
  if (command.empty())
    ROTOR_FAIL(
        "launch: nothing to run: rotor launch -n N [--] train CONFIG ... (or --exec PROGRAM)");
  if (!a.exec) {
    const auto& reg = rotor::cli::command_registry();
    if (std::none_of(reg.begin(), reg.end(), [&](const auto& c) { return c.name == command[0]; }))
      ROTOR_FAIL("launch: '{}' is not a rotor command (--exec runs a program)", command[0]);
    if (command[0] == "launch") ROTOR_FAIL("launch: rotor launch cannot launch itself");
  }
  int n = a.nproc;
  if (n <= 0) {
    const int gpus = rotor::cuda_device_count();
    n = gpus > 0 ? gpus : 1;  // one process per GPU
  }
  // Only train and bench join the ranks into one job; any other command
  // would run N times side by side (N copies of its output, N writers of
  // its files).
  if (!a.exec && n > 1 && command[0] != "train" && command[0] != "bench")
    ROTOR_FAIL(
        "launch: rotor {} is not data-parallel: {} ranks would each run it whole; launch starts "
        "ranks of train and bench (run `rotor {}` directly)",
        command[0], n, command[0]);
  const std::string program = a.exec ? resolve_program(command[0]) : self_executable();
  std::vector<std::string> args;
  args.push_back(a.exec ? command[0] : std::string("rotor"));
  args.insert(args.end(), command.begin() + (a.exec ? 1 : 0), command.end());

  // A fresh rendezvous directory and run id: nothing stale, nothing shared.
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/rotor-launch-XXXXXX";
  if (!::mkdtemp(tmpl.data()))
    ROTOR_FAIL("launch: cannot create {}: {}", tmpl, std::strerror(errno));
  const std::string dir = tmpl;
  const std::string run_id = rotor::parallel::random_nonce();

  std::vector<std::string> base;
  for (char** e = environ; *e; ++e)
    if (!scrubbed(*e)) base.emplace_back(*e);
  std::string threads;
  if (!std::getenv("OMP_NUM_THREADS")) threads = std::to_string(std::max(1, available_cores() / n));
  if (!a.quiet)
    std::fprintf(stderr, "rotor launch: %d rank(s) of %s%s, rendezvous file:%s (run %s)\n", n,
                 args[0].c_str(), threads.empty() ? "" : (", OMP_NUM_THREADS=" + threads).c_str(),
                 dir.c_str(), run_id.c_str());

  struct sigaction sa {};
  sa.sa_handler = launcher_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) ::sigaction(sig, &sa, nullptr);

  const pid_t self = ::getpid();
  std::vector<Child> children(static_cast<size_t>(n));
  int alive = 0;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> env = base;
    auto put = [&env](const std::string& name, const std::string& value) {
      const std::string prefix = name + "=";
      std::erase_if(env,
                    [&](const std::string& e) { return e.compare(0, prefix.size(), prefix) == 0; });
      env.push_back(prefix + value);
    };
    put("RANK", std::to_string(r));
    put("WORLD_SIZE", std::to_string(n));
    put("LOCAL_RANK", std::to_string(r));
    put("LOCAL_WORLD_SIZE", std::to_string(n));
    put("ROTOR_RENDEZVOUS", "file:" + dir);
    put("ROTOR_RUN_ID", run_id);
    if (!threads.empty()) put("OMP_NUM_THREADS", threads);
    children[static_cast<size_t>(r)].rank = r;
    children[static_cast<size_t>(r)].pid = spawn(program, args, env, self);
    children[static_cast<size_t>(r)].running = true;
    ++alive;
  }

  // A rank's whole process group: the programs it started go with it.
  auto signal_all = [&](int sig) {
    for (auto& c : children)
      if (c.running && ::kill(-c.pid, sig) != 0) ::kill(c.pid, sig);
  };
  int forwarded[3] = {0, 0, 0};
  int first_failure = -1, failure_status = 0;
  Clock::time_point stopping_since;
  bool killed = false;
  while (alive > 0) {
    for (int i = 0; i < 3; ++i) {
      const int got = g_received[i];
      for (; forwarded[i] < got; ++forwarded[i]) signal_all(kForwarded[i]);
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& c : children) {
        if (c.pid != pid || !c.running) continue;
        c.running = false;
        --alive;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && first_failure < 0) {
          first_failure = c.rank;
          failure_status = status;
          std::fprintf(stderr,
                       "rotor: error: launch: rank %d (pid %d) %s; stopping the other ranks\n",
                       c.rank, static_cast<int>(pid), status_text(status).c_str());
          signal_all(SIGTERM);
          stopping_since = Clock::now();
        }
      }
    }
    if (first_failure >= 0 && !killed &&
        std::chrono::duration<double>(Clock::now() - stopping_since).count() > a.grace) {
      signal_all(SIGKILL);
      killed = true;
    }
    if (alive > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (first_failure >= 0) return exit_code_of(failure_status);
  return 0;
}

std::function<int()> setup_launch(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  app.add_option("-n,--nproc", args->nproc, "Ranks to start (default: one per GPU, else 1)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--exec", args->exec, "Run PROGRAM ARGS... instead of a rotor subcommand");
  app.add_option("--grace", args->grace,
                 "Seconds between SIGTERM and SIGKILL for the other ranks when one fails "
                 "(default 10)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-q,--quiet", args->quiet, "No start-up line");
  // Everything from the first positional on (or after `--`) belongs to the
  // ranks, options included.
  app.add_option("command", args->command,
                 "A rotor subcommand and its arguments (train CONFIG ...), or with --exec a "
                 "program and its arguments");
  app.positionals_at_end();
  app.footer(
      "Examples:\n  rotor launch -n 4 train configs/quickstart/numbers_rope.yaml\n"
      "  rotor launch -n 2 -- train CONFIG --set dist.shard_optimizer=true\n"
      "  rotor launch -n 2 --exec ./my_test --gtest_filter=Dist.*");
  return [args] { return run_launch(*args, args->command); };
}

}  // namespace

ROTOR_COMMAND("launch", "Start N local ranks of a rotor command (data-parallel without mpirun)", 15,
              setup_launch);
