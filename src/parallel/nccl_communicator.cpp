#include "parallel/nccl_communicator.h"

#if ROTOR_WITH_CUDA && (ROTOR_WITH_MPI || ROTOR_WITH_GLOO)

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>

#include "core/cuda_context.h"

namespace rotor::parallel {

namespace {

ncclComm_t nc(void* p) {
  return static_cast<ncclComm_t>(p);
}
cudaStream_t cs(void* p) {
  return static_cast<cudaStream_t>(p);
}
cudaEvent_t ce(void* p) {
  return static_cast<cudaEvent_t>(p);
}

void check_gpu_f32(const Tensor& t, int device, const char* what) {
  if (!t.defined()) ROTOR_FAIL("{}: undefined tensor", what);
  if (!t.is_cuda() || t.device().index != device)
    ROTOR_FAIL("{}: the NCCL backend takes tensors on cuda:{}, got {}", what, device, t.str());
  if (t.dtype() != DType::F32) ROTOR_FAIL("{}: f32 tensors expected, got {}", what, t.str());
}

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator* comm, void* ev, const char* what, uint64_t seq, Tensor keep)
      : comm_(comm), ev_(ev), what_(what), seq_(seq), keep_(std::move(keep)) {}
  ~NcclWork() override { NcclWork::wait(); }
  void wait() override {
    if (!ev_) return;
    comm_->wait_event(ev_, what_, seq_);
    comm_->release_event(ev_);
    ev_ = nullptr;
  }
  bool done() override { return !ev_ || comm_->event_done(ev_, what_, seq_); }

 private:
  NcclCommunicator* comm_;
  void* ev_;
  const char* what_;
  uint64_t seq_;
  Tensor keep_;
};

}  // namespace

std::string NcclCommunicator::new_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) ROTOR_FAIL("ncclGetUniqueId: {}", ncclGetErrorString(r));
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

NcclCommunicator::NcclCommunicator(int cuda_device, std::unique_ptr<HostCommunicator> host,
                                   const std::string& unique_id)
    : host_(std::move(host)), device_(cuda_device) {
  ROTOR_CHECK(host_, "NcclCommunicator without a host communicator");
  timeout_s_ = host_->timeout_seconds();
  cuda::set_device(device_);
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id))
    ROTOR_FAIL("rank {}: the NCCL unique id has {} bytes, expected {}", host_->rank(),
               unique_id.size(), sizeof(id));
  std::memcpy(&id, unique_id.data(), sizeof(id));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const uint64_t seq = host_->next_seq();
  ncclResult_t r = ncclCommInitRankConfig(&comm, host_->world_size(), id, host_->rank(), &config);
  if (r != ncclSuccess && r != ncclInProgress)
    ROTOR_FAIL("rank {}: ncclCommInitRank failed: {}", host_->rank(), ncclGetErrorString(r));
  comm_ = comm;
  host_->wait_until(
      [&] {
        ncclResult_t st = ncclSuccess;
        ncclCommGetAsyncError(comm, &st);
        if (st == ncclInProgress) return false;
        if (st != ncclSuccess)
          fatal(host_->rank(), fmt::format("ncclCommInitRank failed: {}", ncclGetErrorString(st)));
        return true;
      },
      "nccl_init", seq, [&] { ncclCommAbort(comm); });

  cudaStream_t s = nullptr;
  ROTOR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

NcclCommunicator::~NcclCommunicator() {
  cuda::set_device(device_);
  if (stream_) cudaStreamSynchronize(cs(stream_));
  for (void* e : free_events_) cudaEventDestroy(ce(e));
  if (comm_) ncclCommDestroy(nc(comm_));
  if (stream_) cudaStreamDestroy(cs(stream_));
}

void* NcclCommunicator::acquire_event() {
  if (!free_events_.empty()) {
    void* e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  ROTOR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void NcclCommunicator::release_event(void* ev) {
  free_events_.push_back(ev);
}

uint64_t NcclCommunicator::begin(const char* /*what*/) {
  void* ready = acquire_event();
  ROTOR_CUDA_CHECK(cudaEventRecord(ce(ready), cs(cuda::stream(device_))));
  ROTOR_CUDA_CHECK(cudaStreamWaitEvent(cs(stream_), ce(ready), 0));
  release_event(ready);  // safe: a recorded event may be re-recorded later
  return host_->next_seq();
}

void NcclCommunicator::check_async(const char* what, uint64_t seq) {
  ncclResult_t st = ncclSuccess;
  ncclCommGetAsyncError(nc(comm_), &st);
  if (st != ncclSuccess && st != ncclInProgress) {
    ncclCommAbort(nc(comm_));
    comm_ = nullptr;
    fatal(host_->rank(), fmt::format("collective {} #{} failed: {} (a rank died or the network "
                                     "failed)",
                                     what, seq, ncclGetErrorString(st)));
  }
}

void* NcclCommunicator::end(int result, const char* what, uint64_t seq) {
  const auto r = static_cast<ncclResult_t>(result);
  if (r != ncclSuccess && r != ncclInProgress)
    fatal(host_->rank(),
          fmt::format("collective {} #{} failed: {}", what, seq, ncclGetErrorString(r)));
  if (r == ncclInProgress) {  // non-blocking communicator: wait until enqueued
    host_->wait_until(
        [&] {
          ncclResult_t st = ncclSuccess;
          ncclCommGetAsyncError(nc(comm_), &st);
          if (st == ncclInProgress) return false;
          check_async(what, seq);
          return true;
        },
        what, seq, [&] { ncclCommAbort(nc(comm_)); });
  }
  void* done = acquire_event();
  ROTOR_CUDA_CHECK(cudaEventRecord(ce(done), cs(stream_)));
  return done;
}

bool NcclCommunicator::event_done(void* ev, const char* what, uint64_t seq) {
  const cudaError_t q = cudaEventQuery(ce(ev));
  if (q == cudaSuccess) return true;
  if (q != cudaErrorNotReady) ROTOR_CUDA_CHECK(q);
  check_async(what, seq);
  return false;
}

void NcclCommunicator::wait_event(void* ev, const char* what, uint64_t seq) {
  ROTOR_CUDA_CHECK(cudaStreamWaitEvent(cs(cuda::stream(device_)), ce(ev), 0));
  host_->wait_until([&] { return event_done(ev, what, seq); }, what, seq,
                    [&] { ncclCommAbort(nc(comm_)); });
}

void NcclCommunicator::abort(const std::string& message, int code) {
  if (comm_) ncclCommAbort(nc(comm_));
  comm_ = nullptr;
  fatal(host_->rank(), message, code);
}

void NcclCommunicator::all_reduce_sum(Tensor& t) {
  all_reduce_async(t).wait();
}

Handle NcclCommunicator::all_reduce_async(Tensor t) {
  check_gpu_f32(t, device_, "all_reduce");
  const uint64_t seq = begin("all_reduce");
  void* p = t.raw();
  const int r = ncclAllReduce(p, p, static_cast<size_t>(t.numel()), ncclFloat, ncclSum, nc(comm_),
                              cs(stream_));
  void* done = end(r, "all_reduce", seq);
  return Handle(std::make_unique<NcclWork>(this, done, "all_reduce", seq, std::move(t)));
}

void NcclCommunicator::reduce_scatter_sum(const Tensor& in, Tensor& out_shard) {
  check_gpu_f32(in, device_, "reduce_scatter");
  check_gpu_f32(out_shard, device_, "reduce_scatter");
  if (in.numel() != out_shard.numel() * world_size())
    ROTOR_FAIL("reduce_scatter: input of {} elements is not world size {} x shard of {}",
               in.numel(), world_size(), out_shard.numel());
  const uint64_t seq = begin("reduce_scatter");
  const int r = ncclReduceScatter(in.raw(), out_shard.raw(), static_cast<size_t>(out_shard.numel()),
                                  ncclFloat, ncclSum, nc(comm_), cs(stream_));
  Handle(std::make_unique<NcclWork>(this, end(r, "reduce_scatter", seq), "reduce_scatter", seq,
                                    Tensor()))
      .wait();
}

void NcclCommunicator::all_gather(const Tensor& shard, Tensor& out) {
  check_gpu_f32(shard, device_, "all_gather");
  check_gpu_f32(out, device_, "all_gather");
  if (out.numel() != shard.numel() * world_size())
    ROTOR_FAIL("all_gather: output of {} elements is not world size {} x shard of {}", out.numel(),
               world_size(), shard.numel());
  const uint64_t seq = begin("all_gather");
  // In place when shard is out's slot of this rank (NCCL allows exactly that).
  const int r = ncclAllGather(shard.raw(), out.raw(), static_cast<size_t>(shard.numel()), ncclFloat,
                              nc(comm_), cs(stream_));
  Handle(std::make_unique<NcclWork>(this, end(r, "all_gather", seq), "all_gather", seq, Tensor()))
      .wait();
}

void NcclCommunicator::broadcast(Tensor& t, int root) {
  check_gpu_f32(t, device_, "broadcast");
  const uint64_t seq = begin("broadcast");
  const int r = ncclBroadcast(t.raw(), t.raw(), static_cast<size_t>(t.numel()), ncclFloat, root,
                              nc(comm_), cs(stream_));
  Handle(std::make_unique<NcclWork>(this, end(r, "broadcast", seq), "broadcast", seq, Tensor()))
      .wait();
}

void NcclCommunicator::barrier() {
  // This rank's queued communication first (under the deadline), then the
  // ranks meet over MPI.
  const uint64_t seq = host_->next_seq();
  void* ev = acquire_event();
  ROTOR_CUDA_CHECK(cudaEventRecord(ce(ev), cs(stream_)));
  host_->wait_until([&] { return event_done(ev, "barrier", seq); }, "barrier", seq,
                    [&] { ncclCommAbort(nc(comm_)); });
  release_event(ev);
  host_->barrier();
}

void NcclCommunicator::all_reduce_host(std::vector<double>& values, ReduceOp op) {
  host_->all_reduce_host(values, op);
}

void NcclCommunicator::broadcast_bytes(std::vector<uint8_t>& bytes, int root) {
  host_->broadcast_bytes(bytes, root);
}

}  // namespace rotor::parallel

#endif
