#!/usr/bin/env bash
# scripts/data/prepare_glue.sh on a miniature GLUE directory with GLUE's own
# headers (MRPC as Microsoft ships it, a CRLF line, a QQP row missing a
# field, a bad label), then each of configs/glue/*.yaml trains for two updates
# on its prepared files (a tiny model, no pretrained weights): the configs'
# column names and labels are GLUE's. Usage: test_prepare_glue.sh ROTOR_BINARY.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rotor=$(realpath "${1:?usage: test_prepare_glue.sh ROTOR_BINARY}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g=$tmp/GLUE
mkdir -p "$g"/{MRPC,SST-2,QNLI,STS-B,QQP,MNLI}
t=$'\t'
sentences=("the cat sat on the mat" "a dog ran in the park" "two men play chess"
  "the sun is bright today" "she reads a long book" "they eat bread and cheese")
s() { echo "${sentences[$(($1 % 6))]}"; }

{ echo "Quality${t}#1 ID${t}#2 ID${t}#1 String${t}#2 String"
  for i in $(seq 1 12); do echo "$((i % 2))${t}$i${t}$((i + 100))${t}$(s $i)${t}$(s $((i + 1)))"; done
} > "$g/MRPC/msr_paraphrase_train.txt"
{ echo "Quality${t}#1 ID${t}#2 ID${t}#1 String${t}#2 String"
  for i in $(seq 1 4); do echo "1${t}$i${t}$i${t}$(s $i)${t}$(s $i)"; done
} > "$g/MRPC/msr_paraphrase_test.txt"
printf "3\t103\n4\t104\n" > "$g/MRPC/dev_ids.tsv"

for f in train dev; do
  { echo "sentence${t}label"; for i in $(seq 1 8); do echo "$(s $i)${t}$((i % 2))"; done; } > "$g/SST-2/$f.tsv"
  { echo "index${t}question${t}sentence${t}label"
    for i in $(seq 1 8); do echo "$i${t}$(s $i)?${t}$(s $((i + 2)))${t}$([[ $((i % 2)) == 0 ]] && echo entailment || echo not_entailment)"; done
  } > "$g/QNLI/$f.tsv"
  { echo "index${t}genre${t}filename${t}year${t}old_index${t}source1${t}source2${t}sentence1${t}sentence2${t}score"
    for i in $(seq 1 8); do echo "$i${t}main-captions${t}MSRvid${t}2012test${t}$i${t}none${t}none${t}$(s $i)${t}$(s $((i + 1)))${t}$((i % 6)).$i"; done
  } > "$g/STS-B/$f.tsv"
  { echo "id${t}qid1${t}qid2${t}question1${t}question2${t}is_duplicate"
    for i in $(seq 1 8); do echo "$i${t}$i${t}$((i + 50))${t}$(s $i)?${t}$(s $((i + 3)))?${t}$((i % 2))"; done
    echo "99${t}99${t}149${t}a question cut short"
  } > "$g/QQP/$f.tsv"
done
printf 'a sad film\t0\r\n' >> "$g/SST-2/train.tsv"
{ echo "index${t}sentence"; echo "0${t}$(s 1)"; } > "$g/SST-2/test.tsv"
mnli_header="index${t}promptID${t}pairID${t}genre${t}sentence1_binary_parse${t}sentence2_binary_parse${t}sentence1_parse${t}sentence2_parse${t}sentence1${t}sentence2"
labels=(entailment neutral contradiction)
{ echo "$mnli_header${t}label1${t}gold_label"
  for i in $(seq 1 9); do echo "$i${t}$i${t}${i}e${t}fiction${t}( x )${t}( y )${t}(ROOT x)${t}(ROOT y)${t}$(s $i)${t}$(s $((i + 2)))${t}${labels[$((i % 3))]}${t}${labels[$((i % 3))]}"; done
} > "$g/MNLI/train.tsv"
for f in dev_matched dev_mismatched; do
  { echo "$mnli_header${t}label1${t}label2${t}label3${t}label4${t}label5${t}gold_label"
    for i in $(seq 1 6); do l=${labels[$((i % 3))]}; echo "$i${t}$i${t}${i}e${t}fiction${t}( x )${t}( y )${t}(ROOT x)${t}(ROOT y)${t}$(s $i)${t}$(s $((i + 1)))${t}$l${t}$l${t}$l${t}$l${t}$l${t}$l"; done
  } > "$g/MNLI/$f.tsv"
done

out=$(bash "$root/scripts/data/prepare_glue.sh" --glue-dir "$g" --out "$tmp/data/glue")
echo "$out"
grep -q "MRPC   train.tsv                     10        0" <<<"$out" || { echo "MRPC split wrong"; exit 1; }
grep -q "MRPC   dev.tsv                        2        0" <<<"$out" || { echo "MRPC dev wrong"; exit 1; }
grep -q "QQP    train.tsv                      8        1" <<<"$out" || { echo "QQP row not dropped"; exit 1; }
grep -q "SST-2  train.tsv                      9        0" <<<"$out" || { echo "SST-2 CRLF row lost"; exit 1; }
if grep -q $'\r' "$tmp/data/glue/SST-2/train.tsv"; then echo "CR kept"; exit 1; fi
grep -q "plans 345: --set train.max_updates=3" <<<"$out" || { echo "no max_updates hint"; exit 1; }
# A label outside the task's set is an error naming the file and line.
cp -r "$g/SST-2" "$tmp/bad"
printf 'x\t7\n' >> "$tmp/bad/train.tsv"
mkdir -p "$tmp/badglue" && mv "$tmp/bad" "$tmp/badglue/SST-2"
if err=$(bash "$root/scripts/data/prepare_glue.sh" --glue-dir "$tmp/badglue" --out "$tmp/x" --tasks SST-2 2>&1); then
  echo "bad label accepted"; exit 1
fi
grep -q 'train.tsv:11: label "7" is not one of: 0 1' <<<"$err" || { echo "unclear error: $err"; exit 1; }

# Every config reads its prepared files (a tiny model, two updates).
cat "$tmp"/data/glue/*/train.tsv | cut -f 1-12 > "$tmp/text.txt"
"$rotor" spm-train --input "$tmp/text.txt" --model-prefix "$tmp/spm" --vocab-size 100 \
  --user-defined-symbols "[MASK],[CLS],[SEP]" > /dev/null
cd "$tmp"
for cfg in "$root"/configs/glue/*.yaml; do
  name=$(basename "$cfg" .yaml)
  OMP_NUM_THREADS=1 "$rotor" train "$cfg" --set output_dir="$tmp/runs/$name" \
    --set model.init_from= --set data.spm_model="$tmp/spm.model" --set model.encoder_layers=1 \
    --set model.d_model=16 --set model.n_heads=2 --set model.d_ff=32 --set data.seq_len=64 \
    --set train.max_updates=2 --set train.max_epochs=0 --set train.batch_size=4 \
    --set train.valid_interval=2 --set train.save_interval=2 --set optim.warmup_updates=1 \
    > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; echo "configs/glue/$name.yaml failed"; exit 1; }
  grep -q '"split":"valid"' "$tmp/runs/$name/metrics.jsonl" || { echo "$name: no validation"; exit 1; }
done
grep -q '"split":"test"' "$tmp/runs/mnli/metrics.jsonl" || { echo "mnli: dev_mismatched not scored"; exit 1; }
grep -q '"spearman"' "$tmp/runs/stsb/metrics.jsonl" || { echo "stsb: no spearman"; exit 1; }
echo "prepare_glue ok"
