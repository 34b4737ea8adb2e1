#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages rotor needs (only the missing ones).
# As root it runs apt-get; otherwise it prints the exact command and fails.
# Usage: scripts/deps.sh [--with-python]   (--with-python: PyTorch for tests/reference)
set -euo pipefail

packages=(build-essential cmake pkg-config libyaml-cpp-dev libspdlog-dev libfmt-dev
  libsentencepiece-dev sentencepiece libcli11-dev nlohmann-json3-dev libgtest-dev libopenblas-dev
  libopenblas-openmp-dev
  libopenmpi-dev openmpi-bin libgloo-dev)
if [[ "${1:-}" == "--with-python" ]]; then
  packages+=(python3 python3-numpy python3-torch python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
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
