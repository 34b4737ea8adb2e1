// Where this process sits in a job, and how its ranks find each other
// (docs/distributed.md, "Launching"). Ranks come from the launcher's
// environment; the transport follows from it and from `dist.rendezvous`:
//   mpirun, MPICH/Intel MPI, srun --mpi=pmix|pmi2   -> MPI (MPI_Init finds the peers)
//   rotor launch, torchrun-style RANK/WORLD_SIZE,
//   srun without an MPI plugin                        -> a file rendezvous store
//                                                       (Gloo for CPU collectives,
//                                                       the NCCL id through the store)
#pragma once

#include <string>
#include <string_view>

#include "core/device.h"

namespace rotor::parallel {

struct DistEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this node (picks the GPU)
  int local_size = 1;  // processes on this node (1 when the launcher does not say)
  // "openmpi" (mpirun), "pmi" (MPICH, Intel MPI, srun --mpi=pmi2), "env"
  // (RANK/WORLD_SIZE: rotor launch, torchrun), "slurm" (srun) or "none".
  std::string launcher = "none";
  // MPI_Init will find the other ranks: started by mpirun, a PMI launcher, or
  // srun with PMIx (PMIX_RANK set).
  bool mpi_launched = false;
  // Names this job in a rendezvous directory: ROTOR_RUN_ID, else SLURM's job,
  // step and restart count, else TORCHELASTIC_RUN_ID, else "default".
  std::string run_id = "default";
  // ROTOR_RENDEZVOUS ("" when unset), as dist.rendezvous spells it.
  std::string rendezvous;
  bool distributed() const { return world_size > 1; }
  bool single_node() const { return local_size == world_size; }
};

// The first launcher whose variables are set, in this order:
//   OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE            (mpirun)
//   PMI_RANK/PMI_SIZE, MPI_LOCALRANKID/MPI_LOCALNRANKS         (MPICH, srun --mpi=pmi2)
//   RANK/WORLD_SIZE, LOCAL_RANK/LOCAL_WORLD_SIZE               (rotor launch, torchrun)
//   SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, the tasks of this node from
//   SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE) and SLURM_NODEID
// else a single process. RANK/WORLD_SIZE win over SLURM's variables, which a
// whole allocation inherits. A malformed value is a rotor::Error naming it.
DistEnvironment detect_environment();

// The device of this rank, the one place that decides it (make_communicator
// and train/session.h ask here): one process per GPU, so rank `local_rank` of
// a job of more than one process takes GPU local_rank of the `device_count`
// GPUs that answer; a single process (also `rotor launch -n 1`) keeps the
// device asked for. A CPU stays the CPU. A rotor::Error naming the rank when
// no GPU answers, or when the node has more ranks than GPUs (NCCL refuses two
// ranks on one GPU with a bare "invalid usage").
Device rank_device(Device asked, const DistEnvironment& env, int device_count);

// SLURM's task counts per node, "2(x3),1" -> the count of node `node` (2 for
// nodes 0-2, 1 for node 3), or -1 when `spec` does not cover it.
int slurm_tasks_on_node(std::string_view spec, int node);

// dist.rendezvous (or ROTOR_RENDEZVOUS): "auto", "mpi" or "file:DIR".
struct RendezvousSetting {
  enum class Kind { Auto, Mpi, File };
  Kind kind = Kind::Auto;
  std::string dir;  // File: the directory every rank reaches
};
// Throws rotor::Error "WHERE: ..." on anything else.
RendezvousSetting parse_rendezvous(std::string_view text, std::string_view where);

// How the ranks of this process's job meet.
enum class Transport { Local, Mpi, FileStore };
struct TransportPlan {
  Transport transport = Transport::Local;
  std::string dir;     // FileStore: the rendezvous directory
  std::string reason;  // one phrase for the log: why this transport
};

// The decision, from the environment and dist.rendezvous:
//   world size 1: Local, unless ROTOR_RENDEZVOUS is set (rotor launch -n 1),
//     which runs the data-parallel path with one rank.
//   "mpi": MPI; an error unless an MPI launcher started the ranks and rotor
//     was built with MPI.
//   "file:DIR": the store in DIR, whoever started the ranks.
//   "auto": ROTOR_RENDEZVOUS when set; else MPI when an MPI launcher started
//     the ranks and rotor has MPI; else the store in `default_dir` (the run's
//     output directory, which every rank must reach anyway).
TransportPlan plan_transport(const DistEnvironment& env, std::string_view setting,
                             const std::string& default_dir, bool have_mpi);

}  // namespace rotor::parallel
