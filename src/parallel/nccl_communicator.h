// NcclCommunicator: GPU tensors over NCCL (docs/design.md, "Distributed training"). Built with
// CUDA and MPI or Gloo. A host communicator (MPI under mpirun, Gloo after a
// file rendezvous) carries every host-side collective (all_reduce_host,
// broadcast_bytes) and numbers the collectives for the watchdog; the
// ncclUniqueId comes from rank 0 over MPI or through the rendezvous store
// (make_communicator in communicator.cpp).
//
// Ordering: a collective records an event on the compute stream
// (cuda::stream(device)), the communication stream waits on it, NCCL runs on
// the communication stream and records a done event; wait() makes the compute
// stream wait on that event, then the host polls it under the deadline (the
// watchdog; on timeout the NCCL communicator is aborted and the job ends with
// the silent ranks named). So backward kernels keep running while buckets are
// all-reduced, and no op on the compute stream reads a result too early.
// The communicator is non-blocking (ncclConfig_t.blocking = 0), so neither its
// creation nor a collective can hang the host past the deadline.
#pragma once

#if ROTOR_WITH_CUDA && (ROTOR_WITH_MPI || ROTOR_WITH_GLOO)

#include <memory>

#include "parallel/communicator.h"

namespace rotor::parallel {

class NcclCommunicator final : public Communicator {
 public:
  // One rank per GPU: `cuda_device` is this rank's GPU (made current).
  // `unique_id`: the bytes of rank 0's new_unique_id(), the same on every rank.
  NcclCommunicator(int cuda_device, std::unique_ptr<HostCommunicator> host,
                   const std::string& unique_id);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  int local_rank() const override { return host_->local_rank(); }
  std::string backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }

  void all_reduce_sum(Tensor& t) override;
  Handle all_reduce_async(Tensor t) override;
  void reduce_scatter_sum(const Tensor& in, Tensor& out_shard) override;
  void all_gather(const Tensor& shard, Tensor& out) override;
  void broadcast(Tensor& t, int root) override;
  void barrier() override;
  void all_reduce_host(std::vector<double>& values, ReduceOp op = ReduceOp::Sum) override;
  void broadcast_bytes(std::vector<uint8_t>& bytes, int root) override;
  [[noreturn]] void abort(const std::string& message, int code = 1) override;

  HostCommunicator& host() { return *host_; }
  // A fresh ncclUniqueId as bytes (rank 0 draws it).
  static std::string new_unique_id();

  // Internal (the handles): waits for the done event of collective `seq`.
  void wait_event(void* done_event, const char* what, uint64_t seq);
  bool event_done(void* done_event, const char* what, uint64_t seq);
  void release_event(void* ev);

 private:
  // Orders the communication stream after the compute stream; returns seq.
  uint64_t begin(const char* what);
  // Checks the result of an NCCL call; waits while the non-blocking
  // communicator reports it in progress. Returns the done event.
  void* end(int nccl_result, const char* what, uint64_t seq);
  void check_async(const char* what, uint64_t seq);
  void* acquire_event();

  std::unique_ptr<HostCommunicator> host_;
  int device_ = 0;
  void* comm_ = nullptr;    // ncclComm_t
  void* stream_ = nullptr;  // cudaStream_t, the communication stream
  std::vector<void*> free_events_;
};

}  // namespace rotor::parallel

#endif
