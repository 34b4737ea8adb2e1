#!/usr/bin/env bash
# scripts/compare_positions.py end to end on a smoke run: rope and t5 on the
# translation and lm tasks, 3 updates each, small scoring sets -> the
# Markdown table has their rows, the JSON their numbers; a second run skips
# every finished run; a run whose done marker is gone is scored again from
# its checkpoint; a refused encoding is a table row, not a crash.
#   bash tests/scripts/test_compare_positions.sh ROTOR_BINARY
# Exit 77 (skipped) without the shared data (WikiText-2 for the lm task) or
# without python3.
set -euo pipefail
command -v python3 >/dev/null || {
  echo "SKIPPED: python3 not found"
  exit 77
}
root=$(cd "$(dirname "$0")/../.." && pwd)
rotor=$(cd "$(dirname "${1:?usage: test_compare_positions.sh ROTOR_BINARY}")" && pwd)/$(basename "$1")
data=$root/../shared/data/wikitext-2
[[ -f $data/valid.txt && -f $data/test.txt ]] || {
  echo "SKIPPED: $data/{test,valid}.txt not found"
  exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
smoke=(--rotor "$rotor" --updates 3 --encodings rope,t5 --tasks translation,lm --lengths 128,256
  --eval-bytes 8192 --test-lines 50 --valid-bytes 16384)
cp_py() { python3 "$root/scripts/compare_positions.py" "$@"; }

out=$tmp/out
cp_py "${smoke[@]}" --out "$out" >"$tmp/log1" 2>&1 || { cat "$tmp/log1"; fail "first run"; }
for row in "| translation | rope | 3 |" "| translation | t5 | 3 |" "| lm | rope | 3 |" "| lm | t5 | 3 |"; do
  grep -qF "$row" "$out/results.md" || fail "results.md lacks a row \"$row\": $(cat "$out/results.md")"
done
grep -qF "| loss @128 | loss @256 |" "$out/results.md" || fail "no length columns: $(cat "$out/results.md")"
python3 - "$out/compare_positions.json" <<'PY' || fail "JSON check"
import json, math, sys
j = json.load(open(sys.argv[1]))
def num(v):
    return isinstance(v, (int, float)) and math.isfinite(v)
assert "rope" in j["registered"] and "t5" in j["registered"], j["registered"]
runs = {(r["task"], r["position"]): r for r in j["runs"]}
want = [("lm", "rope"), ("lm", "t5"), ("translation", "rope"), ("translation", "t5")]
assert sorted(runs) == want, sorted(runs)
for key, r in runs.items():
    assert r["status"] == "done" and r["updates"] == 3, (key, r["status"], r.get("error"))
    for f in ("valid_loss", "ms_per_update", "train_seconds"):
        assert num(r[f]) and r[f] > 0, (key, f, r[f])
    assert r["valid_curve"] and r["valid_curve"][-1][0] == 3, (key, r["valid_curve"])
    if key[0] == "translation":
        for split in ("test", "test_long"):
            t = r["translation"][split]
            assert num(t["bleu_char"]) and num(t["exact"]) and t["lines"] == 50, (key, t)
    else:
        assert [p["length"] for p in r["lengths"]] == [128, 256], (key, r["lengths"])
        assert all(num(p["loss"]) for p in r["lengths"]), (key, r["lengths"])
assert j["settings"]["lm_max_positions"] == 256, j["settings"]
PY
if python3 -c "import matplotlib" 2>/dev/null || /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  [[ $(head -c 8 "$out/compare_positions.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
    fail "no PNG"
fi

# Again: every run skipped, the same table. Without lm/t5's done marker that
# run is scored again from its checkpoint, not retrained.
cp "$out/results.md" "$tmp/results1.md"
cp_py "${smoke[@]}" --out "$out" >"$tmp/log2" 2>&1 || { cat "$tmp/log2"; fail "second run"; }
[[ $(grep -c "done before, skipped" "$tmp/log2") -eq 4 ]] || fail "not all skipped: $(cat "$tmp/log2")"
diff <(grep '^|' "$tmp/results1.md") <(grep '^|' "$out/results.md") || fail "the table changed"
rm "$out/lm/t5/compare_done.json"
cp_py "${smoke[@]}" --out "$out" >"$tmp/log3" 2>&1 || { cat "$tmp/log3"; fail "third run"; }
grep -qF "lm t5: trained to update 3 before; scoring" "$tmp/log3" || fail "not rescored: $(cat "$tmp/log3")"
[[ -f $out/lm/t5/compare_done.json ]] || fail "no done marker after rescoring"
# Another --updates in the same output directory is refused.
if cp_py "${smoke[@]}" --updates 4 --out "$out" >"$tmp/log4" 2>&1; then fail "accepted other settings"; fi
grep -qF "holds runs made with updates = 3, not 4" "$tmp/log4" || fail "unclear error: $(cat "$tmp/log4")"

# A setting of rope alone: t5 refused (a row), rope trained; exit 0.
out2=$tmp/refused
cp_py --rotor "$rotor" --updates 1 --encodings t5 --tasks lm --lengths 128 --eval-bytes 4096 \
  --valid-bytes 4096 --set model.rope.scaling=linear --out "$out2" >"$tmp/log5" 2>&1 ||
  { cat "$tmp/log5"; fail "refusal run"; }
grep -qF "| lm | t5 | - | refused: rotor: error: " "$out2/results.md" ||
  fail "no refused row: $(cat "$out2/results.md")"
grep -qF "model.rope.scaling" "$out2/results.md" ||
  fail "refusal without rotor's reason: $(cat "$out2/results.md")"
echo "compare_positions ok"
