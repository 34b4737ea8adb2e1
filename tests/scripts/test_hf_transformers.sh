#!/usr/bin/env bash
# rotor's Hugging Face export and import against transformers itself
# (tests/scripts/hf_transformers_check.py). Usage: test_hf_transformers.sh ROTOR_BINARY
# LM_LOGITS_BINARY (tests/reference/lm_logits.cpp: a task-lm checkpoint's logits).
# Exit 77 (skipped) when no python3 has torch, transformers and sentencepiece:
# `bash scripts/deps.sh --with-python` installs them (transformers from PyPI
# into the checkout's .venv).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rotor=${1:?usage: test_hf_transformers.sh ROTOR_BINARY LM_LOGITS_BINARY}
lm_logits=${2:?usage: test_hf_transformers.sh ROTOR_BINARY LM_LOGITS_BINARY}
# ROTOR_HF_MAJOR=5: only a python3 whose transformers is 5.x will do
# (.venv-hf5 by default, scripts/deps.sh); otherwise the first with the
# modules, .venv's transformers 4.36 before any other.
major=${ROTOR_HF_MAJOR:-}
candidates=("${ROTOR_HF_PYTHON:-}" "$root/.venv/bin/python3" python3 /usr/bin/python3)
[[ $major == 5 ]] && candidates=("${ROTOR_HF_PYTHON:-}" "$root/.venv-hf5/bin/python3")
want="import numpy, torch, transformers, sentencepiece, safetensors"
[[ -n $major ]] && want="$want; import sys; sys.exit(transformers.__version__.split('.')[0] != '$major')"
py=""
for cand in "${candidates[@]}"; do
  [[ -n $cand ]] || continue
  if command -v "$cand" >/dev/null &&
    "$cand" -c "$want" 2>/dev/null; then
    py=$cand
    break
  fi
done
if [[ -z $py ]]; then
  echo "SKIPPED: no python3 with torch, transformers${major:+ $major.x} and sentencepiece" \
    "(bash scripts/deps.sh --with-python installs them)"
  exit 77
fi
# transformers must not try the network (the models are local directories).
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error \
  HF_HUB_DISABLE_PROGRESS_BARS=1
exec "$py" "$root/tests/scripts/hf_transformers_check.py" --rotor "$rotor" --lm-logits "$lm_logits"
