#!/usr/bin/env bash
# End to end, offline, the WMT14 En-De recipe of docs/reproduce.md on a tiny
# sample: lines of newstest2014 (../shared/data) stand in for the corpora in a
# raw directory laid out as the statmt.org archives extract;
# prepare_wmt14_en_de.sh --raw-dir -> both configs/wmt14_en_de configs trained
# a few updates, shrunk with --set -> wmt14_en_de.sh (average, beam search,
# both BLEU scores). Every stage's output is checked.
#   bash tests/scripts/test_wmt14_pipeline.sh ROTOR_BINARY
# Exit 77 (skipped) without the shared data.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rotor=${1:?usage: test_wmt14_pipeline.sh ROTOR_BINARY}
data=$root/../shared/data/newstest2014
[[ -f $data/newstest2014.en && -f $data/newstest2014.de ]] || {
  echo "SKIPPED: $data/newstest2014.{en,de} not found"
  exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# ---- a raw directory as the archives extract ---------------------------------
raw=$tmp/raw
mkdir -p "$raw/training" "$raw/dev" "$raw/test-full"
slice() { sed -n "$2,$3p" "$data/newstest2014.$1"; }
for l in en de; do
  slice $l 1 900 >"$raw/training/europarl-v7.de-en.$l"
  slice $l 901 1500 >"$raw/commoncrawl.de-en.$l"
  slice $l 1501 2000 >"$raw/training/news-commentary-v9.de-en.$l"
  slice $l 2001 2100 >"$raw/dev/newstest2013.$l"
done
# Test set as SGML, with an entity to unescape.
sgm() {
  echo "<srcset setid=\"newstest2014\" srclang=\"any\">"
  echo "<doc sysid=\"ref\" docid=\"1\" genre=\"news\" origlang=\"en\">"
  local i=1
  while IFS= read -r line; do
    line=${line//&/&amp;}
    line=${line//</&lt;}
    line=${line//>/&gt;}
    echo "<seg id=\"$i\">$line</seg>"
    i=$((i + 1))
  done
  echo "</doc>"
  echo "</srcset>"
}
slice en 2101 2160 | sgm >"$raw/test-full/newstest2014-deen-src.en.sgm"
slice de 2101 2160 | sgm >"$raw/test-full/newstest2014-deen-ref.de.sgm"
# One line with an ampersand, to check the entity round trip.
sed -i 's#<seg id="3">#<seg id="3">A \&amp; B #' "$raw/test-full/newstest2014-deen-src.en.sgm"

# ---- prepare -----------------------------------------------------------------
out=$tmp/wmt14
bash "$root/scripts/data/prepare_wmt14_en_de.sh" --raw-dir "$raw" --out "$out" --rotor "$rotor" \
  --vocab-size 600 --threads 2 >"$tmp/prepare.log" 2>&1 || {
  cat "$tmp/prepare.log"
  fail "prepare_wmt14_en_de.sh failed"
}
cat "$tmp/prepare.log"
[[ $(wc -l <"$out/train.en") == 2000 ]] || fail "train.en should hold the 2000 corpus lines"
[[ $(wc -l <"$out/valid.de") == 100 ]] || fail "valid.de should hold newstest2013's 100 lines"
[[ $(wc -l <"$out/test.en") == 60 ]] || fail "test.en should hold the 60 <seg> lines"
grep -q '^A & B ' "$out/test.en" || fail "SGML entities not unescaped in test.en"
grep -q '<seg' "$out/test.en" && fail "SGML markup left in test.en"
[[ "$(sed -n 60p "$out/test.de")" == "$(slice de 2160 2160 | sed -E 's/[[:space:]]+/ /g; s/^ //; s/ $//')" ]] ||
  fail "test.de line 60 differs from the reference"
[[ -s $out/spm.model ]] || fail "no spm.model"
for s in train valid test; do
  for f in src.bin src.idx tgt.bin tgt.idx; do [[ -s $out/bin/$s.$f ]] || fail "no bin/$s.$f"; done
done
grep -q "kept" "$tmp/prepare.log" || fail "prepare did not report what it kept"
# Rerunning reuses every step.
bash "$root/scripts/data/prepare_wmt14_en_de.sh" --raw-dir "$raw" --out "$out" --rotor "$rotor" \
  --vocab-size 600 >"$tmp/prepare2.log" 2>&1 || fail "rerun of prepare failed"
grep -q "reusing $out/spm.model" "$tmp/prepare2.log" || fail "rerun retrained the SentencePiece model"
# A raw directory without a corpus is a one-line error naming the file.
mkdir -p "$tmp/empty"
if err=$(bash "$root/scripts/data/prepare_wmt14_en_de.sh" --raw-dir "$tmp/empty" --out "$tmp/x" \
  --rotor "$rotor" 2>&1); then fail "prepare accepted an empty raw directory"; fi
grep -q "missing $tmp/empty/training/europarl-v7.de-en.en" <<<"$err" || fail "unclear error: $err"

# ---- train both configs, shrunk ---------------------------------------------
for m in transformer_base roformer_base; do
  "$rotor" train "$root/configs/wmt14_en_de/$m.yaml" \
    --set output_dir="$tmp/runs/$m" --set device=cpu \
    --set data.train="$out/bin/train" --set data.valid="$out/bin/valid" \
    --set data.spm_model="$out/spm.model" --set data.vocab_size=600 --set data.max_tokens=600 \
    --set model.encoder_layers=1 --set model.decoder_layers=1 --set model.d_model=32 \
    --set model.n_heads=2 --set model.d_ff=64 --set model.max_positions=256 \
    --set train.max_updates=6 --set train.save_interval=2 --set train.valid_interval=3 \
    --set train.log_interval=2 --set optim.warmup_updates=3 \
    >"$tmp/train_$m.log" 2>&1 || {
    cat "$tmp/train_$m.log"
    fail "training $m failed"
  }
  grep -q "update      6" "$tmp/train_$m.log" || fail "$m did not reach update 6"
  for s in 2 4 6; do
    [[ -f $tmp/runs/$m/checkpoints/step_$s/model.safetensors ]] || fail "$m: no checkpoint step_$s"
  done
  grep -q '"split": *"valid"' "$tmp/runs/$m/metrics.jsonl" || fail "$m: no validation in metrics.jsonl"
done
grep -q "rope positions" "$tmp/train_roformer_base.log" || fail "roformer_base did not use RoPE"
grep -q "sinusoidal positions" "$tmp/train_transformer_base.log" || fail "transformer_base is not sinusoidal"

# ---- evaluate: average, translate, both scores --------------------------------
for m in transformer_base roformer_base; do
  bash "$root/scripts/eval/wmt14_en_de.sh" "$tmp/runs/$m" --data "$out" --rotor "$rotor" \
    --device cpu >"$tmp/eval_$m.log" 2>&1 || {
    cat "$tmp/eval_$m.log"
    fail "wmt14_en_de.sh $m failed"
  }
  cat "$tmp/eval_$m.log"
  grep -q "averaging the last 3 checkpoints" "$tmp/eval_$m.log" || fail "$m: not the last 3 checkpoints averaged"
  [[ -f $tmp/runs/$m/eval/avg_last3/model.safetensors ]] || fail "$m: no averaged checkpoint"
  [[ $(wc -l <"$tmp/runs/$m/eval/newstest2014.hyp") == 60 ]] || fail "$m: not 60 output lines"
  scores=$tmp/runs/$m/eval/newstest2014.scores
  grep -Eq '^sacreBLEU-compatible BLEU: [0-9]+\.[0-9]+ \(BLEU = .*tok:13a' "$scores" ||
    fail "$m: no sacreBLEU-compatible score"
  grep -Eq '^tokenized compound-split BLEU: [0-9]+\.[0-9]+ \(BLEU = ' "$scores" ||
    fail "$m: no tokenized compound-split score"
done
# A run directory without checkpoints is a one-line error.
mkdir -p "$tmp/runs/none"
if err=$(bash "$root/scripts/eval/wmt14_en_de.sh" "$tmp/runs/none" --data "$out" --rotor "$rotor" 2>&1); then
  fail "eval accepted a run without checkpoints"
fi
grep -q "no checkpoints in" <<<"$err" || fail "unclear error: $err"
echo "wmt14 pipeline ok"
