#!/usr/bin/env bash
# scripts/plot_curves.py: two runs' metrics.jsonl -> a PNG and a table.
# Exit 77 (skipped) when no python3 with matplotlib is found.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=""
for cand in python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null && "$cand" -c "import matplotlib" 2>/dev/null; then py=$cand; break; fi
done
[[ -n $py ]] || { echo "SKIPPED: no python3 with matplotlib"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for run in a b; do
  mkdir -p "$tmp/$run"
  for step in 10 20 30 40; do
    echo "{\"step\": $step, \"split\": \"train\", \"loss\": $((100 - step))}" >> "$tmp/$run/metrics.jsonl"
  done
  echo "{\"step\": 20, \"split\": \"valid\", \"loss\": 5.5}" >> "$tmp/$run/metrics.jsonl"
  echo "{\"step\": 40, \"split\": \"valid\", \"loss\": 4.25}" >> "$tmp/$run/metrics.jsonl"
  # rotor writes a non-finite value (a diverged run) as null
  echo "{\"step\": 60, \"split\": \"train\", \"loss\": null}" >> "$tmp/$run/metrics.jsonl"
  echo "{\"step\": 60, \"split\": \"valid\", \"loss\": null}" >> "$tmp/$run/metrics.jsonl"
done
out=$("$py" "$root/scripts/plot_curves.py" "$tmp/a" "$tmp/b/metrics.jsonl" --label A --label B \
  --output "$tmp/curves.png" --table 20,40,60)
[[ $(head -c 8 "$tmp/curves.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || { echo "not a PNG"; exit 1; }
grep -q "| 40 | 4.2500 | 4.2500 |" <<<"$out" || { echo "table wrong: $out"; exit 1; }
grep -q "| 60 | nan | nan |" <<<"$out" || { echo "table wrong: $out"; exit 1; }
# A broken metrics file is a one-line error, not a traceback.
echo "not json" > "$tmp/a/metrics.jsonl"
if err=$("$py" "$root/scripts/plot_curves.py" "$tmp/a" --output "$tmp/x.png" 2>&1); then echo "accepted bad input"; exit 1; fi
grep -q "metrics.jsonl:1: not JSON" <<<"$err" || { echo "unclear error: $err"; exit 1; }
echo "plot_curves ok"
