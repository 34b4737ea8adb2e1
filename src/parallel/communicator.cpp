#include "parallel/communicator.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/cuda_context.h"
#include "core/logging.h"

#if ROTOR_WITH_MPI
#include "parallel/mpi_communicator.h"
#endif
#if ROTOR_WITH_MPI && ROTOR_WITH_CUDA
#include "parallel/nccl_communicator.h"
#endif

namespace rotor::parallel {

namespace {

// The integer value of environment variable `name`, or -1 when unset.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 30))
    ROTOR_FAIL("environment variable {}='{}' is not a non-negative integer", name, v);
  return static_cast<int>(x);
}

bool try_env(DistEnvironment& e, const char* rank, const char* size, const char* local_rank,
             const char* local_size, const char* launcher) {
  const int r = env_int(rank), s = env_int(size);
  if (r < 0 || s < 0) return false;
  if (s < 1 || r >= s) ROTOR_FAIL("{}={} is not a rank of {}={}", rank, r, size, s);
  e.rank = r;
  e.world_size = s;
  const int lr = local_rank ? env_int(local_rank) : -1;
  const int ls = local_size ? env_int(local_size) : -1;
  e.local_rank = lr >= 0 ? lr : 0;
  e.local_size = ls >= 1 ? ls : 1;
  e.launcher = launcher;
  return true;
}

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

DistEnvironment detect_environment() {
  DistEnvironment e;
  if (try_env(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
              "OMPI_COMM_WORLD_LOCAL_SIZE", "openmpi"))
    return e;
  if (try_env(e, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "pmi")) return e;
  if (try_env(e, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "slurm"))
    return e;
  return e;
}

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

void Communicator::abort(const std::string& message, int code) { fatal(rank(), message, code); }

void LocalCommunicator::reduce_scatter_sum(const Tensor& in, Tensor& out_shard) {
  if (in.numel() != out_shard.numel())
    ROTOR_FAIL("reduce_scatter: input of {} elements is not world size 1 x shard of {}",
               in.numel(), out_shard.numel());
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

std::unique_ptr<Communicator> make_communicator(Device device, double timeout_s) {
  const DistEnvironment env = detect_environment();
  if (!env.distributed()) return std::make_unique<LocalCommunicator>(device);
#if ROTOR_WITH_MPI
  if (timeout_s <= 0) timeout_s = default_timeout_seconds();
  ensure_mpi_initialized();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != env.world_size)
    ROTOR_FAIL("the launcher says {} ranks ({}) but MPI sees {}: was rotor started by a "
               "different MPI than it was built with?",
               env.world_size, env.launcher, size);
  if (device.is_cuda()) {
#if ROTOR_WITH_CUDA
    const int n = cuda::device_count();
    if (n == 0) ROTOR_FAIL("rank {}: device {} asked for but no GPU answers", env.rank, device.str());
    return std::make_unique<NcclCommunicator>(env.local_rank % n, timeout_s, env.local_rank);
#else
    ROTOR_FAIL("device {} in a build without CUDA", device.str());
#endif
  }
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, timeout_s, env.local_rank);
#else
  (void)timeout_s;
  ROTOR_FAIL("{} ranks were launched ({}), but this rotor was built without MPI "
             "(install libopenmpi-dev and rebuild)",
             env.world_size, env.launcher);
#endif
}

}  // namespace rotor::parallel
