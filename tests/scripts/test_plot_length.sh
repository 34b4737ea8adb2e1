#!/usr/bin/env bash
# scripts/plot_length.py: two hand-made `rotor eval --lengths ... --json`
# outputs (one stopped at its position table) -> a PNG and a table.
# Exit 77 (skipped) when no python3 with matplotlib is found.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=""
for cand in python3 /usr/bin/python3 "$root/.venv/bin/python3"; do
  if command -v "$cand" >/dev/null && "$cand" -c "import matplotlib" 2>/dev/null; then py=$cand; break; fi
done
[[ -n $py ]] || { echo "SKIPPED: no python3 with matplotlib"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/rope.json" <<'J'
{"checkpoint": "runs/a", "task": "lm", "lengths": [
 {"length": 128, "tokens": 1000, "loss": 1.5, "ppl": 4.48, "bpb": 2.164},
 {"length": 256, "tokens": 1000, "loss": 1.25, "ppl": 3.49, "bpb": 1.803},
 {"length": 512, "tokens": 1000, "loss": 2.0, "ppl": 7.39, "bpb": null}]}
J
cat > "$tmp/learned.json" <<'J'
{"checkpoint": "runs/b", "task": "lm", "lengths": [
 {"length": 128, "tokens": 1000, "loss": 1.75, "ppl": 5.75, "bpb": 2.5}],
 "stopped": "stopped at length 256: the table has 128 rows"}
J
out=$("$py" "$root/scripts/plot_length.py" "$tmp/rope.json" "$tmp/learned.json" \
  --label RoPE --label learned --output "$tmp/len.png" --table)
[[ $(head -c 8 "$tmp/len.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || { echo "not a PNG"; exit 1; }
for row in "| length | RoPE | learned |" "| 128 | 1.5000 | 1.7500 |" "| 256 | 1.2500 | - |" \
  "| 512 | 2.0000 | - |" "learned: no loss at 256, 512 (stopped at length 256: the table has 128 rows)"; do
  grep -qxF "$row" <<<"$out" || { echo "table lacks \"$row\": $out"; exit 1; }
done
# --metric picks another field; a null figure reads nan.
out=$("$py" "$root/scripts/plot_length.py" "$tmp/rope.json" --metric bpb --output "$tmp/b.png" --table)
grep -qxF "| length | rope |" <<<"$out" || { echo "default label wrong: $out"; exit 1; }
grep -qxF "| 256 | 1.8030 |" <<<"$out" || { echo "bpb table wrong: $out"; exit 1; }
grep -qxF "| 512 | nan |" <<<"$out" || { echo "null not nan: $out"; exit 1; }
# Bad input is a one-line error naming the file, not a traceback.
echo '{"loss": 1}' > "$tmp/bad.json"
if err=$("$py" "$root/scripts/plot_length.py" "$tmp/bad.json" --output "$tmp/x.png" 2>&1); then echo "accepted bad input"; exit 1; fi
grep -q "bad.json: no \"lengths\" list" <<<"$err" || { echo "unclear error: $err"; exit 1; }
printf '{"lengths": [\n oops' > "$tmp/bad.json"
if err=$("$py" "$root/scripts/plot_length.py" "$tmp/bad.json" --output "$tmp/x.png" 2>&1); then echo "accepted bad input"; exit 1; fi
grep -q "bad.json:2: not JSON" <<<"$err" || { echo "unclear error: $err"; exit 1; }
if err=$("$py" "$root/scripts/plot_length.py" "$tmp/rope.json" --metric accuracy --output "$tmp/x.png" 2>&1); then echo "accepted a missing metric"; exit 1; fi
grep -q "rope.json: lengths\[0\] has no integer \"length\" and \"accuracy\"" <<<"$err" || { echo "unclear error: $err"; exit 1; }
[[ $(wc -l <<<"$err") -eq 1 ]] || { echo "not one line: $err"; exit 1; }
echo "plot_length ok"
