#include "parallel/data_parallel.h"

#include <algorithm>
#include <cmath>

#include "ops/adamw.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace rotor::parallel {

std::vector<int64_t> backward_order_offsets(const nn::ParameterStore& store) {
  std::vector<int64_t> out;
  const auto& params = store.parameters();
  for (auto it = params.rbegin(); it != params.rend(); ++it) out.push_back((*it)->offset);
  return out;
}

void broadcast_parameters(Communicator& comm, nn::ParameterStore& store, int root) {
  if (comm.communicates()) comm.broadcast(store.values(), root);
}

void all_reduce_gradients(Communicator& comm, Tensor& flat_grads) {
  if (comm.communicates()) comm.all_reduce_sum(flat_grads);
}

void all_reduce_counts(Communicator& comm, std::vector<double>& values) {
  if (comm.communicates()) comm.all_reduce_host(values, ReduceOp::Sum);
}

// ---- GradientBuckets ---------------------------------------------------------

GradientBuckets::GradientBuckets(Tensor flat_grads, std::vector<int64_t> offsets, double bucket_mb,
                                 Communicator& comm)
    : grads_(std::move(flat_grads)), comm_(&comm) {
  ROTOR_CHECK(grads_.defined() && grads_.dim() == 1 && grads_.dtype() == DType::F32,
              "GradientBuckets: a flat f32 gradient buffer expected, got {}", grads_.str());
  const int64_t numel = grads_.numel();
  sorted_offsets_ = offsets;
  std::sort(sorted_offsets_.begin(), sorted_offsets_.end());
  if (std::adjacent_find(sorted_offsets_.begin(), sorted_offsets_.end()) != sorted_offsets_.end())
    ROTOR_FAIL("GradientBuckets: a parameter offset is listed twice");
  if (!sorted_offsets_.empty() && (sorted_offsets_.front() < 0 || sorted_offsets_.back() >= numel))
    ROTOR_FAIL("GradientBuckets: parameter offsets outside the buffer of {} elements", numel);
  if (!sorted_offsets_.empty() && sorted_offsets_.front() != 0)
    ROTOR_FAIL("GradientBuckets: no parameter starts at offset 0");
  const double limit =
      bucket_mb > 0 ? bucket_mb * 1024.0 * 1024.0 / sizeof(float) : static_cast<double>(numel) + 1;
  // From the end of the buffer down: bucket 0 holds the last parameters.
  int64_t hi = numel;
  int64_t lo = numel;
  int in_bucket = 0;
  for (size_t k = sorted_offsets_.size(); k-- > 0;) {
    lo = sorted_offsets_[k];
    bucket_of_offset_[lo] = static_cast<int>(bounds_.size());
    ready_[lo] = false;
    ++in_bucket;
    if (static_cast<double>(hi - lo) >= limit || k == 0) {
      bounds_.emplace_back(lo, hi);
      params_in_bucket_.push_back(in_bucket);
      hi = lo;
      in_bucket = 0;
    }
  }
  pending_ = params_in_bucket_;
  handles_.resize(bounds_.size());
}

GradientBuckets::~GradientBuckets() {
  for (auto& h : handles_) h.wait();
}

void GradientBuckets::parameter_ready(int64_t offset) {
  auto it = ready_.find(offset);
  if (it == ready_.end()) ROTOR_FAIL("GradientBuckets: no parameter starts at offset {}", offset);
  reported_ = true;
  if (it->second) return;  // reported twice (shared weights): once counts
  it->second = true;
  --pending_[static_cast<size_t>(bucket_of_offset_[offset])];
  launch_ready();
  progress();
}

void GradientBuckets::range_ready(int64_t begin, int64_t end) {
  auto lo = std::lower_bound(sorted_offsets_.begin(), sorted_offsets_.end(), begin);
  // Report in descending order: the order backward completes a layer.
  for (auto it = std::lower_bound(lo, sorted_offsets_.end(), end); it != lo;) {
    --it;
    auto r = ready_.find(*it);
    if (!r->second) {
      r->second = true;
      --pending_[static_cast<size_t>(bucket_of_offset_[*it])];
    }
  }
  reported_ = true;
  launch_ready();
  progress();
}

void GradientBuckets::launch_ready() {
  while (next_launch_ < static_cast<int>(bounds_.size()) && pending_[next_launch_] == 0) {
    const auto [lo, hi] = bounds_[next_launch_];
    if (comm_->communicates())
      handles_[next_launch_] = comm_->all_reduce_async(grads_.narrow(lo, hi - lo));
    ++next_launch_;
  }
}

void GradientBuckets::progress() {
  // One test advances every outstanding collective in Open MPI; testing each
  // open bucket also serves libraries that progress per request.
  while (first_open_ < next_launch_ && handles_[static_cast<size_t>(first_open_)].done())
    ++first_open_;
  for (int i = first_open_ + 1; i < next_launch_; ++i) handles_[static_cast<size_t>(i)].done();
}

void GradientBuckets::finish(double scale) {
  progress();
  launched_before_finish_ = next_launch_;
  completed_before_finish_ = first_open_;
  reported_last_ = reported_;
  if (!reported_ && next_launch_ == 0) {
    all_reduce_gradients(*comm_, grads_);  // no readiness reports: the plain fallback
  } else {
    for (auto& p : pending_) p = 0;  // parameters never reported: their gradients as they are
    launch_ready();
    for (auto& h : handles_) h.wait();
  }
  if (scale != 1.0) ops::scale(grads_, static_cast<float>(scale));
  pending_ = params_in_bucket_;
  for (auto& [offset, ready] : ready_) ready = false;
  next_launch_ = 0;
  first_open_ = 0;
  reported_ = false;
}

// ---- ShardedAdamW ------------------------------------------------------------

ShardedAdamW::ShardedAdamW(nn::ParameterStore& store, const optim::OptimizerOptions& options,
                           Communicator& comm)
    : store_(&store), options_(options), comm_(&comm) {
  ROTOR_CHECK(store.allocated(), "ShardedAdamW over unallocated parameters");
  const int world = comm.world_size();
  numel_ = store.numel();
  shard_ = parallel::shard_size(numel_, world);
  begin_ = std::min<int64_t>(static_cast<int64_t>(comm.rank()) * shard_, numel_);
  count_ = std::min<int64_t>(numel_, begin_ + shard_) - begin_;
  padded_ = shard_ * world != numel_;
  const Device dev = store.device();
  m_ = Tensor::zeros({shard_}, DType::F32, dev);
  v_ = Tensor::zeros({shard_}, DType::F32, dev);
  grad_shard_ = Tensor::zeros({shard_}, DType::F32, dev);
  if (padded_) work_ = Tensor::zeros({shard_ * world}, DType::F32, dev);
  // Runs of parameters with one decay setting, cut to this shard.
  for (const optim::DecayRun& r : optim::decay_runs(store)) {
    const int64_t lo = std::max(r.begin, begin_);
    const int64_t hi = std::min(r.begin + r.count, begin_ + count_);
    if (hi > lo) runs_.push_back({lo, hi - lo, r.no_decay});
  }
}

optim::StepInfo ShardedAdamW::step(double lr, double grad_multiplier) {
  optim::StepInfo info;
  Tensor& grads = store_->grads();
  Tensor& values = store_->values();
  // 1. grad_shard <- this rank's shard of the sum over ranks.
  if (padded_) {
    work_.narrow(0, numel_).copy_from(grads);
    comm_->reduce_scatter_sum(work_, grad_shard_);
  } else {
    comm_->reduce_scatter_sum(grads, grad_shard_);
  }
  // 2. The global norm: shards' sums of squares, summed over ranks.
  double sq = 0;
  if (count_ > 0) {
    const double n = ops::global_norm({grad_shard_.narrow(0, count_)}).item();
    sq = n * n;
  }
  std::vector<double> acc{sq};
  comm_->all_reduce_host(acc, ReduceOp::Sum);
  const double norm = std::sqrt(acc[0]) * grad_multiplier;
  info.grad_norm = norm;
  if (!std::isfinite(norm)) {  // every rank sees the same norm: all skip
    info.skipped = true;
    return info;
  }
  ops::AdamWOptions o = optim::adamw_options(options_, lr, ++step_, grad_multiplier, norm);
  // 3. AdamW on the shard, one call per decay run.
  for (const Run& r : runs_) {
    optim::set_weight_decay(o, options_, r.no_decay);
    const int64_t k = r.begin - begin_;
    Tensor p = values.narrow(r.begin, r.count);
    Tensor g = grad_shard_.narrow(k, r.count);
    Tensor m = m_.narrow(k, r.count), v = v_.narrow(k, r.count);
    ops::adamw_step(p, g, m, v, o);
  }
  // 4. Every rank gets every shard of the weights.
  if (padded_) {
    const int64_t slot = static_cast<int64_t>(comm_->rank()) * shard_;
    if (count_ > 0) work_.narrow(slot, count_).copy_from(values.narrow(begin_, count_));
    Tensor mine = work_.narrow(slot, shard_);
    comm_->all_gather(mine, work_);
    values.copy_from(work_.narrow(0, numel_));
  } else {
    Tensor mine = values.narrow(begin_, shard_);
    comm_->all_gather(mine, values);
  }
  return info;
}

void ShardedAdamW::gather_state(Tensor& exp_avg, Tensor& exp_avg_sq, int root) {
  const int world = comm_->world_size();
  Tensor full = Tensor::empty({shard_ * world}, DType::F32, store_->device());
  for (int which = 0; which < 2; ++which) {
    Tensor& shard = which == 0 ? m_ : v_;
    comm_->all_gather(shard, full);
    Tensor& out = which == 0 ? exp_avg : exp_avg_sq;
    out = comm_->rank() == root ? full.narrow(0, numel_).to(Device::cpu()).clone() : Tensor();
  }
}

void ShardedAdamW::load_state(const Tensor& exp_avg, const Tensor& exp_avg_sq) {
  for (const Tensor* t : {&exp_avg, &exp_avg_sq})
    if (!t->defined() || t->numel() != numel_ || t->dtype() != DType::F32)
      ROTOR_FAIL("ShardedAdamW: optimizer state of {} f32 elements expected, got {}", numel_,
                 t->defined() ? t->str() : std::string("none"));
  m_.zero_();
  v_.zero_();
  if (count_ == 0) return;
  m_.narrow(0, count_).copy_from(exp_avg.narrow(begin_, count_));
  v_.narrow(0, count_).copy_from(exp_avg_sq.narrow(begin_, count_));
}

void ShardedAdamW::export_to(optim::Optimizer& full, int root) {
  Tensor m, v;
  gather_state(m, v, root);
  if (comm_->rank() == root) {
    full.exp_avg().copy_from(m);
    full.exp_avg_sq().copy_from(v);
    full.set_steps(step_);
  }
}

void ShardedAdamW::import_from(optim::Optimizer& full) {
  load_state(full.exp_avg(), full.exp_avg_sq());
  step_ = full.steps();
}

}  // namespace rotor::parallel
