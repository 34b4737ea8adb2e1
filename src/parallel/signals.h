// Graceful stop on SIGTERM, SIGINT and SIGHUP (docs/design.md, "Distributed
// training").
//
//   parallel::install_stop_handlers();            // once, early in `rotor train`
//   ...
//   // between updates, on every rank (a collective when world_size > 1):
//   if (parallel::agree_stop(comm)) { save_checkpoint(...); break; }
//
// The handler only sets an async-signal-safe flag; a second signal of the same
// kind takes the default action, so pressing Ctrl-C twice still kills (even a
// process blocked in a restarted system call).
// SLURM sends SIGTERM to every task KillWait seconds (default 30) before
// SIGKILL; `#SBATCH --signal=TERM@120` asks for an earlier warning.
#pragma once

namespace rotor::parallel {

class Communicator;

// Installs the SIGTERM, SIGINT and SIGHUP handlers (idempotent).
void install_stop_handlers();
// True once SIGTERM, SIGINT or SIGHUP reached this process (or request_stop ran).
bool stop_requested();
// The signal that set the flag (0 when none, -1 for request_stop).
int stop_signal();
// Sets the flag by hand (tests, or a trainer-side reason to stop).
void request_stop();
void clear_stop_request();

// The flag agreed across ranks (an all-reduce of max): true on every rank when
// any rank saw a signal, so all ranks stop after the same update. Call it at
// the same point of every update on every rank.
bool agree_stop(Communicator& comm);

}  // namespace rotor::parallel
