#!/usr/bin/env bash
# The evaluation protocol of the RoFormer paper, shared by wmt14_en_de.sh and
# multi30k.sh: average the last N checkpoints of a run (`rotor average`),
# translate a test set with beam search (`rotor translate`), score the output.
#
#   scripts/eval/translate_and_score.sh RUN_DIR --src FILE --ref FILE [options]
#
#   --name NAME        label of the test set in messages and file names (default test)
#   --rotor PATH       the rotor binary (default build/rotor, else build-quickstart/rotor)
#   --average N        checkpoints to average (default 5, the paper's; fewer when
#                      the run holds fewer, with a note)
#   --beam K           beam size (default 4, the paper's)
#   --lenpen A         fairseq length penalty: log-probability / length^A (default 0.6)
#   --max-len-a A, --max-len-b B   output length <= A x source length + B
#                      (default: the run's config, decode.max_len_a/b)
#   --batch-size N     sentences per decoding batch (default: rotor's)
#   --device D         auto | cpu | cuda | cuda:N (default auto)
#   --out DIR          where the averaged checkpoint, the output and the scores
#                      go (default RUN_DIR/eval)
#   --tokenized-bleu   also print the papers' tokenized compound-split BLEU
#   --lang L           the target language, for --tokenized-bleu (default de)
#
# Prints, and writes to OUT/NAME.scores:
#   sacreBLEU-compatible BLEU: 26.81 (BLEU = ... | nrefs:1|case:mixed|eff:no|tok:13a|...)
#   tokenized compound-split BLEU: 27.60 (BLEU = ... | ...|tok:moses-de+atat|...)
# The first is sacreBLEU's default BLEU of the detokenized output (13a), the
# score to compare across papers; the second is the protocol of Vaswani et al.
# and the RoFormer paper (Moses-style tokens, compounds split at hyphens), the
# one their tables report. Outputs: OUT/avg_lastN (checkpoint), OUT/NAME.hyp.
set -euo pipefail

me=${ROTOR_EVAL_NAME:-translate_and_score.sh}
die() {
  echo "$me: error: $*" >&2
  exit 1
}
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit "${1:-2}"
}

repo=$(cd "$(dirname "$0")/../.." && pwd)
run=""
src=""
ref=""
name=test
rotor=""
average=5
beam=4
lenpen=0.6
out=""
tokenized=0
lang=de
extra=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --src) src=${2:?--src needs a file}; shift 2 ;;
    --ref) ref=${2:?--ref needs a file}; shift 2 ;;
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --rotor) rotor=${2:?--rotor needs a path}; shift 2 ;;
    --average) average=${2:?--average needs a number}; shift 2 ;;
    --beam) beam=${2:?--beam needs a number}; shift 2 ;;
    --lenpen) lenpen=${2:?--lenpen needs a number}; shift 2 ;;
    --max-len-a | --max-len-b | --batch-size | --device)
      extra+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --tokenized-bleu) tokenized=1; shift ;;
    --lang) lang=${2:?--lang needs a language code}; shift 2 ;;
    -h | --help) usage 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *)
      [[ -z "$run" ]] || die "one run directory only (got '$run' and '$1')"
      run=$1; shift ;;
  esac
done

[[ -n "$run" ]] || die "no run directory given (see --help)"
[[ -d "$run" ]] || die "run directory $run not found"
[[ -n "$src" && -n "$ref" ]] || die "--src and --ref are required"
[[ -f "$src" ]] || die "source file $src not found"
[[ -f "$ref" ]] || die "reference file $ref not found"
[[ "$average" =~ ^[1-9][0-9]*$ ]] || die "--average $average is not a positive number"
if [[ -z "$rotor" ]]; then
  for c in "$repo/build/rotor" "$repo/build-quickstart/rotor"; do
    if [[ -x "$c" ]]; then rotor=$c; break; fi
  done
  [[ -n "$rotor" ]] || die "no rotor binary in $repo/build or $repo/build-quickstart (build it, or pass --rotor PATH)"
fi
[[ -x "$rotor" ]] || die "--rotor $rotor is not an executable"

# The step_N checkpoints `rotor average --last` would take, oldest first.
ckpts=()
if [[ -d "$run/checkpoints" ]]; then
  while IFS= read -r d; do
    [[ -f "$run/checkpoints/$d/model.safetensors" ]] && ckpts+=("$d")
  done < <(find "$run/checkpoints" -mindepth 1 -maxdepth 1 -type d -name 'step_*' -printf '%f\n' |
    grep -E '^step_[0-9]+$' | sort -t_ -k2,2n)
fi
[[ ${#ckpts[@]} -gt 0 ]] || die "no checkpoints in $run/checkpoints (expected step_N directories written by rotor train)"
n=$average
if [[ ${#ckpts[@]} -lt $n ]]; then
  n=${#ckpts[@]}
  echo "$me: note: $run holds $n checkpoint(s), fewer than --average $average: averaging those"
fi
used=("${ckpts[@]: -$n}")

out=${out:-$run/eval}
mkdir -p "$out"
avg=$out/avg_last$n
echo "$me: averaging the last $n checkpoints of $run (${used[0]} .. ${used[-1]}) into $avg"
"$rotor" average --last "$n" --run "$run" --output "$avg"

lines() { wc -l <"$1" | tr -d ' '; }
nsrc=$(lines "$src")
nref=$(lines "$ref")
[[ "$nsrc" == "$nref" ]] || die "$src has $nsrc lines but $ref has $nref"
hyp=$out/$name.hyp
echo "$me: translating $src ($nsrc lines) with beam $beam, length penalty $lenpen -> $hyp"
start=$SECONDS
"$rotor" translate --checkpoint "$avg" --input "$src" --output "$hyp" --beam "$beam" \
  --lenpen "$lenpen" ${extra[@]+"${extra[@]}"}
nhyp=$(lines "$hyp")
[[ "$nhyp" == "$nsrc" ]] || die "$hyp has $nhyp lines for $nsrc source lines"
echo "$me: translated in $((SECONDS - start)) s"

# "BLEU = X ..." and the signature -> "X (BLEU = X ... | signature)".
score() {
  local result
  result=$("$rotor" bleu --ref "$ref" "$hyp" "$@")
  local line1 sig
  line1=$(sed -n 1p <<<"$result")
  sig=$(sed -n 2p <<<"$result")
  echo "$(awk '{print $3}' <<<"$line1") ($line1 | $sig)"
}
scores=$out/$name.scores
{
  echo "$name: $nsrc lines, average of ${used[0]} .. ${used[-1]} ($n), beam $beam, lenpen $lenpen"
  echo "sacreBLEU-compatible BLEU: $(score)"
  if [[ "$tokenized" == 1 ]]; then
    echo "tokenized compound-split BLEU: $(score --tokenize moses --lang "$lang" --split-compounds)"
  fi
} >"$scores.tmp"
mv "$scores.tmp" "$scores"
cat "$scores"
