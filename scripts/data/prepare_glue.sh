#!/usr/bin/env bash
# GLUE for the RoFormer paper's fine-tuning experiment (docs/reproduce.md):
# checks and normalizes a GLUE directory the user already has for
# configs/glue/*.yaml. Nothing is downloaded.
#
#   scripts/data/prepare_glue.sh --glue-dir DIR [--out DIR] [--tasks "MRPC SST-2 ..."]
#
#   --glue-dir DIR   the GLUE data as the benchmark's download script lays it out:
#                    DIR/MRPC, DIR/SST-2, DIR/QNLI, DIR/STS-B, DIR/QQP, DIR/MNLI, each
#                    with train.tsv, dev.tsv (MNLI: dev_matched.tsv, dev_mismatched.tsv)
#                    and test.tsv (MNLI: test_matched.tsv, test_mismatched.tsv).
#                    MRPC given as Microsoft's msr_paraphrase_train.txt,
#                    msr_paraphrase_test.txt and GLUE's dev_ids.tsv is split into
#                    train.tsv / dev.tsv / test.tsv as GLUE splits it.
#   --out DIR        where the files go (default data/glue), DIR/<TASK>/<file>.tsv
#   --tasks LIST     the tasks (default: the paper's six)
#
# Each file is copied with Windows line ends removed and rows whose field
# count differs from the header's dropped (GLUE's QQP has a few); labels are
# checked against the values configs/glue lists. Prints the examples per file
# and the updates of 3 epochs at batch 32, and warns where a config's
# train.max_updates differs from that. Rerunning replaces the output files.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
glue="" out="data/glue" tasks="MRPC SST-2 QNLI STS-B QQP MNLI"
while (($#)); do
  case $1 in
    --glue-dir) glue=${2:?--glue-dir needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --tasks) tasks=${2:?--tasks needs a list}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "prepare_glue: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $glue ]] || { echo "prepare_glue: --glue-dir DIR is required (see --help)" >&2; exit 2; }
[[ -d $glue ]] || { echo "prepare_glue: --glue-dir $glue: no such directory" >&2; exit 1; }

# task -> label column and accepted labels ("" = a number) and its config.
label_column() {
  case $1 in
    MRPC) echo Quality ;; SST-2 | QNLI) echo label ;; STS-B) echo score ;;
    QQP) echo is_duplicate ;; MNLI) echo gold_label ;;
    *) echo "prepare_glue: unknown task $1 (MRPC SST-2 QNLI STS-B QQP MNLI)" >&2; exit 2 ;;
  esac
}
labels_of() {
  case $1 in
    MRPC | SST-2 | QQP) echo "0 1" ;; QNLI) echo "entailment not_entailment" ;;
    STS-B) echo "" ;; MNLI) echo "entailment neutral contradiction" ;;
  esac
}
config_of() {
  case $1 in
    MRPC) echo mrpc ;; SST-2) echo sst2 ;; QNLI) echo qnli ;; STS-B) echo stsb ;;
    QQP) echo qqp ;; MNLI) echo mnli ;;
  esac
}

# normalize IN OUT TASK [labels?]: CR removed, rows of the wrong width dropped,
# labels checked (when the label column is there). Prints "kept dropped".
normalize() {
  local in=$1 dst=$2 task=$3
  awk -F'\t' -v OFS='\t' -v col="$(label_column "$task")" -v labels="$(labels_of "$task")" \
    -v file="$in" '
    { sub(/\r$/, "") }
    NR == 1 { n = NF; lc = 0; for (i = 1; i <= NF; ++i) if ($i == col) lc = i
              split(labels, l, " "); for (k in l) ok[l[k]] = 1; print; next }
    NF != n { ++dropped; next }
    lc > 0 && labels != "" && !($lc in ok) {
      printf "prepare_glue: %s:%d: label \"%s\" is not one of: %s\n", file, NR, $lc, labels > "/dev/stderr"
      bad = 1; exit 1 }
    lc > 0 && labels == "" && $lc !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ {
      printf "prepare_glue: %s:%d: score \"%s\" is not a number\n", file, NR, $lc > "/dev/stderr"
      bad = 1; exit 1 }
    { print; ++kept }
    END { if (!bad) printf "%d %d\n", kept, dropped > "/dev/stderr" }
  ' "$in" > "$dst.tmp" 2> "$dst.count" || { cat "$dst.count" >&2; rm -f "$dst.tmp" "$dst.count"; exit 1; }
  mv "$dst.tmp" "$dst"
  cat "$dst.count"
  rm -f "$dst.count"
}

# MRPC as Microsoft ships it (Quality, #1 ID, #2 ID, #1 String, #2 String):
# GLUE's dev set is the training pairs listed in dev_ids.tsv.
split_mrpc() {
  local src=$1 dst=$2
  awk -F'\t' -v OFS='\t' -v dev="$dst/dev.raw" -v train="$dst/train.raw" '
    FNR == NR { sub(/\r$/, ""); ids[$1 "\t" $2] = 1; next }
    { sub(/\r$/, "") }
    FNR == 1 { print > dev; print > train; next }
    { print > ((($2 "\t" $3) in ids) ? dev : train) }
  ' "$src/dev_ids.tsv" "$src/msr_paraphrase_train.txt"
  awk -F'\t' -v OFS='\t' '{ sub(/\r$/, "") }
    NR == 1 { print "index", $2, $3, $4, $5; next } { print NR - 2, $2, $3, $4, $5 }
  ' "$src/msr_paraphrase_test.txt" > "$dst/test.raw"
}

printf "%-6s %-22s %9s %8s   %s\n" task file examples dropped "3 epochs at batch 32"
for task in $tasks; do
  label_column "$task" > /dev/null
  src=$glue/$task
  [[ -d $src ]] || { echo "prepare_glue: $src: no such directory" >&2; exit 1; }
  mkdir -p "$out/$task"
  if [[ $task == MNLI ]]; then
    files="train dev_matched dev_mismatched test_matched test_mismatched"
  else
    files="train dev test"
  fi
  from=$src
  if [[ $task == MRPC && ! -f $src/train.tsv && -f $src/msr_paraphrase_train.txt && -f $src/dev_ids.tsv ]]; then
    split_mrpc "$src" "$out/$task"
    for f in train dev test; do mv "$out/$task/$f.raw" "$out/$task/$f.in.tsv"; done
    from=$out/$task
  fi
  for f in $files; do
    in=$from/$f.tsv
    [[ $from == "$out/$task" ]] && in=$from/$f.in.tsv
    if [[ ! -f $in ]]; then
      [[ $f == test* ]] && { printf "%-6s %-22s %9s\n" "$task" "$f.tsv" "(absent)"; continue; }
      echo "prepare_glue: $in: missing (a GLUE $task directory has $f.tsv)" >&2
      exit 1
    fi
    read -r kept dropped < <(normalize "$in" "$out/$task/$f.tsv" "$task")
    [[ $in == *.in.tsv ]] && rm -f "$in"
    note=""
    if [[ $f == train ]]; then
      updates=$((3 * ((kept + 31) / 32)))
      note="$updates updates"
      cfg=$root/configs/glue/$(config_of "$task").yaml
      planned=$(awk '$1 == "max_updates:" { print $2 }' "$cfg" 2>/dev/null || true)
      if [[ -n $planned && $planned != "$updates" ]]; then
        note+=" (configs/glue/$(basename "$cfg") plans $planned: --set train.max_updates=$updates"
        note+=" --set train.valid_interval=$(((kept + 31) / 32)))"
      fi
    fi
    printf "%-6s %-22s %9d %8d   %s\n" "$task" "$f.tsv" "$kept" "${dropped:-0}" "$note"
  done
done
echo "prepare_glue: wrote $out"
