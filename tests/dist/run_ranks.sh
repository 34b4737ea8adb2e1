#!/usr/bin/env bash
# Starts N ranks of PROGRAM the way srun without an MPI plugin does: each with
# RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and a shared rendezvous
# directory, and nothing that ends the others when one fails (no
# --kill-on-bad-exit). Waits for all; exits with the first non-zero status.
#   run_ranks.sh -n N PROGRAM [ARGS...]
set -u
[[ "${1:-}" == "-n" && $# -ge 3 ]] || { echo "usage: run_ranks.sh -n N PROGRAM [ARGS...]" >&2; exit 2; }
n=$2
shift 2
dir=$(mktemp -d "${TMPDIR:-/tmp}/rotor-ranks-XXXXXX")
trap 'rm -rf "$dir"' EXIT
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n ROTOR_RENDEZVOUS="file:$dir" \
    ROTOR_RUN_ID="ranks-$$" "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
  wait "$p"
  s=$?
  if ((s != 0 && rc == 0)); then rc=$s; fi
done
exit $rc
