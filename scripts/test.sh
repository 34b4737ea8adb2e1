#!/usr/bin/env bash
# The test command: installs missing packages, configures, builds and runs the
# whole ctest suite. Exits non-zero on any failure.
#   ROTOR_CUDA=AUTO|ON|OFF   CUDA backend (default AUTO: when nvcc is found)
#   CUDA_ARCHS="80;90"       CUDA architectures to build (default 80;90: A100 and H100)
#   BUILD_DIR=build          build directory
#   CTEST_ARGS="-L cpu"      extra ctest arguments
#   FUZZ=0                   skip the fuzzers (scripts/fuzz.sh, run after ctest:
#                            a clang build and FUZZ_SECONDS=30 per target)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash scripts/deps.sh --with-python

# nvcc is not on PATH in every shell; the toolkit's usual home is enough.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

build_dir=${BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
  -DROTOR_CUDA="${ROTOR_CUDA:-AUTO}" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-80;90}"
cmake --build "$build_dir" -j "$jobs"
cd "$build_dir"
# Spinning OpenMP threads of tests that run side by side starve each other
# (rotor itself re-executes with this policy; test binaries do not).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# OpenMPI refuses root without these; they are harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
if [[ "${FUZZ:-1}" != 0 ]]; then
  bash "$root/scripts/fuzz.sh"
fi
