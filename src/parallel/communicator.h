// Collective communication (DESIGN.md decision 8): one process per GPU, ranks
// started by mpirun or srun. Three backends behind one interface:
//   LocalCommunicator  world size 1; every collective is a no-op
//   MpiCommunicator    CPU tensors, MPI non-blocking collectives (mpi_communicator.h)
//   NcclCommunicator   GPU tensors on a communication stream ordered against
//                      the compute stream by events (nccl_communicator.h)
// Every collective that can wait on another rank runs under a deadline (the
// watchdog): when a rank dies or stops answering, the others print
//   rotor: error: rank R: collective X #N timed out after T s (rank(s) ... did not answer)
// and abort the job instead of hanging.
//
// Collectives must be called by every rank of the communicator in the same
// order, from one thread. Tensors are f32 and contiguous (every rotor tensor).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace rotor::parallel {

// Where this process sits in the job, from the launcher's environment.
struct DistEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this node (picks the GPU)
  int local_size = 1;
  std::string launcher = "none";  // "openmpi", "pmi", "slurm" or "none"
  bool distributed() const { return world_size > 1; }
};

// OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK (mpirun), then PMI_RANK/PMI_SIZE
// (MPICH, Intel MPI, srun --mpi=pmi2), then SLURM_PROCID/SLURM_NTASKS/
// SLURM_LOCALID (srun), else a single process. A malformed value is an error.
DistEnvironment detect_environment();

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
    if (this != &o) { wait(); work_ = std::move(o.work_); }
    return *this;
  }
  ~Handle() { wait(); }
  void wait() {
    if (work_) { auto w = std::move(work_); w->wait(); }
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
  virtual std::string backend() const = 0;  // "local", "mpi", "nccl"
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

// The communicator for this process. World size 1 (no launcher, or a launch
// of one) -> LocalCommunicator, without MPI_Init. Otherwise MPI is initialized
// (MPI_THREAD_FUNNELED) and finalized at exit, and the backend is NCCL when
// `device` is CUDA (the GPU is local_rank modulo the visible GPUs, unless
// device names one explicitly with a world of one GPU per node), else MPI.
// timeout_s <= 0 means ROTOR_DIST_TIMEOUT or kDefaultTimeoutSeconds.
// A launch of several ranks in a build without MPI is a rotor::Error.
std::unique_ptr<Communicator> make_communicator(Device device, double timeout_s = 0);

// The timeout from ROTOR_DIST_TIMEOUT (seconds) or the default.
double default_timeout_seconds();

// Pure helpers (exposed for tests).
// Ring all-reduce: each rank sends and receives 2 (N - 1) / N of the bytes.
double ring_all_reduce_bytes_per_rank(double bytes, int world_size);
// The shard of `numel` elements padded to a multiple of world_size.
int64_t shard_size(int64_t numel, int world_size);

// Ends MPI at the end of `rotor train` (after every communicator is gone):
// exit_code 0 -> MPI_Finalize; otherwise MPI_Abort, so that the other ranks
// stop at once instead of waiting for the timeout. No-op without MPI.
// (MPI_Finalize also runs at exit when this is never called.)
void finalize(int exit_code);

// Prints `rotor: error: rank R: message` and ends the process with _exit(code)
// (MPI_Abort first when MPI is running). Async-signal-unsafe; never returns.
[[noreturn]] void fatal(int rank, const std::string& message, int code = 1);

}  // namespace rotor::parallel
