#!/usr/bin/env bash
# WMT14 English-German for the RoFormer paper's translation experiment
# (docs/reproduce.md): download, extract, one joint BPE SentencePiece model,
# binarized train/valid/test for `rotor train`.
#
#   scripts/data/prepare_wmt14_en_de.sh [--out DIR] [--raw-dir DIR] [--rotor PATH]
#       [--vocab-size N] [--input-sentence-size N] [--character-coverage F] [--threads N]
#
#   --out DIR        where everything goes (default data/wmt14_en_de)
#   --raw-dir DIR    use the corpora already in DIR and download nothing (offline);
#                    without it the archives are downloaded into OUT/raw and extracted
#   --rotor PATH     the rotor binary (default build/rotor, else build-quickstart/rotor)
#   --vocab-size N   joint BPE vocabulary (default 37000, the paper's)
#   --input-sentence-size N  sentences SentencePiece samples from the training
#                    text (default 2000000; 0 = all 9M, slow and memory-hungry)
#   --character-coverage F   SentencePiece character coverage (default 0.9999:
#                    CommonCrawl's stray characters become <unk>)
#   --threads N      threads for SentencePiece and encoding (default: all cores)
#
# The raw directory holds the archives extracted in place, as downloaded from
# statmt.org (the corpora of fairseq's and tensor2tensor's WMT14 recipes):
#   training-parallel-europarl-v7.tgz -> training/europarl-v7.de-en.{en,de}
#   training-parallel-commoncrawl.tgz -> commoncrawl.de-en.{en,de}
#   training-parallel-nc-v9.tgz       -> training/news-commentary-v9.de-en.{en,de}
#   dev.tgz (WMT17's)                 -> dev/newstest2013.{en,de}            (plain text)
#   test-full.tgz                     -> test-full/newstest2014-deen-src.en.sgm
#                                        test-full/newstest2014-deen-ref.de.sgm  (SGML)
# Other files there are ignored.
#
# Writes, under OUT:
#   train.{en,de}   the three training corpora concatenated (~4.5M lines)
#   valid.{en,de}   newstest2013 (3,000 lines)
#   test.{en,de}    newstest2014, the full set (3,003 lines): <seg> text of the SGML,
#                   entities unescaped, whitespace trimmed; the eval scripts score it
#   spm.model       joint source+target BPE (`rotor spm-train`) on raw text: no Moses
#                   normalization or tokenization (SentencePiece works on raw text)
#   bin/{train,valid,test}.{src,tgt}.{bin,idx}   `rotor prepare` output; train and
#                   valid cleaned as fairseq cleans them (length 1-250 tokens, ratio
#                   1.5, here in SentencePiece tokens), test kept whole
# A step whose outputs are newer than its inputs is skipped: rerunning resumes.
set -euo pipefail

me=prepare_wmt14_en_de.sh
die() {
  echo "$me: error: $*" >&2
  exit 1
}
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit "${1:-2}"
}

repo=$(cd "$(dirname "$0")/../.." && pwd)
out=data/wmt14_en_de
raw=""
rotor=""
vocab=37000
sample=2000000
coverage=0.9999
threads=$(nproc 2>/dev/null || echo 4)

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --raw-dir) raw=${2:?--raw-dir needs a directory}; shift 2 ;;
    --rotor) rotor=${2:?--rotor needs a path}; shift 2 ;;
    --vocab-size) vocab=${2:?--vocab-size needs a number}; shift 2 ;;
    --input-sentence-size) sample=${2:?--input-sentence-size needs a number}; shift 2 ;;
    --character-coverage) coverage=${2:?--character-coverage needs a number}; shift 2 ;;
    --threads) threads=${2:?--threads needs a number}; shift 2 ;;
    -h | --help) usage 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$vocab" =~ ^[0-9]+$ ]] || die "--vocab-size $vocab is not a number"
[[ "$sample" =~ ^[0-9]+$ ]] || die "--input-sentence-size $sample is not a number"
[[ "$threads" =~ ^[0-9]+$ ]] || die "--threads $threads is not a number"

if [[ -z "$rotor" ]]; then
  for c in "$repo/build/rotor" "$repo/build-quickstart/rotor"; do
    if [[ -x "$c" ]]; then rotor=$c; break; fi
  done
  [[ -n "$rotor" ]] || die "no rotor binary in $repo/build or $repo/build-quickstart (build it, or pass --rotor PATH)"
fi
[[ -x "$rotor" ]] || die "--rotor $rotor is not an executable"

# name|archive|URL; the files each archive must provide are checked below.
archives=(
  "europarl|training-parallel-europarl-v7.tgz|http://statmt.org/wmt13/training-parallel-europarl-v7.tgz"
  "commoncrawl|training-parallel-commoncrawl.tgz|http://statmt.org/wmt13/training-parallel-commoncrawl.tgz"
  "news-commentary|training-parallel-nc-v9.tgz|http://statmt.org/wmt14/training-parallel-nc-v9.tgz"
  "newstest2013|dev.tgz|http://data.statmt.org/wmt17/translation-task/dev.tgz"
  "newstest2014|test-full.tgz|http://statmt.org/wmt14/test-full.tgz"
)
train_corpora=(training/europarl-v7.de-en commoncrawl.de-en training/news-commentary-v9.de-en)
dev_prefix=dev/newstest2013
test_src=test-full/newstest2014-deen-src.en.sgm
test_ref=test-full/newstest2014-deen-ref.de.sgm

# The raw file that comes from archive $1 (for messages).
archive_of() {
  case "$1" in
    training/europarl*) echo training-parallel-europarl-v7.tgz ;;
    commoncrawl*) echo training-parallel-commoncrawl.tgz ;;
    training/news-commentary*) echo training-parallel-nc-v9.tgz ;;
    dev/*) echo dev.tgz ;;
    *) echo test-full.tgz ;;
  esac
}
required_files() {
  local c
  for c in "${train_corpora[@]}"; do echo "$c.en" "$c.de"; done
  echo "$dev_prefix.en" "$dev_prefix.de" "$test_src" "$test_ref"
}

mkdir -p "$out"
if [[ -z "$raw" ]]; then
  raw=$out/raw
  mkdir -p "$raw"
  if command -v curl >/dev/null; then
    fetch() { curl -fL --retry 3 -o "$2" "$1"; }
  elif command -v wget >/dev/null; then
    fetch() { wget -q --tries=3 -O "$2" "$1"; }
  else
    die "neither curl nor wget is installed (or download the archives yourself and pass --raw-dir)"
  fi
  for entry in "${archives[@]}"; do
    IFS='|' read -r name tgz url <<<"$entry"
    if [[ ! -f "$raw/$tgz" ]]; then
      echo "$me: downloading $name: $url"
      fetch "$url" "$raw/$tgz.part" || die "download of $url failed"
      mv "$raw/$tgz.part" "$raw/$tgz"
    fi
    if [[ ! -f "$raw/.$tgz.extracted" ]]; then
      echo "$me: extracting $tgz"
      tar -xzf "$raw/$tgz" -C "$raw" || die "cannot extract $raw/$tgz"
      touch "$raw/.$tgz.extracted"
    fi
  done
else
  [[ -d "$raw" ]] || die "--raw-dir $raw is not a directory"
fi
for f in $(required_files); do
  [[ -f "$raw/$f" ]] || die "missing $raw/$f (from $(archive_of "$f"); see --help for the layout)"
done

lines() { wc -l <"$1" | tr -d ' '; }
# True when file $1 exists and is newer than every later argument.
fresh() {
  local target=$1 dep
  shift
  [[ -s "$target" ]] || return 1
  for dep in "$@"; do [[ "$target" -nt "$dep" ]] || return 1; done
}

# SGML -> one segment a line: the text between <seg ...> and </seg>, the five
# XML entities unescaped (&amp; last), whitespace runs collapsed and trimmed.
sgm_to_text() {
  LC_ALL=C grep '<seg[ >]' "$1" |
    LC_ALL=C sed -E -e 's/^.*<seg[^>]*>//' -e 's#</seg>.*$##' \
      -e 's/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g' -e "s/&apos;/'/g; s/&#39;/'/g" -e 's/&amp;/\&/g' \
      -e 's/[[:space:]]+/ /g; s/^ //; s/ $//'
}

# ---- text ------------------------------------------------------------------
train_inputs=()
for c in "${train_corpora[@]}"; do
  ne=$(lines "$raw/$c.en")
  nd=$(lines "$raw/$c.de")
  [[ "$ne" == "$nd" ]] || die "$raw/$c.en has $ne lines but $raw/$c.de has $nd"
  echo "$me: $c: $ne sentence pairs"
  train_inputs+=("$raw/$c.en" "$raw/$c.de")
done
if ! fresh "$out/train.de" "${train_inputs[@]}" || ! fresh "$out/train.en" "${train_inputs[@]}"; then
  for l in en de; do
    files=()
    for c in "${train_corpora[@]}"; do files+=("$raw/$c.$l"); done
    cat "${files[@]}" >"$out/train.$l.tmp"
    mv "$out/train.$l.tmp" "$out/train.$l"
  done
fi
for l in en de; do
  fresh "$out/valid.$l" "$raw/$dev_prefix.$l" || cp "$raw/$dev_prefix.$l" "$out/valid.$l"
done
for pair in "en|$test_src" "de|$test_ref"; do
  IFS='|' read -r l sgm <<<"$pair"
  if ! fresh "$out/test.$l" "$raw/$sgm"; then
    sgm_to_text "$raw/$sgm" >"$out/test.$l.tmp" || die "no <seg> lines in $raw/$sgm"
    mv "$out/test.$l.tmp" "$out/test.$l"
  fi
done
for split in train valid test; do
  ne=$(lines "$out/$split.en")
  nd=$(lines "$out/$split.de")
  [[ "$ne" == "$nd" ]] || die "$out/$split.en has $ne lines but $out/$split.de has $nd"
  [[ "$ne" -gt 0 ]] || die "$out/$split.en is empty"
done
echo "$me: text: train $(lines "$out/train.en"), valid (newstest2013) $(lines "$out/valid.en"), test (newstest2014) $(lines "$out/test.en") lines"
if [[ "$(lines "$out/test.en")" != 3003 ]]; then
  echo "$me: note: the full newstest2014 has 3003 lines; this test set has $(lines "$out/test.en")"
fi

# ---- SentencePiece -----------------------------------------------------------
if fresh "$out/spm.model" "$out/train.en" "$out/train.de"; then
  echo "$me: reusing $out/spm.model (delete it to retrain)"
else
  echo "$me: training a joint BPE SentencePiece model, $vocab pieces, on $sample sampled sentences"
  "$rotor" spm-train --input "$out/train.en" --input "$out/train.de" --model-prefix "$out/spm" \
    --vocab-size "$vocab" --model-type bpe --character-coverage "$coverage" \
    --input-sentence-size "$sample" --threads "$threads"
fi

# ---- binarize ----------------------------------------------------------------
mkdir -p "$out/bin"
for split in train valid test; do
  if fresh "$out/bin/$split.tgt.idx" "$out/$split.en" "$out/$split.de" "$out/spm.model"; then
    echo "$me: $split: reusing $out/bin/$split.{src,tgt}.{bin,idx}"
    continue
  fi
  if [[ "$split" == test ]]; then
    clean=(--min-len 1 --max-len 0 --max-len-ratio 0)  # every line (empty ones cannot be stored)
  else
    clean=(--min-len 1 --max-len 250 --max-len-ratio 1.5)
  fi
  echo "$me: $split: binarizing (${clean[*]})"
  "$rotor" prepare --spm "$out/spm.model" --src "$out/$split.en" --tgt "$out/$split.de" \
    --output-prefix "$out/bin/$split" --threads "$threads" "${clean[@]}"
done

echo "$me: done. Train with"
echo "  rotor train configs/wmt14_en_de/roformer_base.yaml --set data.train=$out/bin/train --set data.valid=$out/bin/valid --set data.spm_model=$out/spm.model"
echo "(those are the configs' defaults when --out is data/wmt14_en_de)"
