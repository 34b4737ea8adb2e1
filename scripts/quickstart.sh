#!/usr/bin/env bash
# The main job: builds rotor if needed, writes the synthetic numbers task,
# trains a small RoFormer translator on whatever device is there, translates
# the test splits and prints BLEU and exact-match accuracy. German number
# words are single compounds (one "word" per line), so word-level 4-gram BLEU
# is degenerate here: BLEU is computed over characters (sacreBLEU's
# --tokenize char), the word-level figure is printed beside it.
#   scripts/quickstart.sh [CONFIG]   (default configs/quickstart/numbers_rope.yaml)
# Runs offline. Re-running continues the run from its last checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/quickstart/numbers_rope.yaml}
name=$(basename "$config" .yaml)

bash scripts/deps.sh
# Build the CUDA backend only when a GPU is there to use it (it is slower to compile).
cuda=OFF
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then cuda=AUTO; fi
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH=/usr/local/cuda/bin:$PATH; fi
build_dir=${BUILD_DIR:-build-quickstart}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DROTOR_CUDA=$cuda -DROTOR_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target rotor >/dev/null
rotor="$build_dir/rotor"

data=data/numbers
[[ -f $data/test_long.de ]] || "$rotor" synth numbers-en-de --output "$data" --seed 1
out=runs/quickstart/$name
start=$(date +%s)
"$rotor" train "$config" --set output_dir="$out" --set data.train="$data/train" \
  --set data.valid="$data/valid" --resume
echo "training took $(( $(date +%s) - start )) s"

for split in test test_long; do
  "$rotor" translate --checkpoint "$out" --input "$data/$split.en" --output "$out/$split.hyp"
  char_bleu=$("$rotor" bleu --tokenize char --score-only --ref "$data/$split.de" "$out/$split.hyp")
  word_bleu=$("$rotor" bleu --score-only --ref "$data/$split.de" "$out/$split.hyp")
  exact=$(paste -d '\t' "$out/$split.hyp" "$data/$split.de" | awk -F '\t' '$1 == $2 {n++} END {printf "%.1f", 100 * n / NR}')
  echo "$name $split: BLEU (char) $char_bleu | exact match $exact% | BLEU (13a words) $word_bleu"
done
