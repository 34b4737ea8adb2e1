#!/usr/bin/env bash
# enwik8 for the RoFormer paper's character-level language model (section
# 4.4; configs/lm/enwik8_paper.yaml): the standard split of a downloaded
# enwik8.zip (the Hutter Prize file, http://mattmahoney.net/dc/enwik8.zip).
# Nothing is downloaded.
#
#   scripts/data/prepare_enwik8.sh ENWIK8_ZIP [--out DIR]
#
#   ENWIK8_ZIP     the zip holding the file enwik8 (10^8 bytes)
#   --out DIR      where the files go (default data/enwik8)
#   --sizes T,V,E  the split in bytes (default 90000000,5000000,5000000: the
#                  first 90M bytes train, the next 5M valid, the last 5M
#                  test); they must add up to the file's size
#
# Writes DIR/train.txt, DIR/valid.txt and DIR/test.txt: the raw bytes of each
# part, unchanged. A run with data.tokenizer: bytes and task lm reads each as
# one byte stream: every byte is one token, line breaks (and blank lines)
# included, and no end-of-text token is added between lines, so that bits
# per byte on test.txt are the usual enwik8 figure (over every byte but the
# first). Invalid UTF-8 (a character cut by the split) is kept as its bytes.
# Each file appears whole or not at all; rerunning replaces them.
set -euo pipefail
zip="" out="data/enwik8" sizes="90000000,5000000,5000000"
while (($#)); do
  case $1 in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --sizes) sizes=${2:?--sizes needs T,V,E}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "prepare_enwik8: unknown argument $1 (see --help)" >&2; exit 2 ;;
    *)
      [[ -z $zip ]] || { echo "prepare_enwik8: one zip only, got $zip and $1" >&2; exit 2; }
      zip=$1; shift ;;
  esac
done
[[ -n $zip ]] || { echo "prepare_enwik8: ENWIK8_ZIP is required (see --help)" >&2; exit 2; }
[[ -f $zip ]] || { echo "prepare_enwik8: $zip: no such file" >&2; exit 1; }
IFS=, read -r n_train n_valid n_test extra <<<"$sizes"
for n in "$n_train" "$n_valid" "$n_test"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "prepare_enwik8: --sizes $sizes: expected three positive byte counts T,V,E" >&2; exit 2; }
done
[[ -z ${extra:-} ]] || { echo "prepare_enwik8: --sizes $sizes: expected three byte counts" >&2; exit 2; }
command -v unzip > /dev/null || { echo "prepare_enwik8: needs unzip" >&2; exit 1; }
if ! unzip -Z1 "$zip" > /dev/null 2>&1; then
  echo "prepare_enwik8: $zip: not a zip file" >&2; exit 1
fi
unzip -Z1 "$zip" | grep -qx enwik8 || { echo "prepare_enwik8: $zip holds no file named enwik8" >&2; exit 1; }

mkdir -p "$out"
tmp=$(mktemp -d "$out/.prepare_enwik8.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unzip -p "$zip" enwik8 > "$tmp/enwik8" || { echo "prepare_enwik8: $zip: cannot extract enwik8" >&2; exit 1; }
total=$(stat -c %s "$tmp/enwik8")
want=$((n_train + n_valid + n_test))
if ((total != want)); then
  echo "prepare_enwik8: enwik8 in $zip has $total bytes, the split --sizes $sizes needs $want" >&2
  exit 1
fi
head -c "$n_train" "$tmp/enwik8" > "$tmp/train.txt"
tail -c +"$((n_train + 1))" "$tmp/enwik8" | head -c "$n_valid" > "$tmp/valid.txt"
tail -c "$n_test" "$tmp/enwik8" > "$tmp/test.txt"
for f in train valid test; do
  sync "$tmp/$f.txt" 2> /dev/null || true
  mv -f "$tmp/$f.txt" "$out/$f.txt"
done
printf "prepare_enwik8: %s -> %s: train.txt %d, valid.txt %d, test.txt %d bytes\n" \
  "$zip" "$out" "$(stat -c %s "$out/train.txt")" "$(stat -c %s "$out/valid.txt")" \
  "$(stat -c %s "$out/test.txt")"
