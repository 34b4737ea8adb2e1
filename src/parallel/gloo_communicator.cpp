#include "parallel/gloo_communicator.h"

#if ROTOR_WITH_GLOO

#include <fmt/format.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rotor::parallel {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Gloo's messages start with "[/path/file.cc:LINE] ": the user needs the rest.
std::string clean_message(std::string m) {
  while (!m.empty() && m[0] == '[') {
    const size_t close = m.find("] ");
    if (close == std::string::npos || m.find(':') > close) break;
    m.erase(0, close + 2);
  }
  std::replace(m.begin(), m.end(), '\n', ' ');
  return m;
}

bool is_timeout(const std::string& m) {
  return m.find("Timed out") != std::string::npos || m.find("timeout") != std::string::npos;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// Gloo's connectFullMesh exchanges every pair's address through this store:
// keys "rank_R" (host names) and "R" (addresses) under the communicator's
// prefix. The ranks have all met already, so a key that does not come means
// its rank died in between.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(Rendezvous& r, std::string prefix) : r_(r), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    r_.store().set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    auto v = r_.store().get(prefix_ + key);
    if (!v) missing(key);
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    auto left = r_.store().wait(full, r_.timeout_seconds());
    if (!left.empty()) missing(left.front().substr(prefix_.size()));
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    wait(keys);
  }

 private:
  [[noreturn]] void missing(const std::string& key) {
    const std::string rank = key.rfind("rank_", 0) == 0 ? key.substr(5) : key;
    ROTOR_FAIL("rendezvous {}: rank {} did not publish its Gloo address within {:.0f} s",
               r_.describe(), rank, r_.timeout_seconds());
  }
  Rendezvous& r_;
  std::string prefix_;
};

}  // namespace

GlooCommunicator::GlooCommunicator(std::shared_ptr<Rendezvous> rendezvous, int local_rank,
                                   bool loopback, double timeout_s)
    : rendezvous_(std::move(rendezvous)), name_("world"), local_rank_(local_rank) {
  ROTOR_CHECK(rendezvous_, "GlooCommunicator without a rendezvous");
  rank_ = rendezvous_->rank();
  size_ = rendezvous_->world_size();
  timeout_s_ = timeout_s > 0 ? timeout_s : default_timeout_seconds();
  // Gloo writes to sockets with writev: a peer that died must be an error of
  // the collective (EPIPE), not a SIGPIPE that kills this rank unnamed.
  std::signal(SIGPIPE, SIG_IGN);
  gloo::transport::tcp::attr attr;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    attr.iface = ifname;
  else if (loopback)
    attr.hostname = "127.0.0.1";
  try {
    transport_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    ROTOR_FAIL(
        "rank {}: Gloo cannot listen on {}: {} (set GLOO_SOCKET_IFNAME to the interface "
        "the nodes reach each other by)",
        rank_,
        attr.iface.empty() ? (attr.hostname.empty() ? "this host's name" : attr.hostname)
                           : "interface " + attr.iface,
        clean_message(e.what()));
  }
  // A host name that resolves to a loopback address (Debian's /etc/hosts maps
  // it to 127.0.1.1) works on one node only: say so before a connection to
  // another node times out.
  const std::string where = transport_->str();
  if (!loopback && attr.iface.empty() &&
      (where.find("addr=[127.") != std::string::npos ||
       where.find("addr=[::1]") != std::string::npos))
    std::fprintf(stderr,
                 "rotor: warning: rank %d: Gloo listens on a loopback address (%s): ranks on other "
                 "nodes cannot reach it; set GLOO_SOCKET_IFNAME to the interface they share\n",
                 rank_, where.c_str());
  connect();
}

GlooCommunicator::GlooCommunicator(const GlooCommunicator& parent, int rank, int size,
                                   const std::string& name)
    : rendezvous_(parent.rendezvous_),
      transport_(parent.transport_),
      name_(name),
      rank_(rank),
      size_(size),
      local_rank_(parent.local_rank_) {
  timeout_s_ = parent.timeout_s_;
  connect();
}

void GlooCommunicator::connect() {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
  context->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000)));
  StoreAdapter store(*rendezvous_, "gloo-" + name_ + "-");
  try {
    context->connectFullMesh(store, transport_);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    ROTOR_FAIL("rank {}: connecting Gloo through rendezvous {} failed: {}", rank_,
               rendezvous_->describe(), clean_message(e.what()));
  }
  context_ = std::move(context);
  worker_ = std::thread([this] { worker_loop(); });
}

GlooCommunicator::~GlooCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  // Every handle waits for its job, so the queue is empty and the worker idle.
  if (worker_.joinable()) worker_.join();
  context_.reset();
}

// ---- the worker -------------------------------------------------------------

std::shared_ptr<GlooCommunicator::Job> GlooCommunicator::submit(const char* what,
                                                                std::function<void()> run,
                                                                Tensor keep) {
  auto job = std::make_shared<Job>();
  job->what = what;
  job->seq = next_seq();
  job->run = std::move(run);
  job->keep = std::move(keep);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(job);
  }
  work_cv_.notify_one();
  return job;
}

void GlooCommunicator::run_and_wait(const char* what, std::function<void()> run) {
  auto job = submit(what, std::move(run));
  wait_job(*job);
}

void GlooCommunicator::worker_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
      job->started = true;
      job->start = Clock::now();
    }
    std::string error;
    bool timed_out = false;
    if (!first_error_.empty()) {
      error = "an earlier collective failed: " + first_error_;
    } else {
      try {
        job->run();
      } catch (const std::exception& e) {
        error = clean_message(e.what());
        timed_out = is_timeout(error);
      }
      if (!error.empty()) {
        // Peers blocked on this rank fail now instead of at their deadline.
        first_error_ = error;
        try {
          context_->closeConnections();
        } catch (...) {
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job->error = error;
      job->timed_out = timed_out;
      job->done = true;
    }
    done_cv_.notify_all();
  }
}

bool GlooCommunicator::job_done(Job& job) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!job.done) return false;
  if (!job.error.empty()) {
    const std::string error = job.error;
    const double waited = seconds_since(job.start);
    lock.unlock();
    report(job.what, job.seq, error, job.timed_out, waited);
  }
  return true;
}

void GlooCommunicator::wait_job(Job& job) {
  std::unique_lock<std::mutex> lock(mu_);
  // Gloo's own timeout ends a stuck operation; this deadline only guards
  // against an operation that never returns at all.
  const double backstop = timeout_s_ + 30.0;
  while (!job.done) {
    done_cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (!job.done && job.started && seconds_since(job.start) > backstop) {
      const double waited = seconds_since(job.start);
      lock.unlock();
      report(job.what, job.seq, "no progress", true, waited);
    }
  }
  lock.unlock();
  job_done(job);
}

void GlooCommunicator::wait_until(const std::function<bool()>& test, const char* what, uint64_t seq,
                                  const std::function<void()>& on_timeout) {
  const auto t0 = Clock::now();
  int spins = 0;
  while (!test()) {
    const double waited = seconds_since(t0);
    if (waited > timeout_s_) {
      if (on_timeout) on_timeout();
      report(what, seq, "", true, waited);
    }
    // Spin briefly (latency), then back off (ranks may share cores).
    if (++spins < 200)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(spins < 2000 ? 20 : 200));
  }
}

void GlooCommunicator::report(const char* what, uint64_t seq, const std::string& cause,
                              bool timed_out, double waited) {
  // Every rank that fails writes where it stopped; a rank that never writes
  // within the grace period is dead, or hung outside a collective.
  std::string who;
  try {
    FileStore& store = rendezvous_->store();
    auto key = [&](int r) { return "fault-" + name_ + "-" + std::to_string(r); };
    store.set(key(rank_), std::to_string(seq));
    const double grace = std::clamp(0.2 * timeout_s_, 0.5, 5.0);
    std::vector<int64_t> seen(static_cast<size_t>(size_), -1);
    seen[static_cast<size_t>(rank_)] = static_cast<int64_t>(seq);
    const auto t0 = Clock::now();
    for (;;) {
      bool all = true;
      for (int r = 0; r < size_; ++r) {
        if (seen[static_cast<size_t>(r)] >= 0) continue;
        if (auto v = store.get(key(r)))
          seen[static_cast<size_t>(r)] = std::atoll(v->c_str());
        else
          all = false;
      }
      if (all || seconds_since(t0) > grace) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::vector<int> silent, behind;
    for (int r = 0; r < size_; ++r) {
      const int64_t s = seen[static_cast<size_t>(r)];
      if (s < 0)
        silent.push_back(r);
      else if (s < static_cast<int64_t>(seq))
        behind.push_back(r);
    }
    if (!silent.empty()) who = fmt::format("rank(s) {} did not answer", rank_list(silent));
    if (!behind.empty())
      who +=
          fmt::format("{}rank(s) {} did not reach it", who.empty() ? "" : "; ", rank_list(behind));
    if (who.empty()) who = "every rank answered: mismatched collectives or a stuck network";
  } catch (const std::exception& e) {
    who = std::string("the rendezvous store failed too: ") + e.what();
  }
  if (timed_out)
    fatal(rank_,
          fmt::format("collective {} #{} timed out after {:.0f} s ({})", what, seq, waited, who));
  fatal(rank_, fmt::format("collective {} #{} failed: {} ({})", what, seq, cause, who));
}

void GlooCommunicator::abort(const std::string& message, int code) {
  fatal(rank_, message, code);
}

}  // namespace rotor::parallel

#endif  // ROTOR_WITH_GLOO
