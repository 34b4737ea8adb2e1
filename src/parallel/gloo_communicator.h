// GlooCommunicator: CPU tensors over Gloo's TCP transport (Debian's
// libgloo-dev), for ranks that met through a file rendezvous (rendezvous.h)
// instead of MPI: srun without PMIx, `rotor launch`, torchrun-style launchers.
//
// Gloo's collectives block the calling thread, so one worker thread runs them
// all, in the order they were issued: all_reduce_async returns at once and
// backward keeps computing while the bucket is reduced (data_parallel.h), and
// every blocking collective queues behind the asynchronous ones, as the
// interface's single ordered stream of collectives demands.
//
// Failures. Every Gloo operation has the communicator's timeout. When one
// fails (a peer's connection closed, or the timeout passed) the worker closes
// all of this rank's connections at once, so that ranks blocked on this one
// fail too instead of waiting out their own timeouts. The rank then writes
// "fault-R = SEQ" to the rendezvous store, waits a grace period for the
// other ranks' records and ends the job with the one line the MPI watchdog
// prints, naming the ranks that never wrote one (dead, or hung outside a
// collective) and those that were behind:
//   rotor: error: rank 0: collective all_reduce #12 failed: Connection closed by peer (rank(s) 1
//   did not answer)
#pragma once

#if ROTOR_WITH_GLOO

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/rendezvous.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace rotor::parallel {

class GlooCommunicator final : public HostCommunicator {
 public:
  // Connects this rank to the others of `rendezvous` (a collective: every rank
  // constructs one). `loopback`: every rank runs on this node, so Gloo listens
  // on 127.0.0.1; otherwise on GLOO_SOCKET_IFNAME's address, else on the
  // address the host name resolves to.
  GlooCommunicator(std::shared_ptr<Rendezvous> rendezvous, int local_rank, bool loopback,
                   double timeout_s);
  ~GlooCommunicator() override;
  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string backend() const override { return "gloo"; }
  Device device() const override { return Device::cpu(); }

  void all_reduce_sum(Tensor& t) override;
  Handle all_reduce_async(Tensor t) override;
  void reduce_scatter_sum(const Tensor& in, Tensor& out_shard) override;
  void all_gather(const Tensor& shard, Tensor& out) override;
  void broadcast(Tensor& t, int root) override;
  void barrier() override;
  void all_reduce_host(std::vector<double>& values, ReduceOp op = ReduceOp::Sum) override;
  void broadcast_bytes(std::vector<uint8_t>& bytes, int root) override;
  [[noreturn]] void abort(const std::string& message, int code = 1) override;

  uint64_t next_seq() override { return ++seq_; }
  void wait_until(const std::function<bool()>& test, const char* what, uint64_t seq,
                  const std::function<void()>& on_timeout = {}) override;

  // Ranks with the same color form a new communicator, ordered by key (a
  // collective over this one). color < 0: this rank joins none (nullptr).
  std::unique_ptr<GlooCommunicator> split(int color, int key);

  // Internal (the handles): one collective queued for the worker thread.
  struct Job {
    const char* what;
    uint64_t seq;
    std::function<void()> run;
    Tensor keep;  // holds an asynchronous collective's buffer alive
    // Under the communicator's mutex:
    bool started = false, done = false, timed_out = false;
    std::chrono::steady_clock::time_point start;
    std::string error;
  };
  void wait_job(Job& job);
  bool job_done(Job& job);

 private:
  // A sub-communicator of `parent`'s job: `rank` of `size`, keys under `name`.
  GlooCommunicator(const GlooCommunicator& parent, int rank, int size, const std::string& name);
  void connect();
  std::shared_ptr<Job> submit(const char* what, std::function<void()> run, Tensor keep = {});
  void run_and_wait(const char* what, std::function<void()> run);
  void worker_loop();
  [[noreturn]] void report(const char* what, uint64_t seq, const std::string& cause, bool timed_out,
                           double waited);

  std::shared_ptr<Rendezvous> rendezvous_;
  std::shared_ptr<gloo::transport::Device> transport_;
  std::shared_ptr<gloo::Context> context_;
  std::string name_;  // separates this communicator's keys in the store
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  uint64_t seq_ = 0;

  std::thread worker_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  bool busy_ = false;
  // Worker only: the failure that broke the connections; reduce_scatter's scratch.
  std::string first_error_;
  std::vector<float> acc_, tmp_;
};

}  // namespace rotor::parallel

#endif  // ROTOR_WITH_GLOO
