// The communication layer and the data-parallel pieces), run as one
// process (LocalCommunicator), under mpirun -np 2 / -np 4 (MpiCommunicator)
// and under `rotor launch -n 2 / -n 4 --exec` (GlooCommunicator).
//
//   test_dist                      the gtest suite on every rank
//   test_dist --fault=kill|hang    rank 1 dies (SIGKILL) or hangs before a
//                                  collective; the others must end the job
//                                  (driven by run_fault.cmake, tests/dist)
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "models/transformer.h"
#include "nn/parameters.h"
#include "optim/optimizer.h"
#include "parallel/communicator.h"
#include "parallel/data_parallel.h"
#include "parallel/signals.h"
#if ROTOR_WITH_MPI
#include "parallel/mpi_communicator.h"
#endif
#if ROTOR_WITH_GLOO
#include "parallel/gloo_communicator.h"
#endif

namespace rotor::parallel {
namespace {

Communicator* g_comm = nullptr;

Communicator& comm() {
  return *g_comm;
}
int R() {
  return g_comm->rank();
}
int W() {
  return g_comm->world_size();
}

// A dyadic value k / 64 with |k| <= 64: sums of a few of them are exact in
// f32, whatever order a reduction takes.
float dyadic(uint64_t seed, int64_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<float>(static_cast<int>(x % 129) - 64) / 64.0f;
}

TEST(Dist, Helpers) {
  EXPECT_DOUBLE_EQ(ring_all_reduce_bytes_per_rank(100.0, 4), 150.0);
  EXPECT_DOUBLE_EQ(ring_all_reduce_bytes_per_rank(100.0, 1), 0.0);
  EXPECT_EQ(shard_size(10, 4), 3);
  EXPECT_EQ(shard_size(12, 4), 3);
  EXPECT_EQ(shard_size(0, 4), 0);
}

TEST(Dist, DetectEnvironment) {
  if (W() > 1) GTEST_SKIP() << "environment probing runs in the single-process job";
  const char* vars[] = {"OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE",
                        "PMI_RANK",
                        "PMI_SIZE",
                        "MPI_LOCALRANKID",
                        "MPI_LOCALNRANKS",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "SLURM_LOCALID",
                        "SLURM_NTASKS_PER_NODE"};
  for (const char* v : vars) unsetenv(v);
  DistEnvironment e = detect_environment();
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.launcher, "none");
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_LOCALID", "1", 1);
  e = detect_environment();
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.launcher, "slurm");
  setenv("PMI_RANK", "2", 1);  // PMI wins over SLURM
  setenv("PMI_SIZE", "4", 1);
  e = detect_environment();
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.launcher, "pmi");
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);  // OpenMPI wins over both
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  e = detect_environment();
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_EQ(e.launcher, "openmpi");
  setenv("OMPI_COMM_WORLD_RANK", "x1", 1);
  EXPECT_THROW(detect_environment(), Error);
  setenv("OMPI_COMM_WORLD_RANK", "4", 1);  // rank outside the world
  EXPECT_THROW(detect_environment(), Error);
  for (const char* v : vars) unsetenv(v);
  setenv("ROTOR_DIST_TIMEOUT", "7.5", 1);
  EXPECT_DOUBLE_EQ(default_timeout_seconds(), 7.5);
  setenv("ROTOR_DIST_TIMEOUT", "-1", 1);
  EXPECT_THROW(default_timeout_seconds(), Error);
  unsetenv("ROTOR_DIST_TIMEOUT");
  EXPECT_DOUBLE_EQ(default_timeout_seconds(), kDefaultTimeoutSeconds);
  EXPECT_EQ(make_communicator(Device::cpu())->backend(), "local");
}

TEST(Dist, AllReduce) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}, int64_t{3 * W() + 1}}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((R() + 1) * i) * 0.5f;
    Tensor t = Tensor::from_floats(x, {n});
    comm().all_reduce_sum(t);
    const auto got = t.to_floats();
    const float tri = static_cast<float>(W() * (W() + 1) / 2);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], tri * static_cast<float>(i) * 0.5f) << n << " " << i;
  }
}

TEST(Dist, ReduceScatterAllGather) {
  for (int64_t s : {int64_t{1}, int64_t{5}, int64_t{333}}) {
    std::vector<float> x(static_cast<size_t>(s * W()));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(R() + 1) + static_cast<float>(i);
    Tensor in = Tensor::from_floats(x, {s * W()});
    Tensor out = Tensor::zeros({s});
    comm().reduce_scatter_sum(in, out);
    const auto got = out.to_floats();
    for (int64_t j = 0; j < s; ++j)
      ASSERT_EQ(got[j], static_cast<float>(W() * (W() + 1) / 2 + W() * (R() * s + j)));

    // Gather, out of place and in place.
    std::vector<float> sh(static_cast<size_t>(s));
    for (int64_t j = 0; j < s; ++j) sh[j] = static_cast<float>(R() * 1000 + j);
    Tensor shard = Tensor::from_floats(sh, {s});
    Tensor all = Tensor::full({s * W()}, -1.0f);
    comm().all_gather(shard, all);
    Tensor all2 = Tensor::full({s * W()}, -1.0f);
    Tensor slot = all2.narrow(R() * s, s);
    slot.copy_from(shard);
    comm().all_gather(slot, all2);
    const auto g1 = all.to_floats(), g2 = all2.to_floats();
    for (int r = 0; r < W(); ++r)
      for (int64_t j = 0; j < s; ++j) {
        ASSERT_EQ(g1[r * s + j], static_cast<float>(r * 1000 + j));
        ASSERT_EQ(g2[r * s + j], static_cast<float>(r * 1000 + j));
      }
  }
  Tensor bad_in = Tensor::zeros({7}), bad_out = Tensor::zeros({2});
  EXPECT_THROW(comm().reduce_scatter_sum(bad_in, bad_out), Error);  // 7 != world x 2
}

TEST(Dist, BroadcastAndHost) {
  const int root = W() - 1;
  std::vector<float> x(13);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(R() * 100 + static_cast<int>(i));
  Tensor t = Tensor::from_floats(x, {13});
  comm().broadcast(t, root);
  const auto got = t.to_floats();
  for (int i = 0; i < 13; ++i) ASSERT_EQ(got[i], static_cast<float>(root * 100 + i));

  std::vector<double> v{1.0, static_cast<double>(R()), 0.25};
  comm().all_reduce_host(v, ReduceOp::Sum);
  EXPECT_EQ(v[0], W());
  EXPECT_EQ(v[1], W() * (W() - 1) / 2);
  EXPECT_EQ(v[2], 0.25 * W());
  std::vector<double> m{static_cast<double>(R())};
  comm().all_reduce_host(m, ReduceOp::Max);
  EXPECT_EQ(m[0], W() - 1);
  m = {static_cast<double>(R())};
  comm().all_reduce_host(m, ReduceOp::Min);
  EXPECT_EQ(m[0], 0);

  std::vector<uint8_t> bytes;
  if (R() == 0) bytes = {1, 2, 3, 250};
  comm().broadcast_bytes(bytes, 0);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 250}));
  comm().barrier();
}

// A small model's worth of parameters: 3117 (not a multiple of 2, 3 or 4)
// or, with even, 3120 (a multiple of 1 to 6) elements.
std::unique_ptr<nn::ParameterStore> make_store(bool even = false) {
  auto s = std::make_unique<nn::ParameterStore>();
  s->add("emb.weight", {37, 16}, nn::Init::normal(0.1));
  for (int l = 0; l < 3; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    s->add(p + "fc1.weight", {24, 16}, nn::Init::xavier_uniform());
    s->add(p + "fc1.bias", {24}, nn::Init::zeros(), true);
    s->add(p + "fc2.weight", {16, 24}, nn::Init::xavier_uniform());
    s->add(p + "fc2.bias", {16}, nn::Init::zeros(), true);
    s->add(p + "norm.weight", {16}, nn::Init::ones(), true);
    s->add(p + "norm.bias", {16}, nn::Init::zeros(), true);
  }
  s->add("out.bias", {even ? 8 : 5}, nn::Init::uniform(0.1), true);
  s->allocate(Device::cpu());
  s->initialize(1234);
  return s;
}

void fill_grads(Tensor& g, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(g.numel()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = dyadic(seed, static_cast<int64_t>(i));
  g.copy_from(Tensor::from_floats(x, {g.numel()}));
}

TEST(Dist, BucketedAllReduceEqualsPlain) {
  auto store = make_store();
  fill_grads(store->grads(), 100 + static_cast<uint64_t>(R()));
  Tensor expect = store->grads().clone();
  comm().all_reduce_sum(expect);
  // ~1 KiB buckets: many of them. Two updates: the buckets rearm.
  GradientBuckets buckets(store->grads(), backward_order_offsets(*store), 1.0 / 1024, comm());
  EXPECT_GT(buckets.bounds().size(), 4u);
  EXPECT_EQ(buckets.bounds().front().second, store->numel());
  EXPECT_EQ(buckets.bounds().back().first, 0);
  for (int update = 0; update < 2; ++update) {
    fill_grads(store->grads(), 100 + static_cast<uint64_t>(R()));
    const auto& params = store->parameters();
    int launched_midway = 0;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      buckets.parameter_ready((*it)->offset);
      if (it == params.rbegin() + static_cast<long>(params.size() / 2))
        launched_midway = buckets.launched();
    }
    EXPECT_GT(launched_midway, 0);  // communication started before backward ended
    buckets.finish();
    EXPECT_EQ(store->grads().to_floats(), expect.to_floats());
  }
  // Whole layers at a time, out of order, one parameter never reported, and a scale.
  fill_grads(store->grads(), 100 + static_cast<uint64_t>(R()));
  buckets.range_ready(store->find("layers.1.fc1.weight")->offset,
                      store->find("layers.2.fc1.weight")->offset);
  buckets.range_ready(store->find("layers.2.fc1.weight")->offset, store->numel());
  buckets.range_ready(store->find("layers.0.fc1.weight")->offset + 1,
                      store->find("layers.1.fc1.weight")->offset);
  buckets.finish(0.5);
  const auto got = store->grads().to_floats(), want = expect.to_floats();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 0.5f * want[i]) << i;

  fill_grads(store->grads(), 100 + static_cast<uint64_t>(R()));
  all_reduce_gradients(comm(), store->grads());
  EXPECT_EQ(store->grads().to_floats(), expect.to_floats());
}

// Several all_reduce_async outstanding at once (distinct tensors and views of
// one buffer, as buckets are) give what the blocking all_reduce gives.
TEST(Dist, AsyncAllReduceMatchesBlocking) {
  const std::vector<int64_t> sizes{1, 7, 1000, 4099, 100003};
  std::vector<Tensor> async_t, blocking_t;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Tensor t = Tensor::empty({sizes[k]});
    fill_grads(t, 500 + 10 * k + static_cast<uint64_t>(R()));
    async_t.push_back(t);
    blocking_t.push_back(t.clone());
  }
  Tensor flat = Tensor::empty({3000});
  fill_grads(flat, 900 + static_cast<uint64_t>(R()));
  Tensor flat_blocking = flat.clone();
  for (auto& t : blocking_t) comm().all_reduce_sum(t);
  comm().all_reduce_sum(flat_blocking);

  std::vector<Handle> handles;
  for (auto& t : async_t) handles.push_back(comm().all_reduce_async(t));
  for (int64_t lo = 3000; lo > 0; lo -= 1000)
    handles.push_back(comm().all_reduce_async(flat.narrow(lo - 1000, 1000)));
  EXPECT_EQ(handles.front().pending(), W() > 1);  // the local backend completes at once
  for (int poll = 0; poll < 3; ++poll)
    for (auto& h : handles) h.done();  // tests progress them, never blocks
  // Waited in reverse order of launch.
  for (auto it = handles.rbegin(); it != handles.rend(); ++it) {
    it->wait();
    EXPECT_FALSE(it->pending());
    EXPECT_TRUE(it->done());
  }
  for (size_t k = 0; k < sizes.size(); ++k)
    ASSERT_EQ(async_t[k].to_floats(), blocking_t[k].to_floats()) << "size " << sizes[k];
  ASSERT_EQ(flat.to_floats(), flat_blocking.to_floats());
  // A handle destroyed unwaited waits for its collective.
  Tensor t = Tensor::empty({513});
  fill_grads(t, 42 + static_cast<uint64_t>(R()));
  Tensor want = t.clone();
  comm().all_reduce_sum(want);
  { Handle h = comm().all_reduce_async(t); }
  EXPECT_EQ(t.to_floats(), want.to_floats());
}

// The translation model's backward feeds the buckets (nn::Context::grad_ready)
// on every rank: buckets are launched during the backward, several before it
// ends, and the result is the plain all-reduce of the same gradients.
TEST(Dist, BucketsLaunchDuringBackward) {
  models::TransformerOptions c;
  c.vocab_size = 30;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.layer.d_model = 16;
  c.layer.n_heads = 2;
  c.layer.d_ff = 32;
  c.layer.dropout = 0.1f;
  c.position = nn::PositionKind::Rope;
  nn::ParameterStore store;
  models::EncoderDecoder model(c, store);
  store.allocate(Device::cpu());
  store.initialize(11);
  // Each rank its own batch.
  const int32_t r = R();
  models::TranslationBatch b;
  b.src = Tensor::from_ints({5 + r, 6, 7, 8, 9, 10, 4, 0}, {2, 4});
  b.src_lengths = Tensor::from_ints({4, 3}, {2});
  b.tgt_in = Tensor::from_ints({2, 11, 12 + r, 2, 13, 0}, {2, 3});
  b.tgt_out = Tensor::from_ints({11, 12 + r, 3, 13, 3, 0}, {2, 3});
  b.tgt_tokens = 5;
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = 3;
  ctx.micro_step = static_cast<uint64_t>(R());
  // The reference: local gradients, then one plain all-reduce.
  store.zero_grad();
  model.forward_loss(b, 0.1f, ctx);
  model.backward(1.0f);
  Tensor expect = store.grads().clone();
  all_reduce_gradients(comm(), expect);

  GradientBuckets buckets(store.grads(), backward_order_offsets(store), 2.0 / 1024, comm());
  const int n = static_cast<int>(buckets.bounds().size());
  ASSERT_GT(n, 6);
  for (int update = 0; update < 2; ++update) {  // the buckets rearm
    store.zero_grad();
    std::vector<int> launched;  // after each report
    ctx.grad_ready = [&](int64_t begin, int64_t end) {
      buckets.range_ready(begin, end);
      launched.push_back(buckets.launched());
    };
    model.forward_loss(b, 0.1f, ctx);
    ctx.grad_ready = nullptr;
    model.backward(1.0f);
    buckets.finish();
    ASSERT_GE(launched.size(), 5u);  // 2 + 2 layers and the embedding at least
    EXPECT_GT(launched.front(), 0);  // the first layer's buckets left at once
    EXPECT_LT(launched.front(), n);
    EXPECT_GT(launched[launched.size() - 2], 1);  // several before the backward's last report
    EXPECT_EQ(buckets.launched_before_finish(), n);
    if (R() == 0 && update == 0)
      std::printf("[rank 0] %d buckets, %d complete when backward ended (world %d)\n", n,
                  buckets.completed_before_finish(), W());
    const auto got = store.grads().to_floats(), want = expect.to_floats();
    for (size_t i = 0; i < got.size(); ++i)  // bucket sizes may change MPI's summation order
      ASSERT_NEAR(got[i], want[i], 1e-6 * (1.0 + std::abs(want[i]))) << "element " << i;
  }
}

TEST(Dist, ShardedAdamWEqualsAdamW) {
  for (int config = 0; config < 4; ++config) {
    const double clip = config % 2 ? 0.5 : 0.0;
    const bool even = config >= 2;  // numel a multiple of the world: no padding
    optim::OptimizerOptions oo;
    oo.weight_decay = 0.01;
    oo.clip_norm = clip;
    auto sharded_store = make_store(even);
    auto full_store = make_store(even);
    EXPECT_EQ(full_store->numel(), even ? 3120 : 3117);
    ShardedAdamW sharded(*sharded_store, oo, comm());
    optim::Optimizer plain(*full_store, oo);
    EXPECT_EQ(sharded.shard_size() * W() >= sharded_store->numel(), true);
    for (int step = 0; step < 3; ++step) {
      // Rank r's gradient; the plain optimizer sees the sum over ranks.
      fill_grads(sharded_store->grads(), 1000 * step + static_cast<uint64_t>(R()));
      std::vector<float> sum(static_cast<size_t>(full_store->numel()), 0.0f);
      for (int r = 0; r < W(); ++r)
        for (size_t i = 0; i < sum.size(); ++i)
          sum[i] += dyadic(1000 * step + static_cast<uint64_t>(r), static_cast<int64_t>(i));
      full_store->grads().copy_from(Tensor::from_floats(sum, {full_store->numel()}));
      const double lr = 1e-2 * (step + 1), scale = 1.0 / 3.0;
      const auto a = sharded.step(lr, scale);
      const auto b = plain.step(lr, scale);
      EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * b.grad_norm);
      const auto x = sharded_store->values().to_floats(), y = full_store->values().to_floats();
      for (size_t i = 0; i < x.size(); ++i) {
        if (clip == 0.0)
          ASSERT_EQ(x[i], y[i]) << "step " << step << " element " << i;
        else
          ASSERT_NEAR(x[i], y[i], 1e-6) << "step " << step << " element " << i;
      }
    }
    EXPECT_EQ(sharded.steps(), 3);
  }
}

// Two sharded updates at world size w of `c`, with a global gradient that is
// the same whatever w is (each rank adds G / w, exactly in f32 for w = 1, 2, 4).
void sharded_updates(Communicator& c, nn::ParameterStore& store, ShardedAdamW& opt, int first) {
  for (int step = first; step < first + 2; ++step) {
    std::vector<float> g(static_cast<size_t>(store.numel()));
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = dyadic(77 + static_cast<uint64_t>(step), static_cast<int64_t>(i)) /
             static_cast<float>(c.world_size());
    store.grads().copy_from(Tensor::from_floats(g, {store.numel()}));
    opt.step(1e-2, 1.0);
  }
}

TEST(Dist, ShardedCheckpointReshards) {
  optim::OptimizerOptions oo;
  oo.weight_decay = 0.01;
  // At the job's world size: 2 updates, a checkpoint, 2 more (the reference).
  auto store = make_store();
  ShardedAdamW opt(*store, oo, comm());
  sharded_updates(comm(), *store, opt, 0);
  Tensor m, v;
  opt.gather_state(m, v, 0);
  // The checkpoint as every rank would read it from disk.
  if (R() != 0) {
    m = Tensor::zeros({store->numel()});
    v = Tensor::zeros({store->numel()});
  }
  comm().broadcast(m, 0);
  comm().broadcast(v, 0);
  Tensor saved_values = store->values().clone();
  const int64_t saved_steps = opt.steps();
  // Through a full Optimizer too (what save_checkpoint takes).
  auto full_store = make_store();
  optim::Optimizer full(*full_store, oo);
  opt.export_to(full, 0);
  if (R() == 0) {
    EXPECT_EQ(full.exp_avg().to_floats(), m.to_floats());
    EXPECT_EQ(full.exp_avg_sq().to_floats(), v.to_floats());
    EXPECT_EQ(full.steps(), 2);
  }
  sharded_updates(comm(), *store, opt, 2);
  const auto reference = store->values().to_floats();

  // Resume at every smaller power-of-two world size on ranks [0, w).
  for (int w = W(); w >= 1; w /= 2) {
    std::unique_ptr<Communicator> owned;
    Communicator* sub = nullptr;
    if (w == W()) {
      sub = &comm();
    } else if (w == 1) {
      if (R() == 0) {
        owned = std::make_unique<LocalCommunicator>();
        sub = owned.get();
      }
    } else {
      bool split = false;
#if ROTOR_WITH_MPI
      if (auto* mpi = dynamic_cast<MpiCommunicator*>(&comm())) {
        owned = mpi->split(R() < w ? 0 : -1, R());
        split = true;
      }
#endif
#if ROTOR_WITH_GLOO
      if (auto* gloo = dynamic_cast<GlooCommunicator*>(&comm())) {
        owned = gloo->split(R() < w ? 0 : -1, R());
        split = true;
      }
#endif
      ASSERT_TRUE(split) << "no split for backend " << comm().backend();
      sub = owned.get();
      if (sub) {
        ASSERT_EQ(sub->world_size(), w);
        ASSERT_EQ(sub->rank(), R());
      }
    }
    if (sub) {
      auto s2 = make_store();
      s2->values().copy_from(saved_values);
      ShardedAdamW o2(*s2, oo, *sub);
      o2.load_state(m, v);
      o2.set_steps(saved_steps);
      sharded_updates(*sub, *s2, o2, 2);
      EXPECT_EQ(s2->values().to_floats(), reference) << "resumed at world size " << w;
      // And through import_from.
      auto s3 = make_store();
      s3->values().copy_from(saved_values);
      ShardedAdamW o3(*s3, oo, *sub);
      auto from_store = make_store();
      optim::Optimizer from(*from_store, oo);
      from.exp_avg().copy_from(m);
      from.exp_avg_sq().copy_from(v);
      from.set_steps(saved_steps);
      o3.import_from(from);
      sharded_updates(*sub, *s3, o3, 2);
      EXPECT_EQ(s3->values().to_floats(), reference) << "imported at world size " << w;
    }
    comm().barrier();
    if (w == 1) break;
  }
}

TEST(Dist, StopFlagIsAgreed) {
  install_stop_handlers();
  clear_stop_request();
  EXPECT_FALSE(agree_stop(comm()));
  if (R() == W() - 1) std::raise(SIGTERM);  // the handler only sets the flag
  EXPECT_EQ(stop_requested(), R() == W() - 1);
  EXPECT_TRUE(agree_stop(comm()));
  if (R() == W() - 1) {
    EXPECT_EQ(stop_signal(), SIGTERM);
  }
  clear_stop_request();
  EXPECT_FALSE(agree_stop(comm()));
}

// Prints only the failures of ranks other than 0, prefixed by the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

// The fault drivers: a warm-up collective, then rank 1 dies or hangs.
int run_fault(const std::string& mode) {
  std::vector<double> warm{1.0};
  comm().all_reduce_host(warm);
  Tensor t = Tensor::full({1000}, 1.0f);
  comm().all_reduce_sum(t);
  if (R() == 1) {
    if (mode == "kill") std::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(600));
    return 0;
  }
  comm().all_reduce_sum(t);
  std::fprintf(stderr, "rank %d: UNEXPECTED: the collective returned\n", R());
  return 3;
}

}  // namespace
}  // namespace rotor::parallel

int main(int argc, char** argv) {
  using namespace rotor::parallel;
  std::string fault;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--fault=", 8) == 0) fault = argv[i] + 8;
  // A failing rank must not leave the others waiting 300 s.
  const double timeout = std::getenv("ROTOR_DIST_TIMEOUT") ? 0.0 : 30.0;
  std::unique_ptr<Communicator> comm = make_communicator(rotor::Device::cpu(), timeout);
  g_comm = comm.get();
  if (!fault.empty()) return run_fault(fault);
  ::testing::InitGoogleTest(&argc, argv);
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(comm->rank()));
  }
  int rc = RUN_ALL_TESTS();
  // Every rank reports the job's result.
  std::vector<double> failed{rc != 0 ? 1.0 : 0.0};
  comm->all_reduce_host(failed, ReduceOp::Max);
  comm.reset();
  g_comm = nullptr;
  return failed[0] != 0 ? 1 : 0;
}
