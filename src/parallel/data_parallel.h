// Data parallelism over the flat parameter buffers (docs/design.md, "Flat parameter buffers" and
// "Distributed training").
//
// Replicated optimizer (every rank holds all of m and v), as train/trainer.cpp
// runs it at world size > 1:
//   GradientBuckets buckets(store.grads(), backward_order_offsets(store), bucket_mb, comm);
//   ctx.grad_ready = buckets.hook();  // only for the LAST micro-batch of an update
//   task->train_micro_batch(ctx);     // the model's backward reports each layer
//                                     // (nn/context.h) -> range_ready(begin, end)
//   buckets.finish();                 // all buckets reduced: grads = sum over ranks
//   optimizer.step(lr, 1.0 / global_tokens);
// Earlier micro-batches of an update only accumulate locally (no hook, no
// communication). Buckets are contiguous ranges of the flat buffer, laid out
// from its end (backward finishes the last layers first) and launched
// strictly in bucket order, so every rank issues the same collectives in the
// same order whatever the timing. A bucket is all-reduced with the
// communicator's all_reduce_async: MPI_Iallreduce on the CPU, ncclAllReduce on
// the communication stream (ordered after the compute stream by an event) on
// the GPU, so backward keeps computing while it runs. finish() waits for every
// bucket (under NCCL the compute stream then waits on the communication
// stream).
//
// MPI progress: many MPI libraries (Open MPI without an async progress thread)
// advance a non-blocking collective only inside MPI calls. Every readiness
// report therefore also tests the outstanding buckets (MPI_Testall), so a
// bucket moves on at each layer boundary of the backward, not only in finish().
//
// Sharded optimizer (ZeRO-1 style): no bucket all-reduce; ShardedAdamW::step
// reduce-scatters the summed gradients, updates this rank's contiguous shard
// of (params, m, v) and all-gathers the weights.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "nn/parameters.h"
#include "optim/optimizer.h"
#include "parallel/communicator.h"

namespace rotor::parallel {

// Element offsets of the store's parameters, last registered first (the
// order in which backward finishes them).
std::vector<int64_t> backward_order_offsets(const nn::ParameterStore& store);

// Rank 0's weights on every rank (call once after initialize/load, before the
// first update): replicas must start identical.
void broadcast_parameters(Communicator& comm, nn::ParameterStore& store, int root = 0);

// The plain fallback: flat_grads <- sum over ranks, one collective, no overlap.
void all_reduce_gradients(Communicator& comm, Tensor& flat_grads);

// The sum over ranks of host counters (loss sum, target tokens, ...), in
// place. Normalize by the global token count: grad_multiplier = 1 / sum(tokens).
void all_reduce_counts(Communicator& comm, std::vector<double>& values);

class GradientBuckets {
 public:
  // flat_grads: f32 [numel] (the store's gradient buffer). param_offsets: the
  // element offset of every parameter, in the order backward completes them;
  // a parameter spans up to the next larger offset (the last to numel).
  // Buckets hold whole parameters and about bucket_mb MiB each (>= one
  // parameter); bucket_mb <= 0 makes one bucket.
  GradientBuckets(Tensor flat_grads, std::vector<int64_t> param_offsets_in_backward_order,
                  double bucket_mb, Communicator& comm);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // The gradient of the parameter at `offset` is final for this update.
  // Launches every bucket that is complete and whose predecessors launched.
  void parameter_ready(int64_t offset);
  // Every parameter whose offset lies in [begin, end) is final (a layer).
  void range_ready(int64_t begin, int64_t end);
  // range_ready as an nn::GradReadyHook (for nn::Context::grad_ready); the
  // hook refers to this object.
  std::function<void(int64_t, int64_t)> hook() {
    return [this](int64_t begin, int64_t end) { range_ready(begin, end); };
  }
  // Launches what is left, waits for every bucket, multiplies the gradients
  // by `scale` (1: leave the sums) and rearms for the next update. When no
  // parameter at all was reported (a model without readiness reports), the
  // whole buffer is reduced by one plain all-reduce instead.
  void finish(double scale = 1.0);

  // Bucket i covers flat elements [bounds()[i].first, bounds()[i].second).
  const std::vector<std::pair<int64_t, int64_t>>& bounds() const { return bounds_; }
  // Buckets launched so far in this update.
  int launched() const { return next_launch_; }
  // Of the last finish(): the buckets that had been launched before it was
  // called (during backward), how many of those were already complete (in
  // bucket order), and whether any readiness was reported.
  int launched_before_finish() const { return launched_before_finish_; }
  int completed_before_finish() const { return completed_before_finish_; }
  bool reported_last_update() const { return reported_last_; }

 private:
  void launch_ready();
  void progress();  // tests the outstanding buckets (MPI progress)

  Tensor grads_;
  Communicator* comm_;
  std::vector<int64_t> sorted_offsets_;                // ascending
  std::unordered_map<int64_t, int> bucket_of_offset_;  // offset -> bucket
  std::unordered_map<int64_t, bool> ready_;            // offset -> reported this update
  std::vector<std::pair<int64_t, int64_t>> bounds_;    // bucket ranges, bucket 0 at the end
  std::vector<int> params_in_bucket_, pending_;
  std::vector<Handle> handles_;
  int next_launch_ = 0;
  int first_open_ = 0;  // buckets below it are known complete
  bool reported_ = false, reported_last_ = false;
  int launched_before_finish_ = 0, completed_before_finish_ = 0;
};

// AdamW with the moments sharded over the ranks. Shard r owns flat elements
// [r * S, min((r + 1) * S, numel)) with S = ceil(numel / world_size); the
// buffers are padded to world_size * S for the collectives. Same semantics as
// optim::Optimizer::step (grad_multiplier, clipping by the global norm, no decay
// for no_decay parameters, skipping non-finite updates), with the gradients
// summed over ranks first. The store's gradients are not all-reduced in place.
class ShardedAdamW {
 public:
  ShardedAdamW(nn::ParameterStore& store, const optim::OptimizerOptions& options,
               Communicator& comm);

  // Collective. Leaves every rank with identical, updated weights.
  optim::StepInfo step(double lr, double grad_multiplier = 1.0);
  int64_t steps() const { return step_; }
  void set_steps(int64_t s) { step_ = s; }

  int64_t shard_begin() const { return begin_; }
  int64_t shard_numel() const { return count_; }  // valid elements (may be 0)
  int64_t shard_size() const { return shard_; }   // S (padded)
  Tensor& exp_avg_shard() { return m_; }          // f32 [S]
  Tensor& exp_avg_sq_shard() { return v_; }

  // World-size-independent checkpoints. gather_state is collective: `root`
  // receives the full moments as CPU f32 [numel] (others get undefined
  // tensors). load_state takes the full moments on every rank and keeps this
  // rank's shard, whatever world size wrote them.
  void gather_state(Tensor& exp_avg, Tensor& exp_avg_sq, int root = 0);
  void load_state(const Tensor& exp_avg, const Tensor& exp_avg_sq);
  // The same through a full optim::Optimizer (what save_checkpoint and
  // load_optimizer take): export fills `full`'s moments and step on root;
  // import reads them on every rank.
  void export_to(optim::Optimizer& full, int root = 0);
  void import_from(optim::Optimizer& full);

 private:
  struct Run {
    int64_t begin, count;
    bool no_decay;
  };
  nn::ParameterStore* store_;
  optim::OptimizerOptions options_;
  Communicator* comm_;
  int64_t numel_ = 0, shard_ = 0, begin_ = 0, count_ = 0;
  bool padded_ = false;
  Tensor m_, v_, grad_shard_;  // [S]
  Tensor work_;                // [world * S] when numel is not a multiple
  std::vector<Run> runs_;
  int64_t step_ = 0;
};

}  // namespace rotor::parallel
