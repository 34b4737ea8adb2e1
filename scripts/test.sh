#!/usr/bin/env bash
# The test command: installs missing packages, configures, builds and runs the
# whole ctest suite. Exits non-zero on any failure.
#   ROTOR_CUDA=AUTO|ON|OFF   CUDA backend (default AUTO: when nvcc is found)
#   CUDA_ARCHS="80;90"       CUDA architectures to build (default 80;90: A100 and H100)
#   BUILD_DIR=build          build directory
#   CTEST_ARGS="-L cpu"      extra ctest arguments
#   PACK=0                   skip the GPU pack check of a CUDA build (scripts/gpu/check_pack.sh)
#   FUZZ=0                   skip the fuzzers (scripts/fuzz.sh, run after ctest:
#                            a clang build and FUZZ_SECONDS=30 per target)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# PyPI's torch 2.x for .venv-hf5 is gigabytes of download that only ctest
# needs: it installs in the background while the build runs, and ctest waits
# for it (its log is printed then).
hf5_pid=
if [[ "${ROTOR_HF5:-1}" != 0 ]]; then
  ROTOR_HF5=0 bash scripts/deps.sh --with-python
  hf5_log=$(mktemp)
  # Its own process group (setsid), so that a failed build ends pip with it.
  setsid bash scripts/deps.sh --hf5-only >"$hf5_log" 2>&1 &
  hf5_pid=$!
  hf5_start=$SECONDS
  trap '[[ -n $hf5_pid ]] && kill -- -"$hf5_pid" 2>/dev/null; true' EXIT
else
  bash scripts/deps.sh --with-python
fi
# Formatting first: it fails in seconds where a build takes minutes.
bash scripts/check_format.sh

# nvcc is not on PATH in every shell; the toolkit's usual home is enough.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

build_dir=${BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
  -DROTOR_CUDA="${ROTOR_CUDA:-AUTO}" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-80;90}"
cmake --build "$build_dir" -j "$jobs"
if [[ -n $hf5_pid ]]; then
  waited=$SECONDS
  wait "$hf5_pid" || true
  hf5_pid=
  cat "$hf5_log"
  rm -f "$hf5_log"
  echo "rotor: .venv-hf5 in the background: ctest waited $((SECONDS - waited)) s for it" \
    "($((SECONDS - hf5_start)) s after it started)"
fi
cd "$build_dir"
# Spinning OpenMP threads of tests that run side by side starve each other
# (rotor itself re-executes with this policy; test binaries do not).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# OpenMPI refuses root without these; they are harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
cd "$root"
# A CUDA build: the archive a GPU machine gets (scripts/gpu/pack.sh) must be
# complete, relocatable and small (scripts/gpu/check_pack.sh). PACK=0 skips it.
if [[ "${PACK:-1}" != 0 ]] && "$build_dir/rotor" info 2>/dev/null | grep -q '^ *cuda: *yes'; then
  data_args=(--no-data)
  [[ -f ../shared/data/multi30k/train.en && -f ../shared/data/wikitext-2/test.txt ]] && data_args=()
  bash scripts/gpu/pack.sh --build "$build_dir" "${data_args[@]}" --output "$build_dir/pack/rotor-gpu.tar.xz"
  bash scripts/gpu/check_pack.sh "$build_dir/pack/rotor-gpu.tar.xz"
fi
if [[ "${FUZZ:-1}" != 0 ]]; then
  bash "$root/scripts/fuzz.sh"
fi
