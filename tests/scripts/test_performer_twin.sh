#!/usr/bin/env bash
# The Performer configs' PyTorch twin (scripts/bench/train_peer.py --peer
# performer, performer-pytorch's PerformerLM) is the same model: for each
# shipped pre-norm linear-attention config (the FAVOR+ and elu1 character
# LMs) rotor's bench JSON is made on a small text and the twin is built from
# it (--build-only): its parameter count must equal rotor's. A softmax
# config and a post-norm linear masked LM (PerformerLM is pre-norm) must be
# refused, with the reason. cpu_peers.py's timings
# rest on this. Exit 77 (skipped) without .venv-hf5 and performer-pytorch
# (scripts/deps.sh --with-python).
# Usage: test_performer_twin.sh ROTOR_BINARY
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rotor=${1:?usage: test_performer_twin.sh ROTOR_BINARY}
py=${ROTOR_HF5_PYTHON:-$root/.venv-hf5/bin/python3}
if ! [[ -x $py ]] || ! "$py" -c "import torch, transformers, performer_pytorch" 2>/dev/null; then
  echo "SKIPPED: no $py with torch, transformers and performer_pytorch"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
for i in $(seq 1 400); do
  echo "The quick brown fox $i jumps over the lazy dog, and line $i ends here."
done >"$work/text.txt"
for config in lm/wikitext2_char_tiny_performer_favor lm/wikitext2_char_tiny_performer_elu1 \
  mlm/roformer_tiny_linear_favor lm/wikitext2_char_tiny; do
  name=${config//\//_}
  sets=(--set data.train="$work/text.txt" --set data.valid="$work/text.txt"
    --set output_dir="$work/$name" --set device=cpu)
  if [[ $config == mlm/* ]]; then
    "$rotor" spm-train --input "$work/text.txt" --model-prefix "$work/spm" --vocab-size 120 \
      --user-defined-symbols "[MASK],[CLS],[SEP]" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
    sets+=(--set data.spm_model="$work/spm.model")
  fi
  "$rotor" bench train "$root/configs/$config.yaml" --steps 1 --warmup 0 \
    --json "$work/$name.json" "${sets[@]}" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
  "$py" "$root/scripts/bench/train_peer.py" --bench "$work/$name.json" --device cpu \
    --peer performer --build-only --json "$work/$name.peer.json" >"$work/log" 2>&1 ||
    { cat "$work/log"; exit 1; }
  "$py" - "$work/$name.json" "$work/$name.peer.json" "$config" <<'PY'
import json, sys
rotor, peer, config = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
kind = rotor["model"].get("attention", {}).get("kind")
if kind != "linear" or rotor["model"]["norm"] != "pre":
    why = "softmax" if kind != "linear" else "pre-norm"
    assert "absent" in peer and why in peer["absent"], (config, peer)
    print(f"{config}: no Performer twin ({peer['absent']})")
    sys.exit(0)
assert "absent" not in peer, (config, peer)
assert peer["parameters"] == rotor["parameters"], (config, peer["parameters"], rotor["parameters"])
print(f"{config}: {peer['attention']}: {peer['parameters']} parameters, as rotor's")
PY
done
