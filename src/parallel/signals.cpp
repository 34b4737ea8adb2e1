#include "parallel/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <thread>
#include <vector>

#include "parallel/communicator.h"

namespace rotor::parallel {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_installed = 0;
bool g_routed = false;
sigset_t g_original_mask;

// The stop signals: SIGHUP is a closed terminal or ssh session, or `rotor
// launch` forwarding one: a stop with a checkpoint as for SIGTERM
// (docs/distributed.md).
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

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

void route_stop_signals() {
  if (g_routed) return;
  g_routed = true;
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, &g_original_mask);
  // The receiver: the only thread that leaves them unblocked. A second
  // signal's default action (rotor_stop_handler raises it here) ends the
  // whole process, as a default action on any thread does.
  std::thread([set] {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    for (;;) ::pause();
  }).detach();
}

void restore_signal_mask_in_child() {
  if (g_routed) sigprocmask(SIG_SETMASK, &g_original_mask, nullptr);
}

void install_stop_handlers() {
  if (g_installed) return;
  g_installed = 1;
  struct sigaction sa {};
  sa.sa_handler = rotor_stop_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : kStopSignals) sigaction(sig, &sa, nullptr);
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
