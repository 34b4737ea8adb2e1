#include "train/session.h"

#include <utility>

#include "checkpoint/import_hf.h"
#include "core/cuda_context.h"
#include "core/logging.h"
#include "models/model_config.h"
#include "parallel/data_parallel.h"
#include "parallel/environment.h"
#include "parallel/signals.h"

namespace rotor::train {

DeviceAccess DeviceAccess::cuda() {
  return {[] { return cuda_device_count(); },
          [](Device gpu) {
            cuda::set_device(gpu.index);
            return gpu;
          }};
}

Session::Session(const Config& c, SessionOptions options) : config_(c) {
  // One process per GPU: rank and world size come from the launcher (mpirun,
  // srun, rotor launch); a plain run is world size 1.
  const parallel::DistEnvironment env = parallel::detect_environment();
  const int gpus = options.devices.count();
  device_ = parallel::rank_device(resolve_device(c.device, gpus), env, gpus);
  if (device_.is_cuda()) device_ = options.devices.bind(device_);
  comm_ =
      parallel::make_communicator(device_, c.dist.timeout_s, c.dist.rendezvous, options.store_dir);
}

Session::~Session() {
  close();
}

void Session::build(const std::function<void(Session&)>& resume) {
  const Config& c = config_;
  parallel::Communicator& comm = *comm_;
  const bool rank0 = rank() == 0;
  // Rank 0 prepares the data (tokenizer, binarized corpora) while the others
  // wait; they then find it prepared and only read it.
  if (!rank0) comm.barrier();
  task_ = tasks::make_task(c, device_, rank(), world());
  if (rank0 && world() > 1) comm.barrier();
  nn::ParameterStore& store = task_->params();
  store.initialize(static_cast<uint64_t>(c.seed));
  if (!c.model.init_from.empty())  // pretrained weights; a resumed checkpoint overrides them
    log().info("{}", checkpoint::import_hf(c.model.init_from, c, store, task_->label_names())
                         .summary(c.model.init_from));
  log().info("model: {} parameters, {} positions{}, vocabulary {}", store.numel(),
             to_string(c.model.position),
             c.model.position->rotates_qk ? " (" + models::rope_summary(c.model) + ")" : "",
             task_->vocab_size());
  if (c.train.checkpoint_activations)
    log().info(
        "activation checkpointing: each layer keeps its input only and recomputes its "
        "activations in the backward (train.checkpoint_activations)");
  precision_ = std::make_unique<PrecisionPolicy>(c, device_, store);  // 16-bit copy, fp16 scaler
  // A signal is agreed over the ranks by the caller of Scheduler::signals
  // (the trainer, after every update); the bench never asks.
  scheduler_ = std::make_unique<Scheduler>(c.train, task_->has_valid(),
                                           [&comm] { return parallel::agree_stop(comm); });
  step_ = std::make_unique<UpdateStep>(c, *task_, *precision_, comm, *scheduler_);
  if (resume) resume(*this);
  step_->optimizer_loaded();
  // Every rank starts from rank 0's weights.
  if (world() > 1) parallel::broadcast_parameters(comm, store);
  store.refresh_compute_copy();  // 16-bit weights from the masters as loaded or broadcast
}

void Session::close() {
  step_.reset();
  scheduler_.reset();
  precision_.reset();
  task_.reset();
  comm_.reset();
}

}  // namespace rotor::train
