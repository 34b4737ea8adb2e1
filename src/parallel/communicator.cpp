#include "parallel/communicator.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/cuda_context.h"
#include "core/logging.h"
#include "parallel/rendezvous.h"

#if ROTOR_WITH_MPI
#include "parallel/mpi_communicator.h"
#endif
#if ROTOR_WITH_GLOO
#include "parallel/gloo_communicator.h"
#endif
#if ROTOR_WITH_CUDA && (ROTOR_WITH_MPI || ROTOR_WITH_GLOO)
#include "parallel/nccl_communicator.h"
#endif

namespace rotor::parallel {

namespace {

void write_stderr(const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(2, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

double default_timeout_seconds() {
  if (const char* v = std::getenv("ROTOR_DIST_TIMEOUT"); v && *v) {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (*end != '\0' || !(t > 0))
      ROTOR_FAIL("ROTOR_DIST_TIMEOUT='{}' is not a positive number of seconds", v);
    return t;
  }
  return kDefaultTimeoutSeconds;
}

double ring_all_reduce_bytes_per_rank(double bytes, int world_size) {
  if (world_size <= 1) return 0.0;
  return 2.0 * (world_size - 1) / world_size * bytes;
}

int64_t shard_size(int64_t numel, int world_size) {
  ROTOR_CHECK(world_size >= 1, "world size {}", world_size);
  return (numel + world_size - 1) / world_size;
}

void fatal(int rank, const std::string& message, int code) {
  write_stderr(fmt::format("rotor: error: rank {}: {}\n", rank, message));
  try {
    rotor::flush_log();
  } catch (...) {
  }
#if ROTOR_WITH_MPI
  if (mpi_running()) {
    // MPI_Abort may itself wait on a dead peer: the process ends regardless.
    std::thread([code] {
      std::this_thread::sleep_for(std::chrono::seconds(10));
      ::_exit(code);
    }).detach();
    MPI_Abort(MPI_COMM_WORLD, code);
  }
#endif
  ::_exit(code);
}

void finalize(int exit_code) {
#if ROTOR_WITH_MPI
  if (!mpi_running()) return;
  if (exit_code != 0) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  MPI_Finalize();
#else
  (void)exit_code;
#endif
}

void Communicator::abort(const std::string& message, int code) {
  fatal(rank(), message, code);
}

void LocalCommunicator::reduce_scatter_sum(const Tensor& in, Tensor& out_shard) {
  if (in.numel() != out_shard.numel())
    ROTOR_FAIL("reduce_scatter: input of {} elements is not world size 1 x shard of {}", in.numel(),
               out_shard.numel());
  if (in.raw() != out_shard.raw()) out_shard.copy_from(in);
}

void LocalCommunicator::all_gather(const Tensor& shard, Tensor& out) {
  if (shard.numel() != out.numel())
    ROTOR_FAIL("all_gather: output of {} elements is not world size 1 x shard of {}", out.numel(),
               shard.numel());
  if (shard.raw() != out.raw()) out.copy_from(shard);
}

void LocalCommunicator::broadcast(Tensor&, int root) {
  ROTOR_CHECK(root == 0, "broadcast root {} of world 1", root);
}

void LocalCommunicator::broadcast_bytes(std::vector<uint8_t>&, int root) {
  ROTOR_CHECK(root == 0, "broadcast root {} of world 1", root);
}

std::unique_ptr<Communicator> make_communicator(Device device, double timeout_s,
                                                const std::string& rendezvous,
                                                const std::string& default_store_dir) {
  const DistEnvironment env = detect_environment();
  const TransportPlan plan =
      plan_transport(env, rendezvous, default_store_dir, /*have_mpi=*/ROTOR_WITH_MPI != 0);
  if (plan.transport == Transport::Local) return std::make_unique<LocalCommunicator>(device);
  if (timeout_s <= 0) timeout_s = default_timeout_seconds();
  int gpu = -1;
  if (device.is_cuda()) {
#if ROTOR_WITH_CUDA
    gpu = rank_device(device, env, cuda::device_count()).index;  // one rank per GPU
#else
    ROTOR_FAIL("device {} in a build without CUDA", device.str());
#endif
  }

  std::unique_ptr<HostCommunicator> host;
  std::shared_ptr<Rendezvous> rdzv;
  if (plan.transport == Transport::Mpi) {
#if ROTOR_WITH_MPI
    ensure_mpi_initialized();
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != env.world_size)
      ROTOR_FAIL(
          "the launcher says {} ranks ({}) but MPI sees {}: was rotor started by a "
          "different MPI than it was built with?",
          env.world_size, env.launcher, size);
    host = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, timeout_s, env.local_rank);
#endif
  } else {
#if ROTOR_WITH_GLOO
    rdzv = std::make_shared<Rendezvous>(plan.dir, env.run_id, env.rank, env.world_size, timeout_s);
    host = std::make_unique<GlooCommunicator>(rdzv, env.local_rank, env.single_node(), timeout_s);
#else
    ROTOR_FAIL(
        "{} ranks were launched ({}) without MPI, and this rotor was built without Gloo "
        "(install libgloo-dev and rebuild, or start the ranks with mpirun / srun "
        "--mpi=pmix)",
        env.world_size, env.launcher);
#endif
  }
  ROTOR_CHECK(host, "no host communicator for transport {}", plan.reason);
  if (gpu < 0) return host;
#if ROTOR_WITH_CUDA && (ROTOR_WITH_MPI || ROTOR_WITH_GLOO)
  // Rank 0 draws the NCCL id; it travels through the store, or over MPI.
  std::string id = host->rank() == 0 ? NcclCommunicator::new_unique_id() : std::string();
  if (rdzv) {
    id = share_bytes(*rdzv, "nccl-id", 0, id);
  } else {
    std::vector<uint8_t> bytes(id.begin(), id.end());
    host->broadcast_bytes(bytes, 0);
    id.assign(bytes.begin(), bytes.end());
  }
  return std::make_unique<NcclCommunicator>(gpu, std::move(host), id);
#else
  ROTOR_FAIL("NCCL needs MPI or Gloo for its host-side collectives; this build has neither");
#endif
}

}  // namespace rotor::parallel
