// GlooCommunicator's collectives (gloo_communicator.h): each one is a job for
// the worker thread; the blocking ones wait for it.
#include "parallel/gloo_communicator.h"

#if ROTOR_WITH_GLOO

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>

namespace rotor::parallel {

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Slots of this file's own point-to-point collectives; Gloo's use 0x01-0x08.
constexpr uint8_t kReduceScatterSlotPrefix = 0x40;

void check_cpu_f32(const Tensor& t, const char* what) {
  if (!t.defined()) ROTOR_FAIL("{}: undefined tensor", what);
  if (!t.is_cpu()) ROTOR_FAIL("{}: the Gloo backend takes CPU tensors, got {}", what, t.str());
  if (t.dtype() != DType::F32) ROTOR_FAIL("{}: f32 tensors expected, got {}", what, t.str());
}

class GlooWork final : public Work {
 public:
  GlooWork(GlooCommunicator* comm, std::shared_ptr<GlooCommunicator::Job> job)
      : comm_(comm), job_(std::move(job)) {}
  ~GlooWork() override { GlooWork::wait(); }
  void wait() override {
    if (!job_) return;
    comm_->wait_job(*job_);
    job_.reset();
  }
  bool done() override {
    if (job_ && comm_->job_done(*job_)) job_.reset();
    return !job_;
  }

 private:
  GlooCommunicator* comm_;
  std::shared_ptr<GlooCommunicator::Job> job_;
};

}  // namespace

// ---- collectives --------------------------------------------------------------

void GlooCommunicator::all_reduce_sum(Tensor& t) {
  all_reduce_async(t).wait();
}

Handle GlooCommunicator::all_reduce_async(Tensor t) {
  check_cpu_f32(t, "all_reduce");
  float* p = t.data<float>();
  const size_t n = static_cast<size_t>(t.numel());
  const auto timeout = context_->getTimeout();
  auto ctx = context_;
  auto job = submit(
      "all_reduce",
      [ctx, p, n, timeout] {
        if (n == 0) return;
        gloo::AllreduceOptions o(ctx);
        o.setOutput(p, n);
        o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
        o.setTimeout(timeout);
        gloo::allreduce(o);
      },
      std::move(t));
  return Handle(std::make_unique<GlooWork>(this, std::move(job)));
}

void GlooCommunicator::reduce_scatter_sum(const Tensor& in, Tensor& out_shard) {
  check_cpu_f32(in, "reduce_scatter");
  check_cpu_f32(out_shard, "reduce_scatter");
  if (in.numel() != out_shard.numel() * size_)
    ROTOR_FAIL("reduce_scatter: input of {} elements is not world size {} x shard of {}",
               in.numel(), size_, out_shard.numel());
  const float* src = in.data<float>();
  float* dst = out_shard.data<float>();
  const size_t s = static_cast<size_t>(out_shard.numel());
  run_and_wait("reduce_scatter", [this, src, dst, s] {
    const int w = size_, r = rank_;
    if (w == 1 || s == 0) {
      if (dst != src) std::memmove(dst, src, s * sizeof(float));
      return;
    }
    // A ring: at step k rank r sends its running sum of chunk r-k-1 to the
    // right and adds the left neighbour's into chunk r-k-2; after w-1 steps
    // chunk r holds the sum over every rank.
    acc_.assign(src, src + s * static_cast<size_t>(w));
    tmp_.resize(s);
    auto acc = context_->createUnboundBuffer(acc_.data(), acc_.size() * sizeof(float));
    auto tmp = context_->createUnboundBuffer(tmp_.data(), s * sizeof(float));
    const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, 0);
    const auto timeout = context_->getTimeout();
    const int right = (r + 1) % w, left = (r + w - 1) % w;
    const size_t bytes = s * sizeof(float);
    for (int k = 0; k < w - 1; ++k) {
      const size_t send_chunk = static_cast<size_t>(((r - k - 1) % w + w) % w);
      const size_t recv_chunk = static_cast<size_t>(((r - k - 2) % w + w) % w);
      acc->send(right, slot, send_chunk * bytes, bytes);
      tmp->recv(left, slot, 0, bytes);
      tmp->waitRecv(timeout);
      float* a = acc_.data() + recv_chunk * s;
      for (size_t i = 0; i < s; ++i) a[i] += tmp_[i];
      acc->waitSend(timeout);
    }
    std::memcpy(dst, acc_.data() + static_cast<size_t>(r) * s, bytes);
  });
}

void GlooCommunicator::all_gather(const Tensor& shard, Tensor& out) {
  check_cpu_f32(shard, "all_gather");
  check_cpu_f32(out, "all_gather");
  const int64_t s = shard.numel();
  if (out.numel() != s * size_)
    ROTOR_FAIL("all_gather: output of {} elements is not world size {} x shard of {}", out.numel(),
               size_, s);
  const float* in = shard.data<float>();
  float* o = out.data<float>();
  const bool in_place = in == o + rank_ * s;
  run_and_wait("all_gather", [this, in, o, s, in_place] {
    if (s == 0) return;
    gloo::AllgatherOptions opts(context_);
    if (!in_place) opts.setInput(const_cast<float*>(in), static_cast<size_t>(s));
    opts.setOutput(o, static_cast<size_t>(s * size_));
    opts.setTimeout(context_->getTimeout());
    gloo::allgather(opts);
  });
}

void GlooCommunicator::broadcast(Tensor& t, int root) {
  check_cpu_f32(t, "broadcast");
  ROTOR_CHECK(root >= 0 && root < size_, "broadcast root {} of world {}", root, size_);
  float* p = t.data<float>();
  const size_t n = static_cast<size_t>(t.numel());
  run_and_wait("broadcast", [this, p, n, root] {
    if (n == 0) return;
    gloo::BroadcastOptions o(context_);
    o.setOutput(p, n);
    o.setRoot(root);
    o.setTimeout(context_->getTimeout());
    gloo::broadcast(o);
  });
}

void GlooCommunicator::barrier() {
  run_and_wait("barrier", [this] {
    gloo::BarrierOptions o(context_);
    o.setTimeout(context_->getTimeout());
    gloo::barrier(o);
  });
}

void GlooCommunicator::all_reduce_host(std::vector<double>& values, ReduceOp op) {
  run_and_wait("all_reduce_host", [this, &values, op] {
    if (values.empty()) return;
    gloo::AllreduceOptions o(context_);
    o.setOutput(values.data(), values.size());
    ReduceFn fn = static_cast<ReduceFn>(&gloo::sum<double>);
    if (op == ReduceOp::Max) fn = static_cast<ReduceFn>(&gloo::max<double>);
    if (op == ReduceOp::Min) fn = static_cast<ReduceFn>(&gloo::min<double>);
    o.setReduceFunction(fn);
    o.setTimeout(context_->getTimeout());
    gloo::allreduce(o);
  });
}

void GlooCommunicator::broadcast_bytes(std::vector<uint8_t>& bytes, int root) {
  ROTOR_CHECK(root >= 0 && root < size_, "broadcast root {} of world {}", root, size_);
  run_and_wait("broadcast_bytes", [this, &bytes, root] {
    int64_t n = static_cast<int64_t>(bytes.size());
    gloo::BroadcastOptions size_opts(context_);
    size_opts.setOutput(&n, 1);
    size_opts.setRoot(root);
    size_opts.setTimeout(context_->getTimeout());
    gloo::broadcast(size_opts);
    bytes.resize(static_cast<size_t>(n));
    if (n == 0) return;
    gloo::BroadcastOptions o(context_);
    o.setOutput(bytes.data(), bytes.size());
    o.setRoot(root);
    o.setTimeout(context_->getTimeout());
    gloo::broadcast(o);
  });
}

std::unique_ptr<GlooCommunicator> GlooCommunicator::split(int color, int key) {
  // Every rank's (color, key): each fills its own slots of a sum.
  std::vector<double> ck(2 * static_cast<size_t>(size_), 0.0);
  ck[2 * static_cast<size_t>(rank_)] = color;
  ck[2 * static_cast<size_t>(rank_) + 1] = key;
  all_reduce_host(ck, ReduceOp::Sum);
  const std::string name = fmt::format("{}.split{}.{}", name_, seq_, color);
  if (color < 0) return nullptr;
  std::vector<int> members;
  for (int r = 0; r < size_; ++r)
    if (static_cast<int>(ck[2 * static_cast<size_t>(r)]) == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return ck[2 * static_cast<size_t>(a) + 1] < ck[2 * static_cast<size_t>(b) + 1];
  });
  const int sub_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  return std::unique_ptr<GlooCommunicator>(
      new GlooCommunicator(*this, sub_rank, static_cast<int>(members.size()), name));
}

}  // namespace rotor::parallel

#endif  // ROTOR_WITH_GLOO
