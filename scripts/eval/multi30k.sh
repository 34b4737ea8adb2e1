#!/usr/bin/env bash
# Multi30k English -> German (test_2016_flickr, 1,000 lines) with the WMT14
# protocol of the RoFormer paper: average the last 5 checkpoints, beam 4,
# length penalty 0.6, sacreBLEU-compatible BLEU (13a tokens of the
# detokenized output).
#
#   bash scripts/eval/multi30k.sh RUN_DIR [options]
#
#   --test-prefix P     score P.en -> P.de (default ../shared/data/multi30k/test_2016_flickr,
#                       beside the checkout)
#   --tokenized-bleu    also print the tokenized compound-split BLEU
#   --rotor PATH        the rotor binary (default build/rotor, else build-quickstart/rotor)
#   and translate_and_score.sh's: --average N (5), --beam K (4), --lenpen A (0.6),
#   --max-len-a A / --max-len-b B (the run's config), --batch-size N, --device D,
#   --out DIR (RUN_DIR/eval)
# Writes RUN_DIR/eval/avg_last5, test_2016_flickr.hyp and test_2016_flickr.scores.
set -euo pipefail

export ROTOR_EVAL_NAME=multi30k.sh
here=$(cd "$(dirname "$0")" && pwd)
prefix="$here/../../../shared/data/multi30k/test_2016_flickr"
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --test-prefix) prefix=${2:?--test-prefix needs a path prefix}; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
for f in "$prefix.en" "$prefix.de"; do
  [[ -f "$f" ]] || { echo "multi30k.sh: error: $f not found (pass --test-prefix)" >&2; exit 1; }
done
exec bash "$here/translate_and_score.sh" --src "$prefix.en" --ref "$prefix.de" \
  --name "$(basename "$prefix")" ${args[@]+"${args[@]}"}
