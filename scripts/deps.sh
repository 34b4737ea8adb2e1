#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages rotor needs (only the missing ones).
# As root it runs apt-get; otherwise it prints the exact command and fails.
# Usage: scripts/deps.sh [--with-python | --hf5-only]   (--with-python: PyTorch for
#   tests/reference, the tensorboard package from PyPI in .venv for the TensorBoard
#   tests, and torch 2.x with transformers 5.x from PyPI in .venv-hf5; ROTOR_HF5=0
#   skips that; --hf5-only: .venv-hf5 alone)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libyaml-cpp-dev libspdlog-dev libfmt-dev
  libsentencepiece-dev sentencepiece libcli11-dev nlohmann-json3-dev libgtest-dev libopenblas-dev
  libopenblas-openmp-dev libdnnl-dev libprotobuf-dev protobuf-compiler libboost-dev
  ocl-icd-opencl-dev  # dnnl-config.cmake asks for OpenCL (a recommends apt skips here)
  libopenmpi-dev openmpi-bin libgloo-dev
  patchelf  # the relocatable install (scripts/install/bundle.sh)
  clang-14 libclang-rt-14-dev libomp-14-dev  # the fuzzers (scripts/fuzz.sh): clang, libFuzzer
  clang-format-14)  # scripts/check_format.sh
# libxsmm, for linear attention's small products (src/ops/cpu_gemm.h): Debian
# builds it for amd64 only; elsewhere those products run on the CPU GEMM.
if [[ $(dpkg --print-architecture 2>/dev/null || true) == amd64 ]]; then
  packages+=(libxsmm-dev)
fi
if [[ "${1:-}" == "--with-python" ]]; then
  packages+=(python3 python3-numpy python3-torch python3-matplotlib python3-venv
    python3-sentencepiece)  # the SentencePiece of rotor's C++ library, for the HF export test
fi

# tensorboard is not a Debian package: pip installs it into .venv (git-ignored),
# a virtual environment of Debian's python3 made with --system-site-packages,
# so that it also sees python3-torch and numpy from apt. A venv rather than
# `pip install --break-system-packages`: Debian's python3 is externally managed
# (PEP 668), and pip there would put tensorboard's dependencies (protobuf,
# grpcio, ...) beside apt's modules for every user of the machine; the venv
# touches nothing outside the checkout and `rm -rf .venv` undoes it. The tests
# look for .venv/bin/python3 first (tests/CMakeLists.txt). Offline, the
# install fails with a warning, not an error: the tests that need it skip.
python_packages() {
  [[ "${1:-}" == "--with-python" ]] || return 0
  if [[ ! -x .venv/bin/python3 ]] && ! /usr/bin/python3 -m venv --system-site-packages .venv; then
    echo "rotor: warning: cannot create .venv: the TensorBoard tests will skip" >&2
    return 0
  fi
  # transformers for the Hugging Face export test (tests/scripts/test_hf_transformers.sh),
  # pinned to a release that works with Debian's torch 1.13.
  if ! .venv/bin/python3 -c "import transformers" 2>/dev/null; then
    echo "rotor: installing transformers into .venv"
    .venv/bin/python3 -m pip install -q --disable-pip-version-check --retries 1 --timeout 20 \
      "transformers==4.36.2" ||
      echo "rotor: warning: pip could not install transformers: the Hugging Face test will skip" >&2
  fi
  .venv/bin/python3 -c "import tensorboard" 2>/dev/null && return 0
  echo "rotor: installing tensorboard into .venv"
  .venv/bin/python3 -m pip install -q --disable-pip-version-check --retries 1 --timeout 20 \
    tensorboard ||
    echo "rotor: warning: pip could not install tensorboard: the TensorBoard tests will skip" >&2
}

# The transformers users run today (5.x) on the PyTorch they install today
# (2.x), in .venv-hf5 (git-ignored) beside .venv: a virtual environment of
# Debian's python3 without its site packages (Debian's torch 1.13 and
# numpy would shadow the newer ones), with PyPI's newest torch,
# transformers 5, sentencepiece, safetensors and numpy. The Hugging Face
# test runs in both (tests/CMakeLists.txt: reference_hf_transformers and
# reference_hf_transformers5), and the benchmark peers use it where it
# exists (docs/testing.md). PyPI's torch for Linux brings its CUDA
# libraries: about 5.6 GB, two to fourteen minutes on the project's machines
# (scripts/test.sh installs it in the background while the build runs); there
# is no CPU-only torch on PyPI. Offline, or when pip fails (a full disk), it
# warns and removes the half-made environment: the 5.x test skips.
# ROTOR_HF5=0 skips it. performer-pytorch (a few pure-Python wheels) joins it:
# the Performer configs' twin in scripts/bench/cpu_peers.py (Hugging Face has
# no linear attention); where it cannot be installed that row says so.
hf5_environment() {
  [[ "${1:-}" == "--with-python" && "${ROTOR_HF5:-1}" != 0 ]] || return 0
  local venv=.venv-hf5
  if [[ -x $venv/bin/python3 ]] &&
    $venv/bin/python3 -c "import torch, transformers, sentencepiece, safetensors, numpy; \
import sys; sys.exit(int(transformers.__version__.split('.')[0]) < 5)" 2>/dev/null; then
    performer_twin "$venv"
    return 0
  fi
  echo "rotor: installing torch 2.x and transformers 5.x from PyPI into $venv (about 5.6 GB)"
  rm -rf "$venv"
  if ! /usr/bin/python3 -m venv "$venv" ||
    ! $venv/bin/python3 -m pip install -q --disable-pip-version-check --retries 1 --timeout 60 \
      "torch>=2" "transformers>=5,<6" sentencepiece safetensors numpy; then
    echo "rotor: warning: could not install torch and transformers 5 into $venv: the" \
      "transformers 5 test will skip" >&2
    rm -rf "$venv"
    return 0
  fi
  performer_twin "$venv"
  return 0
}

performer_twin() {
  "$1/bin/python3" -c "import performer_pytorch" 2>/dev/null && return 0
  "$1/bin/python3" -m pip install -q --disable-pip-version-check --retries 1 --timeout 60 \
    performer-pytorch ||
    echo "rotor: warning: could not install performer-pytorch into $1: cpu_peers.py's" \
      "Performer twin rows will say so" >&2
  return 0
}

# The cuDNN frontend: header-only C++ over cuDNN's graph API, for
# attention.impl: cudnn (src/ops/cudnn_attention_cuda.cpp). No Debian package
# ships it; its PyPI package nvidia-cudnn-frontend carries the headers
# (include/cudnn_frontend.h) beside a Python module. pip downloads the wheel
# (pinned: the version rotor is built and tested with) and only include/ is
# kept, in .deps/cudnn-frontend (git-ignored), where CMake looks for it. Only
# where nvcc exists; offline this warns and rotor builds without cuDNN
# attention (CMake says so).
# The first python3 that has pip (the .venv's when --with-python made one).
python_with_pip() {
  local candidate
  for candidate in .venv/bin/python3 python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -m pip --version >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

CUDNN_FRONTEND_VERSION=1.32.0
cudnn_frontend_headers() {
  local dest=.deps/cudnn-frontend
  [[ -f $dest/include/cudnn_frontend.h ]] && grep -q "$CUDNN_FRONTEND_VERSION" "$dest/VERSION" 2>/dev/null &&
    return 0
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || return 0
  local py
  py=$(python_with_pip) || {
    echo "rotor: warning: no python3 with pip (python3-pip): attention.impl: cudnn will not be built" >&2
    return 0
  }
  local tmp
  tmp=$(mktemp -d)
  # Any one wheel will do (the headers are the same in all): ask for a fixed
  # platform and Python so that pip never builds from source.
  if ! "$py" -m pip download -q --disable-pip-version-check --retries 1 --timeout 20 --no-deps \
    --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 -d "$tmp" \
    "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"; then
    echo "rotor: warning: pip could not fetch nvidia-cudnn-frontend: attention.impl: cudnn will not be built" >&2
    rm -rf "$tmp"
    return 0
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  "$py" - "$tmp" "$dest" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
  echo "nvidia-cudnn-frontend $CUDNN_FRONTEND_VERSION" >"$dest/VERSION"
  rm -rf "$tmp"
  echo "rotor: cuDNN frontend $CUDNN_FRONTEND_VERSION headers in $dest/include"
}

# cuobjdump and the nvdisasm it runs, for the SASS checks
# (tests/scripts/check_sass.py: 16-byte vector accesses, tensor-core
# instructions, no local memory). CUDA 13 as installed on the build machines
# lacks both; their PyPI wheels (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)
# carry the binaries, kept in .deps/cuda-tools/bin (git-ignored). Only where
# nvcc exists; offline this warns and the SASS check skips.
cuobjdump_tool() {
  local dest=.deps/cuda-tools
  [[ -x $dest/bin/cuobjdump && -x $dest/bin/nvdisasm ]] && return 0
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || return 0
  command -v cuobjdump >/dev/null || [[ -x /usr/local/cuda/bin/cuobjdump ]] && return 0
  local py tmp
  py=$(python_with_pip) || {
    echo "rotor: warning: no python3 with pip (python3-pip): the SASS check will skip" >&2
    return 0
  }
  tmp=$(mktemp -d)
  if ! "$py" -m pip download -q --disable-pip-version-check --retries 1 --timeout 20 --no-deps \
    --only-binary=:all: -d "$tmp" "nvidia-cuda-cuobjdump==13.*" "nvidia-cuda-nvdisasm==13.*"; then
    echo "rotor: warning: pip could not fetch cuobjdump and nvdisasm: the SASS check will skip" >&2
    rm -rf "$tmp"
    return 0
  fi
  mkdir -p "$dest/bin"
  "$py" - "$tmp" "$dest/bin" <<'PY'
import glob, os, sys, zipfile
for wheel in glob.glob(sys.argv[1] + "/*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            tool = os.path.basename(n)
            if tool in ("cuobjdump", "nvdisasm") and "/bin/" in n:
                out = os.path.join(sys.argv[2], tool)
                with open(out, "wb") as f:
                    f.write(z.read(n))
                os.chmod(out, 0o755)
PY
  rm -rf "$tmp"
  [[ -x $dest/bin/cuobjdump && -x $dest/bin/nvdisasm ]] && echo "rotor: cuobjdump and nvdisasm in $dest/bin"
  return 0
}

# --hf5-only: only the .venv-hf5 environment (scripts/test.sh runs it in the
# background, beside the build, after a run with ROTOR_HF5=0 installed the rest).
if [[ "${1:-}" == "--hf5-only" ]]; then
  hf5_environment --with-python
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  python_packages "${1:-}"
  hf5_environment "${1:-}"
  cudnn_frontend_headers
  cuobjdump_tool
  exit 0
fi
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "rotor: missing packages: ${missing[*]}" >&2
  echo "rotor: install them with: sudo apt-get update && sudo $cmd" >&2
  exit 1
fi
echo "rotor: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd >/dev/null
python_packages "${1:-}"
hf5_environment "${1:-}"
cudnn_frontend_headers
cuobjdump_tool
