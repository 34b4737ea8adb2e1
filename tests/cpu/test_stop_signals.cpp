// Stop signals and the CPU GEMM (parallel/signals.h). oneDNN 2.6's sgemm
// corrupts the heap when a signal handler runs on its thread mid-product;
// `rotor train` then died of "corrupted size vs. prev_size" in about one
// SIGTERM in ten. route_stop_signals() leaves one thread to take SIGTERM,
// SIGINT and SIGHUP, so the threads that compute never run a handler.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include "ops/cpu_gemm.h"
#include "parallel/signals.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using Clock = std::chrono::steady_clock;

bool blocked_here(int sig) {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, nullptr, &cur);
  return sigismember(&cur, sig) == 1;
}

// C = A B by loops, the reference the products under signals must still equal.
std::vector<float> reference(const std::vector<float>& a, const std::vector<float>& b, int m, int n,
                             int k) {
  std::vector<float> c(static_cast<size_t>(m) * n, 0.0f);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p)
      for (int j = 0; j < n; ++j)
        c[static_cast<size_t>(i) * n + j] +=
            a[static_cast<size_t>(i) * k + p] * b[static_cast<size_t>(p) * n + j];
  return c;
}

TEST(StopSignals, GemmsRunThroughAStormOfStopSignals) {
  parallel::route_stop_signals();
  parallel::install_stop_handlers();
  parallel::clear_stop_request();
  EXPECT_TRUE(blocked_here(SIGTERM));
  EXPECT_TRUE(blocked_here(SIGINT));
  EXPECT_TRUE(blocked_here(SIGHUP));

  // The shapes of a tiny translation model's products (d_model 32, d_ff 64,
  // vocabulary 120, up to 256 tokens), as the crashes had them.
  struct Shape {
    int m, n, k;
  };
  const std::vector<Shape> shapes = {{256, 32, 32}, {256, 64, 32}, {256, 120, 32}, {32, 32, 256},
                                     {64, 32, 256}, {17, 200, 31}, {200, 17, 64}};
  std::vector<std::vector<float>> as, bs, want;
  for (const Shape& s : shapes) {
    std::vector<float> a = test::random_floats(static_cast<size_t>(s.m) * s.k, 1);
    std::vector<float> b = test::random_floats(static_cast<size_t>(s.k) * s.n, 2);
    want.push_back(reference(a, b, s.m, s.n, s.k));
    as.push_back(std::move(a));
    bs.push_back(std::move(b));
  }

  // The sender: one SIGTERM at a time to the whole process, the next only
  // once the products' loop has seen the flag and cleared it (a second
  // signal while the flag is up takes the default action). It blocks the
  // signal itself, so that without routing the signals would land on the
  // thread running the products.
  constexpr int kSignals = 2000;
  std::atomic<bool> done{false}, stuck{false};
  std::atomic<int> sent{0}, seen{0};
  std::thread sender([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    const auto t0 = Clock::now();
    for (int i = 0; i < kSignals && Clock::now() - t0 < std::chrono::seconds(10); ++i) {
      const int before = seen.load();
      ::kill(::getpid(), SIGTERM);
      sent = i + 1;
      const auto wait_from = Clock::now();
      while (seen.load() == before) {
        if (Clock::now() - wait_from > std::chrono::seconds(5)) {
          stuck = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      if (stuck) break;
    }
    done = true;
  });

  size_t products = 0;
  bool equal = true;
  std::vector<float> c;
  while (!done) {
    const size_t i = products++ % shapes.size();
    const Shape& s = shapes[i];
    c.assign(static_cast<size_t>(s.m) * s.n, -1.0f);
    ops::cpu_sgemm(CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, as[i].data(), s.k, bs[i].data(),
                   s.n, 0.0f, c.data(), s.n);
    if (test::max_rel_error(c, want[i]) > 1e-4) equal = false;
    if (parallel::stop_requested()) {
      EXPECT_EQ(parallel::stop_signal(), SIGTERM);
      parallel::clear_stop_request();  // before the count: the sender's next signal waits on it
      ++seen;
    }
  }
  sender.join();
  EXPECT_FALSE(stuck) << "a SIGTERM never set the stop flag";
  EXPECT_TRUE(equal) << "a product under signals differs from the loops' result";
  EXPECT_EQ(seen.load(), sent.load());
  EXPECT_GT(sent.load(), 100) << "too few signals for the test to mean anything";
  EXPECT_GT(products, 100u);
  RecordProperty("signals", sent.load());
  RecordProperty("products", static_cast<int>(products));
}

TEST(StopSignals, AChildGetsTheMaskOfBeforeRouting) {
  parallel::route_stop_signals();
  ASSERT_TRUE(blocked_here(SIGTERM));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    parallel::restore_signal_mask_in_child();
    ::_exit(blocked_here(SIGTERM) || blocked_here(SIGINT) || blocked_here(SIGHUP) ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a program rotor starts would be born deaf to SIGTERM";
}

}  // namespace
}  // namespace rotor
