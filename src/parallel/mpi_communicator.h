// MpiCommunicator: CPU tensors over MPI. Every collective is the non-blocking
// MPI call (MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Iallgather,
// MPI_Ibcast, MPI_Ibarrier) completed by an MPI_Test loop with a deadline.
// While a rank waits it answers the pings of the others on a private
// communicator; a rank whose deadline passes pings everyone and names the
// ranks that did not answer (dead, or hung outside MPI) or that are behind.
// Errors return (MPI_ERRORS_RETURN): a peer that died shows up as an error of
// the collective, reported the same way.
#pragma once

#if ROTOR_WITH_MPI

#include <mpi.h>

#include <functional>

#include "parallel/communicator.h"

namespace rotor::parallel {

// MPI_Init_thread(MPI_THREAD_FUNNELED) unless MPI runs already; MPI_Finalize
// is registered with atexit. Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD.
void ensure_mpi_initialized();
bool mpi_running();  // initialized and not finalized

class MpiCommunicator final : public HostCommunicator {
 public:
  // Duplicates `comm` (MPI_COMM_WORLD by default); local_rank < 0 asks MPI
  // (MPI_COMM_TYPE_SHARED).
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD, double timeout_s = 0,
                           int local_rank = -1);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string backend() const override { return "mpi"; }
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

  // Ranks with the same color form a new communicator, ordered by key (a
  // collective over this one). color < 0: this rank joins none (nullptr).
  std::unique_ptr<MpiCommunicator> split(int color, int key);

  MPI_Comm comm() const { return comm_; }

  // Completes `requests` of collective `what` (number `seq`) or ends the job
  // with the watchdog's message. Used by the async handles.
  void wait_all(std::vector<MPI_Request>& requests, const char* what, uint64_t seq);
  bool test_all(std::vector<MPI_Request>& requests, const char* what, uint64_t seq);

  // The watchdog, for collectives of other transports (NCCL) numbered by this
  // communicator: polls `test` until it returns true, answering pings; past
  // the deadline runs `on_timeout` (e.g. ncclCommAbort), names the silent
  // ranks and ends the job.
  uint64_t next_seq() override { return ++seq_; }
  void wait_until(const std::function<bool()>& test, const char* what, uint64_t seq,
                  const std::function<void()>& on_timeout = {}) override;

 private:
  void serve_pings();
  [[noreturn]] void report_timeout(const char* what, uint64_t seq, double waited);
  [[noreturn]] void report_error(const char* what, uint64_t seq, int code);

  MPI_Comm comm_ = MPI_COMM_NULL;     // collectives
  MPI_Comm hb_comm_ = MPI_COMM_NULL;  // watchdog pings
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  uint64_t seq_ = 0;          // collectives started
  uint64_t waiting_seq_ = 0;  // the collective being waited on (0: none)
};

}  // namespace rotor::parallel

#endif  // ROTOR_WITH_MPI
