#include "parallel/signals.h"

#include <csignal>
#include <vector>

#include "parallel/communicator.h"

namespace rotor::parallel {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_installed = 0;

// The second signal of a kind takes the default action at once (the signal
// raised here is delivered when the handler returns): a process blocked in a
// system call that SA_RESTART resumes (open() of a FIFO) still ends.
extern "C" void rotor_stop_handler(int sig) {
  if (g_stop_signal == sig) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_stop_signal = sig;
}
}  // namespace

void install_stop_handlers() {
  if (g_installed) return;
  g_installed = 1;
  struct sigaction sa {};
  sa.sa_handler = rotor_stop_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  // A closed terminal or ssh session, and `rotor launch` forwarding one:
  // stop with a checkpoint as for SIGTERM (docs/distributed.md).
  sigaction(SIGHUP, &sa, nullptr);
}

bool stop_requested() {
  return g_stop_signal != 0;
}
int stop_signal() {
  return g_stop_signal;
}
void request_stop() {
  g_stop_signal = -1;
}
void clear_stop_request() {
  g_stop_signal = 0;
}

bool agree_stop(Communicator& comm) {
  std::vector<double> flag{stop_requested() ? 1.0 : 0.0};
  comm.all_reduce_host(flag, ReduceOp::Max);
  return flag[0] != 0.0;
}

}  // namespace rotor::parallel
