// Collective communication (docs/design.md, "Distributed training"): one process per GPU, ranks
// started by mpirun, srun, `rotor launch` or any launcher that sets RANK and
// WORLD_SIZE (parallel/environment.h). Four backends behind one interface:
//   LocalCommunicator  world size 1; every collective is a no-op
//   MpiCommunicator    CPU tensors, MPI non-blocking collectives (mpi_communicator.h)
//   GlooCommunicator   CPU tensors over Gloo's TCP transport, ranks met through
//                      a file rendezvous (gloo_communicator.h, rendezvous.h)
//   NcclCommunicator   GPU tensors on a communication stream ordered against
//                      the compute stream by events; its host-side work rides
//                      on MPI or Gloo (nccl_communicator.h)
// Every collective that can wait on another rank runs under a deadline (the
// watchdog): when a rank dies or stops answering, the others print
//   rotor: error: rank R: collective X #N timed out after T s (rank(s) ... did not answer)
// and abort the job instead of hanging.
//
// Collectives must be called by every rank of the communicator in the same
// order, from one thread. Tensors are f32 and contiguous (every rotor tensor).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "parallel/environment.h"

namespace rotor::parallel {

enum class ReduceOp { Sum, Max, Min };

// The default deadline of a collective, in seconds. ROTOR_DIST_TIMEOUT (in
// seconds) overrides it when make_communicator gets timeout_s <= 0.
constexpr double kDefaultTimeoutSeconds = 300.0;

// An asynchronous collective. wait() returns when the result may be used on
// the calling thread's stream: for MPI, when the data is in place; for NCCL,
// once the compute stream is ordered after the communication (the host also
// checks the deadline). Destroying an unwaited Handle waits.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool done() = 0;  // non-blocking test
};

class Handle {
 public:
  Handle() = default;
  explicit Handle(std::unique_ptr<Work> w) : work_(std::move(w)) {}
  Handle(Handle&&) noexcept = default;
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      wait();
      work_ = std::move(o.work_);
    }
    return *this;
  }
  ~Handle() { wait(); }
  void wait() {
    if (work_) {
      auto w = std::move(work_);
      w->wait();
    }
  }
  bool done() { return !work_ || work_->done(); }
  bool pending() const { return work_ != nullptr; }

 private:
  std::unique_ptr<Work> work_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;
  virtual std::string backend() const = 0;  // "local", "mpi", "gloo", "nccl"
  // The data-parallel machinery runs (buckets, counts, broadcasts) on every
  // backend but the local one, also with one rank (`rotor launch -n 1`).
  bool communicates() const { return backend() != "local"; }
  // The device whose tensors the collectives take (cpu for local and mpi).
  virtual Device device() const = 0;
  double timeout_seconds() const { return timeout_s_; }

  // t (f32) <- the element-wise sum of t over the ranks, in place.
  virtual void all_reduce_sum(Tensor& t) = 0;
  // Starts the same; `t` must stay alive and untouched until wait().
  virtual Handle all_reduce_async(Tensor t) = 0;
  // in: f32 [world_size * s]; out_shard: f32 [s] <- the sum over ranks of
  // in[rank * s, (rank + 1) * s).
  virtual void reduce_scatter_sum(const Tensor& in, Tensor& out_shard) = 0;
  // shard: f32 [s]; out: f32 [world_size * s] <- the shards in rank order.
  // In place when shard is the view of out at rank * s.
  virtual void all_gather(const Tensor& shard, Tensor& out) = 0;
  // t on every rank <- t of `root`.
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  // Small host vectors (loss sums, token counts, flags), reduced in double on
  // the CPU path of every backend (MPI carries them even under NCCL).
  virtual void all_reduce_host(std::vector<double>& values, ReduceOp op = ReduceOp::Sum) = 0;
  // Bytes from root to every rank (resized on the receivers).
  virtual void broadcast_bytes(std::vector<uint8_t>& bytes, int root) = 0;

  // Ends the job from any rank: prints `rotor: error: rank R: message` to
  // stderr and takes every rank down (MPI_Abort); never returns.
  [[noreturn]] virtual void abort(const std::string& message, int code = 1);

 protected:
  double timeout_s_ = kDefaultTimeoutSeconds;
};

// A communicator whose collectives run on the host (MPI, Gloo). It numbers
// the collectives of the job and watches those of other transports (NCCL),
// whose host-side work (counts, flags) it also carries.
class HostCommunicator : public Communicator {
 public:
  virtual uint64_t next_seq() = 0;
  // Polls `test` until it returns true; past the deadline runs `on_timeout`
  // (e.g. ncclCommAbort), names the ranks that did not answer and ends the job.
  virtual void wait_until(const std::function<bool()>& test, const char* what, uint64_t seq,
                          const std::function<void()>& on_timeout = {}) = 0;
};

// World size 1: every collective leaves its data as it is.
class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(Device device = Device::cpu()) : device_(device) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string backend() const override { return "local"; }
  Device device() const override { return device_; }
  void all_reduce_sum(Tensor&) override {}
  Handle all_reduce_async(Tensor) override { return Handle(); }
  void reduce_scatter_sum(const Tensor& in, Tensor& out_shard) override;
  void all_gather(const Tensor& shard, Tensor& out) override;
  void broadcast(Tensor&, int root) override;
  void barrier() override {}
  void all_reduce_host(std::vector<double>&, ReduceOp) override {}
  void broadcast_bytes(std::vector<uint8_t>&, int root) override;

 private:
  Device device_;
};

// The communicator for this process; plan_transport (environment.h) picks
// the transport from the launcher's environment and `rendezvous` (the value
// of dist.rendezvous: "auto", "mpi" or "file:DIR"; "auto" falls back to the
// store in `default_store_dir`, the run's output directory).
//   Local: LocalCommunicator, without MPI_Init.
//   Mpi: MPI is initialized (MPI_THREAD_FUNNELED) and finalized at exit.
//   FileStore: the ranks meet in the store (rendezvous.h) and connect Gloo.
// The backend is NCCL when `device` is CUDA (on the GPU that rank_device of
// environment.h gives this rank; its unique id travels over MPI or through
// the store), else MPI or Gloo. timeout_s <= 0 means ROTOR_DIST_TIMEOUT or
// kDefaultTimeoutSeconds; it bounds the rendezvous and every collective.
// A transport this build lacks (MPI, Gloo) is a rotor::Error saying what to
// install.
std::unique_ptr<Communicator> make_communicator(Device device, double timeout_s = 0,
                                                const std::string& rendezvous = "auto",
                                                const std::string& default_store_dir = "");

// The timeout from ROTOR_DIST_TIMEOUT (seconds) or the default.
double default_timeout_seconds();

// Pure helpers (exposed for tests).
// Ring all-reduce: each rank sends and receives 2 (N - 1) / N of the bytes.
double ring_all_reduce_bytes_per_rank(double bytes, int world_size);
// The shard of `numel` elements padded to a multiple of world_size.
int64_t shard_size(int64_t numel, int world_size);

// Ends MPI at the end of `rotor train` (after every communicator is gone):
// exit_code 0 -> MPI_Finalize; otherwise MPI_Abort, so that the other ranks
// stop at once instead of waiting for the timeout. No-op without MPI (Gloo
// peers see this process's connections close and fail at once).
// (MPI_Finalize also runs at exit when this is never called.)
void finalize(int exit_code);

// Prints `rotor: error: rank R: message` and ends the process with _exit(code)
// (MPI_Abort first when MPI is running). Async-signal-unsafe; never returns.
[[noreturn]] void fatal(int rank, const std::string& message, int code = 1);

}  // namespace rotor::parallel
