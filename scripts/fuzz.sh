#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer) in a build directory of their own and runs each
# for a bounded time on a copy of its seed corpus (docs/testing.md, Fuzzing).
# Exits non-zero when any target finds a crash, a leak, a sanitizer report, a
# timeout or a broken property, and prints the reproducer.
#   FUZZ_SECONDS=30          seconds per target
#   FUZZ_JOBS=$(nproc)       targets run at once
#   FUZZ_TARGETS="a b"       targets to run (default: all, e.g. "safetensors config")
#   FUZZ_BUILD_DIR=build-fuzz
#   FUZZ_CXX=clang++-14      the compiler (libFuzzer comes with clang)
# Reproduce a finding: BUILD/tests/fuzz/fuzz_NAME REPRODUCER (runs that input once).
# The work corpus (BUILD/corpus/NAME) keeps what earlier runs found; the
# repository's seeds (tests/fuzz/corpus/NAME) are only read.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-30}
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
cxx=${FUZZ_CXX:-clang++-14}
# The largest input per target: a little above its largest seed, so that
# mutations stay near the formats (a header, a config, an index).
all_targets="safetensors config corpus json hf_index eval tsv ehr"
declare -A max_len=([safetensors]=4096 [config]=4096 [corpus]=1024 [json]=2048 [hf_index]=2048 [eval]=1024 [tsv]=1024 [ehr]=2048)
targets=${FUZZ_TARGETS:-$all_targets}

if ! command -v "$cxx" >/dev/null; then
  echo "rotor: $cxx not found (install clang-14 and libclang-rt-14-dev: scripts/deps.sh)" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# -O1 -g without NDEBUG: assertions of the libraries stay on (the sanitizers'
# recommended optimization level).
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" "${launcher[@]}" \
  -DROTOR_CUDA=OFF -DROTOR_BUILD_TESTS=OFF -DROTOR_BUILD_FUZZERS=ON >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log" >&2; exit 1; }
build_targets=()
for t in $targets; do
  [[ -n "${max_len[$t]:-}" ]] || { echo "rotor: unknown fuzz target '$t' ($all_targets)" >&2; exit 1; }
  build_targets+=(--target "fuzz_$t")
done
cmake --build "$build_dir" -j "$(nproc)" "${build_targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One target per core at a time (libFuzzer runs one thread): the wall time
# is about targets / cores x FUZZ_SECONDS. Each writes its own log and exit
# status; the results are read back in the targets' order.
jobs_max=${FUZZ_JOBS:-$(nproc)}
run_target() {
  local t=$1 work="$build_dir/corpus/$1" artifacts="$build_dir/artifacts/$1" log="$build_dir/logs/$1.log"
  local rc=0
  # Findings besides crashes: an input that runs 25 s (a hang), one allocation
  # of 1 GB from a few KB of input; the RSS limit leaves room for long runs.
  "$build_dir/tests/fuzz/fuzz_$t" "$work" -max_total_time="$seconds" -max_len="${max_len[$t]}" \
    -timeout=25 -rss_limit_mb=4096 -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    >"$log" 2>&1 || rc=$?
  echo "$rc" >"$build_dir/logs/$t.rc"
}
for t in $targets; do
  mkdir -p "$build_dir/corpus/$t" "$build_dir/artifacts/$t" "$build_dir/logs"
  rm -f "$build_dir/logs/$t.rc"
  cp -r tests/fuzz/corpus/"$t"/. "$build_dir/corpus/$t"/
  echo "fuzz_$t: ${seconds}s, max_len ${max_len[$t]}"
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  run_target "$t" &
done
wait
failed=()
for t in $targets; do
  log="$build_dir/logs/$t.log"
  if [[ "$(cat "$build_dir/logs/$t.rc" 2>/dev/null)" == 0 ]]; then
    echo "fuzz_$t:"
    grep -aE '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 | sed 's/^/  /' || true
  else
    failed+=("$t")
    tail -n 60 "$log" >&2
    reproducer=$(grep -aoE '(Test unit written to|written to) \S+' "$log" | tail -1 | awk '{print $NF}' || true)
    echo "FAILED fuzz_$t: log $log" >&2
    if [[ -n "$reproducer" ]]; then
      echo "  reproducer: $reproducer" >&2
      echo "  rerun it:   $build_dir/tests/fuzz/fuzz_$t $reproducer" >&2
    fi
  fi
done
if ((${#failed[@]})); then
  echo "rotor: fuzzing found problems in: ${failed[*]}" >&2
  exit 1
fi
echo "rotor: fuzzing clean (${seconds}s per target: $targets)"
