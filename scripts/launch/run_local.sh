#!/usr/bin/env bash
# Data-parallel training on one machine: one rank per GPU, started by mpirun.
# Without MPI, `rotor launch -n N train CONFIG` does the same (ranks meet
# through a file rendezvous, Gloo or NCCL; docs/distributed.md).
#
#   scripts/launch/run_local.sh [-n RANKS] CONFIG [rotor train options...]
#   scripts/launch/run_local.sh -n 8 configs/mlm/roformer_base.yaml --set train.max_updates=1000
#
# RANKS defaults to the number of GPUs nvidia-smi lists (else 2 CPU ranks).
# Each rank picks GPU local_rank (OMPI_COMM_WORLD_LOCAL_RANK); do not set
# CUDA_VISIBLE_DEVICES per rank. Environment it honours:
#   ROTOR            the rotor binary (default build/rotor)
#   ROTOR_DIST_TIMEOUT  seconds a collective may wait for the other ranks
#                    before the job ends naming them (default 300)
#   MPIRUN           the launcher (default mpirun); MPIRUN_ARGS extra flags
#   NCCL_DEBUG=INFO  NCCL's ring/tree setup, for debugging
# Running as root (containers) needs OpenMPI's explicit permission, set here.
# Ctrl-C (SIGINT) reaches every rank: they agree to stop after the current
# update, save a checkpoint and exit; a second Ctrl-C kills.
set -euo pipefail
cd "$(dirname "$0")/../.."

ranks=""
if [[ "${1:-}" == "-n" ]]; then ranks=$2; shift 2; fi
if [[ $# -lt 1 ]]; then
  sed -n '2,20p' "$0" >&2
  exit 2
fi
if [[ -z "$ranks" ]]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    ranks=$(nvidia-smi -L | wc -l)
  else
    ranks=2
  fi
fi
rotor=${ROTOR:-build/rotor}
[[ -x "$rotor" ]] || { echo "run_local.sh: no rotor binary at $rotor (set ROTOR)" >&2; exit 2; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One OpenMP thread team per rank, sized to its share of the cores.
cores=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( cores / ranks > 0 ? cores / ranks : 1 ))}

# --bind-to none: ranks are GPU-bound; --oversubscribe lets CPU tests use more
# ranks than cores. Ranks on this machine inherit this environment.
# shellcheck disable=SC2086
exec ${MPIRUN:-mpirun} -np "$ranks" --bind-to none --oversubscribe \
  ${MPIRUN_ARGS:-} "$rotor" train "$@"
