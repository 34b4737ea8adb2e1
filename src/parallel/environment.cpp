#include "parallel/environment.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"

namespace rotor::parallel {

namespace {

const char* env_str(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The integer value of environment variable `name`, or -1 when unset.
int env_int(const char* name) {
  const char* v = env_str(name);
  if (!v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 30))
    ROTOR_FAIL("environment variable {}='{}' is not a non-negative integer", name, v);
  return static_cast<int>(x);
}

bool try_env(DistEnvironment& e, const char* rank, const char* size, const char* local_rank,
             const char* local_size, const char* launcher) {
  const int r = env_int(rank), s = env_int(size);
  if (r < 0 || s < 0) return false;  // a lone RANK may mean something else to someone else
  if (s < 1 || r >= s) ROTOR_FAIL("{}={} is not a rank of {}={}", rank, r, size, s);
  e.rank = r;
  e.world_size = s;
  const int lr = local_rank ? env_int(local_rank) : -1;
  const int ls = local_size ? env_int(local_size) : -1;
  e.local_rank = lr >= 0 ? lr : 0;
  e.local_size = ls >= 1 ? ls : 1;
  if (e.local_rank >= e.local_size && ls >= 1)
    ROTOR_FAIL("{}={} is not a local rank of {}={}", local_rank, lr, local_size, ls);
  e.launcher = launcher;
  return true;
}

// A path component: what is not [A-Za-z0-9._-] becomes '_'.
std::string path_safe(std::string s) {
  for (char& c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (!s.empty() && s[0] == '.') s[0] = '_';
  return s;
}

std::string detect_run_id() {
  if (const char* id = env_str("ROTOR_RUN_ID")) return path_safe(id);
  if (const char* job = env_str("SLURM_JOB_ID")) {
    // One srun step of one job; a requeued job keeps its id but counts restarts.
    std::string id = std::string("slurm-") + job;
    if (const char* step = env_str("SLURM_STEP_ID")) id += std::string(".") + step;
    if (const char* restart = env_str("SLURM_RESTART_COUNT");
        restart && std::string(restart) != "0")
      id += std::string(".r") + restart;
    return path_safe(id);
  }
  if (const char* id = env_str("TORCHELASTIC_RUN_ID"); id && std::string(id) != "none")
    return path_safe(std::string("torch-") + id);
  return "default";
}

}  // namespace

int slurm_tasks_on_node(std::string_view spec, int node) {
  // Comma-separated "COUNT" or "COUNT(xREPEAT)" items, one per node or run of nodes.
  int first = 0;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string item(spec.substr(pos, comma - pos));
    char* end = nullptr;
    const long count = std::strtol(item.c_str(), &end, 10);
    long repeat = 1;
    if (end == item.c_str() || count < 0) return -1;
    if (*end == '(') {
      if (end[1] != 'x') return -1;
      char* end2 = nullptr;
      repeat = std::strtol(end + 2, &end2, 10);
      if (end2 == end + 2 || *end2 != ')' || end2[1] != '\0' || repeat < 1) return -1;
    } else if (*end != '\0') {
      return -1;
    }
    if (node < first + repeat) return static_cast<int>(count);
    first += static_cast<int>(repeat);
    pos = comma + 1;
  }
  return -1;
}

DistEnvironment detect_environment() {
  DistEnvironment e;
  e.run_id = detect_run_id();
  if (const char* r = env_str("ROTOR_RENDEZVOUS")) e.rendezvous = r;
  if (try_env(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
              "OMPI_COMM_WORLD_LOCAL_SIZE", "openmpi") ||
      try_env(e, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "pmi")) {
    e.mpi_launched = true;
    return e;
  }
  if (try_env(e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "env")) return e;
  if (try_env(e, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "slurm")) {
    const int node = std::max(env_int("SLURM_NODEID"), 0);
    int local = -1;
    for (const char* v : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
      if (local < 0 && env_str(v)) local = slurm_tasks_on_node(env_str(v), node);
    if (local < 0) local = env_int("SLURM_NTASKS_PER_NODE");
    if (local >= 1) e.local_size = local;
    // srun --mpi=pmix: Open MPI's MPI_Init joins the step through PMIx.
    e.mpi_launched = env_str("PMIX_RANK") != nullptr;
  }
  return e;
}

Device rank_device(Device asked, const DistEnvironment& env, int device_count) {
  if (!asked.is_cuda()) return asked;
  if (device_count <= 0)
    ROTOR_FAIL("rank {}: device {} asked for but no GPU answers", env.rank, asked.str());
  if (!env.distributed()) return asked;
  // NCCL takes one GPU per rank: two ranks of a node on one GPU stop its
  // initialization with "Duplicate GPU detected" (ncclInvalidUsage).
  if (env.local_size > device_count || env.local_rank >= device_count)
    ROTOR_FAIL(
        "rank {}: {} ranks on this node ({}) but {} GPU(s) visible: NCCL takes one GPU per "
        "rank; start at most {} per node (rotor launch -n {}), or train on the CPU (--set "
        "device=cpu)",
        env.rank, std::max(env.local_size, env.local_rank + 1), env.launcher, device_count,
        device_count, device_count);
  return Device::cuda(env.local_rank);
}

RendezvousSetting parse_rendezvous(std::string_view text, std::string_view where) {
  RendezvousSetting s;
  if (text == "auto") return s;
  if (text == "mpi") {
    s.kind = RendezvousSetting::Kind::Mpi;
    return s;
  }
  if (text.substr(0, 5) == "file:" && text.size() > 5) {
    s.kind = RendezvousSetting::Kind::File;
    s.dir = std::string(text.substr(5));
    return s;
  }
  ROTOR_FAIL("{}: expected auto, mpi or file:DIR (a directory every rank reaches), got '{}'", where,
             text);
}

TransportPlan plan_transport(const DistEnvironment& env, std::string_view setting,
                             const std::string& default_dir, bool have_mpi) {
  const RendezvousSetting s = parse_rendezvous(setting, "dist.rendezvous");
  TransportPlan p;
  const bool launched_by_rotor = !env.rendezvous.empty();
  if (!env.distributed() && (!launched_by_rotor || s.kind == RendezvousSetting::Kind::Mpi)) {
    p.reason = "a single process";
    return p;
  }
  if (s.kind == RendezvousSetting::Kind::Mpi) {
    if (!env.mpi_launched)
      ROTOR_FAIL(
          "dist.rendezvous: mpi, but the {} ranks were not started by an MPI launcher "
          "(launcher: {}; use mpirun or srun --mpi=pmix, or dist.rendezvous: file:DIR)",
          env.world_size, env.launcher);
    if (!have_mpi)
      ROTOR_FAIL(
          "dist.rendezvous: mpi, but this rotor was built without MPI "
          "(install libopenmpi-dev and rebuild)");
    p.transport = Transport::Mpi;
    p.reason = "dist.rendezvous: mpi";
    return p;
  }
  p.transport = Transport::FileStore;
  if (s.kind == RendezvousSetting::Kind::File) {
    p.dir = s.dir;
    p.reason = "dist.rendezvous";
    return p;
  }
  if (launched_by_rotor) {
    const RendezvousSetting e = parse_rendezvous(env.rendezvous, "ROTOR_RENDEZVOUS");
    if (e.kind == RendezvousSetting::Kind::File) {
      p.dir = e.dir;
      p.reason = "ROTOR_RENDEZVOUS";
      return p;
    }
    if (e.kind == RendezvousSetting::Kind::Mpi)
      return plan_transport(env, "mpi", default_dir, have_mpi);
  }
  if (env.mpi_launched && have_mpi) {
    p.transport = Transport::Mpi;
    p.reason = "started by an MPI launcher (" + env.launcher + ")";
    return p;
  }
  if (default_dir.empty())
    ROTOR_FAIL(
        "{} ranks started by {} need a rendezvous: set dist.rendezvous: file:DIR (a "
        "directory every rank reaches) or start them with mpirun",
        env.world_size, env.launcher);
  p.dir = default_dir;
  p.reason = env.mpi_launched ? "no MPI in this build: the output directory"
                              : "no MPI launcher: the output directory";
  return p;
}

}  // namespace rotor::parallel
