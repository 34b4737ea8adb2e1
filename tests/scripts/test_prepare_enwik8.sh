#!/usr/bin/env bash
# scripts/data/prepare_enwik8.sh on a tiny fake enwik8.zip (XML-like text with
# blank lines, a CRLF line, multi-byte UTF-8 and a character cut in two): the
# three parts are the file's bytes, split where --sizes says; bad inputs are
# one-line errors that write nothing; and configs/lm/enwik8_paper.yaml (made
# tiny) trains on the parts, every byte a token. Usage: test_prepare_enwik8.sh
# ROTOR_BINARY.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rotor=$(realpath "${1:?usage: test_prepare_enwik8.sh ROTOR_BINARY}")
script=$root/scripts/data/prepare_enwik8.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 3000 bytes of fake enwik8.
mkdir -p "$tmp/src"
{
  printf '<mediawiki>\n  <page>\n    <title>Grüße</title>\n\n'
  for i in $(seq 1 60); do printf "    <text>'''Item %02d''' is \xe4\xb8\xad\xe6\x96\x87 [[link]]</text>\r\n\n" "$i"; done
} > "$tmp/src/long"
head -c 3000 "$tmp/src/long" > "$tmp/src/enwik8"
[[ $(stat -c %s "$tmp/src/enwik8") == 3000 ]] || fail "fake enwik8 is not 3000 bytes"
(cd "$tmp/src" && zip -q "$tmp/enwik8.zip" enwik8)

out=$(bash "$script" "$tmp/enwik8.zip" --out "$tmp/data/enwik8" --sizes 2001,499,500)
echo "$out"
grep -q "train.txt 2001, valid.txt 499, test.txt 500 bytes" <<<"$out" || fail "summary: $out"
d=$tmp/data/enwik8
cat "$d/train.txt" "$d/valid.txt" "$d/test.txt" | cmp - "$tmp/src/enwik8" || fail "parts are not the file"
cmp <(head -c 2001 "$tmp/src/enwik8") "$d/train.txt" || fail "train is not the first bytes"
# The split cuts 中 (e4 b8 ad) after its first byte: the bytes are kept.
[[ $(head -c 2 "$d/valid.txt" | od -An -tx1 | tr -d ' ') == b8ad ]] || fail "the cut character changed"
cmp <(tail -c 500 "$tmp/src/enwik8") "$d/test.txt" || fail "test is not the last bytes"
grep -q $'\r' "$d/train.txt" || fail "a CR was dropped"
[[ -z $(find "$d" -name '.prepare_enwik8.*') ]] || fail "temporary files left"

# The default split is the standard one, checked against the file's size.
if err=$(bash "$script" "$tmp/enwik8.zip" --out "$tmp/x" 2>&1); then fail "a 3000-byte enwik8 split 90M/5M/5M"; fi
grep -q "enwik8 in $tmp/enwik8.zip has 3000 bytes, the split --sizes 90000000,5000000,5000000 needs 100000000" <<<"$err" || fail "unclear error: $err"
[[ ! -e $tmp/x/train.txt ]] || fail "a failed split wrote train.txt"
# Bad arguments and zips: one line each.
printf 'not a zip' > "$tmp/bad.zip"
(cd "$tmp/src" && cp enwik8 other && zip -q "$tmp/other.zip" other)
while IFS='|' read -r args expect; do
  # shellcheck disable=SC2086
  if err=$(bash "$script" $args 2>&1); then fail "accepted: $args"; fi
  grep -qF "$expect" <<<"$err" || fail "$args: unclear error: $err"
  [[ $(wc -l <<<"$err") == 1 ]] || fail "$args: more than one line: $err"
done <<EOF2
|ENWIK8_ZIP is required
$tmp/missing.zip|$tmp/missing.zip: no such file
$tmp/bad.zip|$tmp/bad.zip: not a zip file
$tmp/other.zip|holds no file named enwik8
$tmp/enwik8.zip --sizes 10,x,5|expected three positive byte counts
$tmp/enwik8.zip --frobnicate|unknown argument --frobnicate
EOF2

# The paper's config, made tiny, trains on the parts: the validation scores
# every byte of valid.txt but the first (bytes, line breaks included).
cd "$tmp"
log=$(OMP_NUM_THREADS=1 "$rotor" train "$root/configs/lm/enwik8_paper.yaml" \
  --set output_dir="$tmp/run" --set device=cpu --set precision=fp32 \
  --set model.decoder_layers=1 --set model.d_model=16 --set model.n_heads=2 --set model.d_ff=32 \
  --set model.max_positions=64 --set data.seq_len=64 --set train.batch_size=4 \
  --set train.max_updates=2 --set train.valid_interval=2 --set optim.warmup_updates=1 2>&1) ||
  { echo "$log"; fail "training on the parts failed"; }
grep -q "non-overlapping blocks of 64 tokens | 498 tokens" <<<"$log" || { echo "$log"; fail "valid is not 498 byte tokens"; }
grep -q "260 ids" <<<"$log" || { echo "$log"; fail "no byte tokenizer"; }
echo "test_prepare_enwik8: ok"
