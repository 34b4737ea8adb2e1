#!/usr/bin/env bash
# WMT14 English -> German evaluation as in the RoFormer paper: average the last
# 5 checkpoints of a run, translate newstest2014 (the full 3,003 lines) with
# beam 4 and length penalty 0.6, and print both BLEU scores, labelled:
#   sacreBLEU-compatible BLEU      13a tokens of the detokenized output (what
#                                  sacreBLEU prints; typically ~1 below the other)
#   tokenized compound-split BLEU  the papers' protocol (Moses-style tokens,
#                                  hyphenated compounds split), the figure the
#                                  paper's table compares with (27.3 / 27.5)
#
#   bash scripts/eval/wmt14_en_de.sh RUN_DIR [options]
#
#   --data DIR          prepared data (default data/wmt14_en_de, from
#                       scripts/data/prepare_wmt14_en_de.sh)
#   --test-prefix P     score P.en -> P.de instead of DIR/test.{en,de}
#   --rotor PATH        the rotor binary (default build/rotor, else build-quickstart/rotor)
#   and translate_and_score.sh's: --average N (5), --beam K (4), --lenpen A (0.6),
#   --max-len-a A / --max-len-b B (the run's config), --batch-size N, --device D,
#   --out DIR (RUN_DIR/eval)
# Writes RUN_DIR/eval/avg_last5 (the averaged checkpoint), newstest2014.hyp
# (detokenized output) and newstest2014.scores.
set -euo pipefail

export ROTOR_EVAL_NAME=wmt14_en_de.sh
here=$(cd "$(dirname "$0")" && pwd)
data=data/wmt14_en_de
prefix=""
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) data=${2:?--data needs a directory}; shift 2 ;;
    --test-prefix) prefix=${2:?--test-prefix needs a path prefix}; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
prefix=${prefix:-$data/test}
for f in "$prefix.en" "$prefix.de"; do
  [[ -f "$f" ]] || { echo "wmt14_en_de.sh: error: $f not found (run scripts/data/prepare_wmt14_en_de.sh, or pass --data / --test-prefix)" >&2; exit 1; }
done
exec bash "$here/translate_and_score.sh" --src "$prefix.en" --ref "$prefix.de" \
  --name newstest2014 --tokenized-bleu --lang de ${args[@]+"${args[@]}"}
