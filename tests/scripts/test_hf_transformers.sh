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
py=""
for cand in "${ROTOR_HF_PYTHON:-}" "$root/.venv/bin/python3" python3 /usr/bin/python3; do
  [[ -n $cand ]] || continue
  if command -v "$cand" >/dev/null &&
    "$cand" -c "import numpy, torch, transformers, sentencepiece, safetensors" 2>/dev/null; then
    py=$cand
    break
  fi
done
if [[ -z $py ]]; then
  echo "SKIPPED: no python3 with torch, transformers and sentencepiece" \
    "(bash scripts/deps.sh --with-python installs them)"
  exit 77
fi
# transformers must not try the network (the models are local directories).
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
exec "$py" "$root/tests/scripts/hf_transformers_check.py" --rotor "$rotor" --lm-logits "$lm_logits"
