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
//
// Where the handler runs. oneDNN 2.6's sgemm corrupts the heap when a signal
// handler runs on the thread inside it (a free() that aborts with
// "corrupted size vs. prev_size" soon after; a loop of dnnl_sgemm under a
// 50 us interval timer aborts within 0.1 s, with no rotor code involved), and
// a stop signal lands on whichever thread does not block it: the main thread
// or an OpenMP worker, mostly inside a GEMM. So main() calls
// route_stop_signals() before any thread exists: every thread blocks
// SIGTERM, SIGINT and SIGHUP except one that only waits for them, and the
// handler installed (the stop flag, the launcher's forwarder, or the default
// action, which ends the process as before) runs there.
#pragma once

namespace rotor::parallel {

class Communicator;

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (threads it starts
// inherit that) and starts the one thread that takes them. Call once, first
// thing in main(), before any other thread is started. Idempotent.
void route_stop_signals();
// In a child between fork() and exec: the signal mask the process had before
// route_stop_signals (async-signal-safe), so that a program started by rotor
// (`rotor launch --exec`) is not born deaf to SIGTERM.
void restore_signal_mask_in_child();

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
