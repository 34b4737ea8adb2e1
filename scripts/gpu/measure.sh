#!/usr/bin/env bash
# Everything docs/performance.md reports, measured in one call on a GPU machine
# (one call of at most 10 minutes; the machine needs the NVIDIA driver, CUDA 13,
# cuDNN, NCCL, PyTorch and transformers, and no network). Steps, in order of
# value (a call cut off late loses the least):
#   tests      the `gpu` tests (ctest -L gpu in a build tree; the gpu_test_*
#              programs of an installed tree, one row each);
#   sanitize   compute-sanitizer memcheck over the gpu test programs of the
#              kernels first written without a GPU (linear attention, decoding,
#              the op table): out-of-bounds and misaligned device accesses;
#   mlm        RoFormer- and BERT-base masked LM 64 x 512 on WikiText-2, bf16:
#              `rotor bench train` against RoFormerForMaskedLM / BertForMaskedLM
#              (scripts/bench/train_peer.py, eager) replaying the same batch shapes;
#   mt         Transformer-base translation on Multi30k (max_tokens 6250), bf16
#              and fp32, against MarianMTModel (eager); RoFormer-base translation
#              and bf16 variable-length batches, data.packing documents (no
#              Hugging Face peer);
#   attention  bench_attention against PyTorch SDPA + rotary
#              (scripts/bench/attention_peer.py): the model's core, the tensor-core
#              kernel, cuDNN, RoPE in the split vs in the kernel, the portable kernel;
#   ncu        Nsight Compute on the tensor-core kernels' forward and backward at
#              B4 T4096 H16 D64 (speed of light, pipes, occupancy, stalls): where
#              their time goes;
#   lm         the 12 x 768 RoPE causal LM, 16 x 1024 bytes, bf16, against
#              GPTNeoXForCausalLM (eager);
#   linear     bench_linear_attention: linear attention (elu1, FAVOR+) against the
#              softmax cores from 512 to 32k tokens, time and memory;
#   launch     scripts/gpu/launch_check.sh: `rotor launch -n 1` (NCCL at world
#              size 1) against the plain run (equal losses), the launcher's cost;
#   profile    BERT-base MLM (bf16) under `rotor bench train --profile`: each
#              op's time with the device synchronized per op (where an
#              update's time goes, without ncu);
#   placement  RoFormer-base MLM with RoPE in the head split and in the kernel;
#   compile    the torch.compile peers of mlm, mt and lm (about a minute each).
# Each step's row (or block) is appended to the table (OUT/table.md) as soon as
# the step ends, so a call cut off at its limit still returns every finished
# row; a step that failed, timed out or was skipped for want of time is a row
# that says so. The last line, "finished in N s", is missing only when the
# script itself was killed. The table is printed at the end.
#
#   scripts/gpu/measure.sh [--build DIR | --prefix DIR] [--data DIR] [--out DIR]
#                          [--table FILE] [--info FILE] [--budget SECONDS] [--only STEP,STEP...]
#                          [--no-compile] [--cpu] [--dry-run]
#
#   --build DIR    a build tree (default build); --prefix DIR an installed tree
#                  (cmake --install, scripts/install/bundle.sh; its gpu tests are in
#                  libexec/rotor/tests when installed with ROTOR_INSTALL_TESTS=ON)
#   --data DIR     raw text: DIR/multi30k/{train,val}.{en,de}, DIR/wikitext-2/{test,valid}.txt
#                  (default ROTOR_SHARED_DATA, else ../shared/data, shared/data, or the
#                  data/ of a tree unpacked from scripts/gpu/pack.sh)
#   --out DIR      logs and JSON files (default runs/measure)
#   --table FILE   the table (default OUT/table.md)
#   --info FILE    `rotor info` (default OUT/info.txt)
#   --budget S     seconds for the whole script, start-up included (default 540:
#                  a 10-minute call keeps a minute for the transfer back). Each
#                  step's time limit is capped by what is left; a step with
#                  under 5 s left is skipped, a torch.compile peer with under 100 s
#   --only STEPS   a comma-separated subset of the steps above (train = mlm,mt,lm)
#   --no-compile   leave out the compile step
#   --cpu          the CPU fallback: tiny configs on synthetic data, peers on
#                  PyTorch's CPU where it is installed, the attention peer at tiny
#                  shapes, linear attention on the CPU; no gpu tests, launch or
#                  compile; checks the script itself (tests/CMakeLists.txt)
#   --dry-run      print each step with its time limit and the running sum of the
#                  limits (the worst case), run nothing
# Exit status: 0 when the table was written (failed steps are rows that say so),
# 1 when rotor itself cannot run, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
}

build=build
prefix=""
# Run from an installed tree (PREFIX/share/rotor/scripts/gpu): that tree.
[[ ! -f CMakeLists.txt && -x ../../bin/rotor ]] && prefix=$(cd ../.. && pwd)
data=${ROTOR_SHARED_DATA:-../shared/data}
if [[ -z ${ROTOR_SHARED_DATA:-} && ! -d $data ]]; then
  # A checkout with shared/ inside, or a tree unpacked by scripts/gpu/pack.sh (PREFIX/data).
  for d in shared/data ../../data; do [[ -d $d ]] && data=$d && break; done
fi
out=runs/measure
table=""
info=""
budget=540
all_steps=tests,sanitize,mlm,mt,attention,ncu,lm,linear,launch,profile,placement,compile
only=$all_steps
compile=1
cpu=0
dry=0
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --prefix) prefix=${2:?}; shift 2 ;;
    --data) data=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --table) table=${2:?}; shift 2 ;;
    --info) info=${2:?}; shift 2 ;;
    --budget) budget=${2:?}; shift 2 ;;
    --only) only=${2:?}; shift 2 ;;
    --no-compile) compile=0; shift ;;
    --cpu) cpu=1; shift ;;
    --dry-run) dry=1; shift ;;
    -h | --help) usage ;;
    *) echo "measure.sh: unknown argument $1" >&2; usage ;;
  esac
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "measure.sh: --budget takes whole seconds, got $budget" >&2; exit 2; }
only=${only//train/mlm,mt,lm}
for s in ${only//,/ }; do
  [[ ",$all_steps," == *",$s,"* ]] || { echo "measure.sh: --only: unknown step $s" >&2; exit 2; }
done
wants() { [[ ",$only," == *",$1,"* ]]; }
((compile)) || only=${only//compile/}
if ((cpu)); then
  only=${only//tests/} only=${only//sanitize/} only=${only//ncu/} only=${only//launch/}
  only=${only//placement/} only=${only//compile/}
fi

if [[ -n $prefix ]]; then
  rotor=$prefix/bin/rotor
  bench_attention=$prefix/libexec/rotor/bench_attention
  bench_linear=$prefix/libexec/rotor/bench_linear_attention
  test_dir=$prefix/libexec/rotor/tests
  # The installed test programs find rotor and configs/ here, not in the build.
  export ROTOR_TEST_BINARY=$prefix/bin/rotor ROTOR_TEST_SOURCE_DIR=$prefix/share/rotor
else
  rotor=$build/rotor
  bench_attention=$build/bench/bench_attention
  bench_linear=$build/bench/bench_linear_attention
  test_dir=$build/tests
fi
start=$SECONDS
table=${table:-$out/table.md}
info=${info:-$out/info.txt}

# ---- steps: a time limit each, capped by the budget left --------------------------
# In a dry run the clock is the running sum of the limits: the worst case.
sum=0
nstep=0
group_end=""  # the elapsed second by which the current group must end ("" = none)
elapsed() { if ((dry)); then echo "$sum"; else echo $((SECONDS - start)); fi; }
left() { echo $((budget - $(elapsed))); }

# step NAME LIMIT COMMAND...: runs COMMAND with its output in $out/NAME.log under
# a timeout of LIMIT seconds (capped by the budget and group left); sets
# step_rc (0, its exit status, 124 timed out, 125 skipped) and step_note (what
# the table says of a run that did not succeed). Always returns 0.
step_rc=0
step_note=""
step() {
  local name=$1 limit=$2
  shift 2
  nstep=$((nstep + 1))
  if [[ -n $group_end ]] && ((group_end - $(elapsed) < limit)); then
    limit=$((group_end - $(elapsed)))
    ((limit < 0)) && limit=0
  fi
  if ((dry)); then
    sum=$((sum + limit))
    local over=""
    ((sum > budget)) && over="  (past the budget: runs only if earlier steps end sooner)"
    ((limit == 0)) && over="  (its group's time is spent in the worst case)"
    printf '%3d  %-34s limit %4d s  sum %5d s%s\n       %s\n' "$nstep" "$name" "$limit" "$sum" \
      "$over" "$(printf '%q ' "$@")"
    step_rc=0 step_note=""
    return 0
  fi
  local remaining
  remaining=$(left)
  ((remaining < limit)) && limit=$remaining
  if ((limit < 5)); then
    step_rc=125 step_note="skipped: $((remaining < 0 ? 0 : remaining)) s of the budget left"
    echo "measure.sh: $name $step_note" | tee "$out/$name.log" >&2
    return 0
  fi
  local t0=$SECONDS
  step_rc=0
  timeout --kill-after=5 "$limit" "$@" >"$out/$name.log" 2>&1 || step_rc=$?
  local secs=$((SECONDS - t0))
  case $step_rc in
    0) step_note="" ;;
    124 | 137) step_note="timed out at its limit of $limit s; log $name.log" ;;
    *) step_note="exit $step_rc after $secs s; log $name.log" ;;
  esac
  echo "measure.sh: $name: exit $step_rc after $secs s (limit $limit s, $(left) s of the budget left)" >&2
  return 0
}
# A group of steps that together take at most LIMIT seconds.
group() { group_end=$(($(elapsed) + $1)); }
end_group() { group_end=""; }

# ---- the table: appended to as each step ends ------------------------------------
in_train=0  # whether the table's last lines are rows of the training table
append() { ((dry)) || printf '%s\n' "$@" >>"$table"; }
section() {
  append "" "### $1" ""
  in_train=0
}
table_python=python3
# The rows of scripts/bench/perf_table.py (any python3: it needs only json).
perf_rows() {
  "$table_python" scripts/bench/perf_table.py --no-header --why "${step_note:-the run failed}" "$@" 2>&1 ||
    echo "| $* | (perf_table.py failed) | | | | | |"
}
train_header() {
  if ((!in_train)); then
    [[ -z $(tail -n 1 "$table") ]] || append ""
    append "| model, precision | rotor ms | peer | peer ms | peer/rotor | peak memory rotor / peer | first loss rotor / peer |" \
      "|---|---|---|---|---|---|---|"
    in_train=1
  fi
}
pending_row=""  # the rotor-alone row just written, replaced by its peer's row
# rotor_row LABEL RJSON: rotor's own row, written when its bench ends.
rotor_row() {
  ((dry)) && return 0
  train_header
  pending_row=$(perf_rows --row "$1=$2:")
  append "$pending_row"
}
# peer_row LABEL RJSON PJSON: the peer's row; it takes the place of rotor's
# own row when that is the table's last line.
peer_row() {
  ((dry)) && return 0
  local row
  row=$(perf_rows --row "$1=$2:$3")
  if ((in_train)) && [[ -n $pending_row && $(tail -n 1 "$table") == "$pending_row" ]]; then
    head -n -1 "$table" >"$table.tmp"
    printf '%s\n' "$row" >>"$table.tmp"
    mv "$table.tmp" "$table"
  else
    train_header
    append "$row"
  fi
  pending_row=""
}
# block NAME TITLE: a step's output as a code block.
block() {
  ((dry)) && return 0
  local log=$out/$1.log
  append '```' "# $2${step_note:+ ($step_note)}"
  if [[ -f $log ]]; then append "$(tail -n 80 "$log")"; fi
  append '```'
  in_train=0
}

# ---- libraries: cuDNN, NCCL and NVRTC may live in Python wheels (nvidia/*/lib) ----
add_library_dirs() {
  ((dry)) && return 0
  [[ -x $rotor ]] || return 0
  # Read whole outputs before matching: under pipefail, `cmd | grep -q` fails
  # when cmd exits non-zero (bench_attention --help exits 2) or is cut off
  # by SIGPIPE once grep has its match.
  [[ $(ldd "$rotor" 2>/dev/null || true) == *"not found"* ]] || return 0
  local dirs
  dirs=$("$python" - <<'PY' 2>/dev/null || true
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
found = []
for r in roots:
    found += glob.glob(os.path.join(r, "nvidia", "*", "lib")) + glob.glob(os.path.join(r, "nvidia", "cu*", "lib"))
    found += glob.glob(os.path.join(r, "torch", "lib"))
print(":".join(d for d in found if os.path.isdir(d)))
PY
)
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d $d ]] && dirs=${dirs:+$dirs:}$d
  done
  export LD_LIBRARY_PATH=${dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ldd "$rotor" | grep "not found" >&2; then
    echo "measure.sh: $rotor cannot find the libraries above (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)" >&2
  fi
}

# ---- start-up ----------------------------------------------------------------------
# The python3 of the peers: $PYTHON, else the first with torch and
# transformers of .venv's, the one on PATH and Debian's (else python3, and the
# peers report themselves absent).
python=${PYTHON:-}
peer_versions="no torch and transformers found"
versions_py="import sys, torch, transformers; print(f'python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}')"
if ((dry)); then
  python=${python:-python3}
elif [[ -n $python ]]; then
  peer_versions=$("$python" -c "$versions_py" 2>/dev/null) || peer_versions="PYTHON=$python lacks torch or transformers"
else
  for candidate in .venv/bin/python3 python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null && v=$("$candidate" -c "$versions_py" 2>/dev/null); then
      python=$candidate peer_versions=$v
      break
    fi
  done
  python=${python:-python3}
fi
((dry)) || command -v python3 >/dev/null || table_python=$python
if ((!dry)); then
  mkdir -p "$out" "$(dirname "$table")" "$(dirname "$info")"
  : >"$table"
  if [[ ! -x $rotor ]]; then
    echo "measure.sh: no rotor at $rotor (--build DIR or --prefix DIR)" >&2
    append "measure.sh: no rotor at $rotor"
    exit 1
  fi
fi
add_library_dirs
if ((!dry)); then
  "$rotor" info >"$info" 2>&1 || {
    cat "$info" >&2
    echo "measure.sh: rotor info failed" >&2
    append "measure.sh: rotor info failed: $(tail -n 3 "$info")"
    exit 1
  }
  device=$(grep -m1 -E '^ *cuda:0' "$info" || echo "no GPU (rotor info: $info)")
  # An installed tree (pack.sh) knows its commit from the install step.
  if [[ -n $prefix && -f $prefix/share/rotor/COMMIT ]]; then
    commit=$(head -n 1 "$prefix/share/rotor/COMMIT")
  else
    commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo "?")
  fi
  cuda_versions=$( (grep -E '^ *(cuda runtime|cublasLt)' "$info" || true) | sed 's/^ *//' | paste -sd ';' - | sed 's/;/; /g')
  append "## Measured by scripts/gpu/measure.sh" "" \
    "${device# *}; rotor at $commit; $(date -u '+%Y-%m-%d %H:%M UTC'); budget $budget s" "" \
    "${cuda_versions:+rotor: $cuda_versions; }peers: $python ($peer_versions)"
else
  echo "measure.sh --dry-run: budget $budget s from the script's start; each step's limit is capped by what is left"
  echo "steps: $(echo "$only" | tr -s , | sed 's/^,//; s/,$//')"
fi

# ---- the training rows -------------------------------------------------------------
# A row: GROUP|LABEL|CONFIG|STEPS|WARMUP|PEERS|--set overrides (space-separated);
# PEERS: "" (none), eager, or eager,compile (the compile peer runs in the compile step).
rows=()
if ((cpu)); then
  synth=$out/synth
  if ((!dry)) && [[ ! -f $synth/train.en ]]; then
    "$rotor" synth numbers-en-de --output "$synth" --seed 1 >/dev/null
  fi
  cpu_sets="device=cpu precision=fp32 train.log_interval=1000"
  rows+=("mlm|RoFormer-tiny MLM, CPU fp32|configs/mlm/roformer_tiny.yaml|2|1|eager|$cpu_sets data.train=$synth/train.en data.valid=$synth/valid.en output_dir=$out/mlm_cpu data.spm_model=$out/mlm_cpu_spm.model data.vocab_size=150 data.seq_len=64 train.batch_size=8")
  rows+=("mt|Transformer (quickstart size) MT, CPU fp32|configs/quickstart/numbers_sinusoidal.yaml|3|1|eager|$cpu_sets data.train=$synth/train data.valid=$synth/valid output_dir=$out/mt_cpu data.spm_model=$out/mt_cpu_spm.model")
  rows+=("lm|Causal LM (char tiny), CPU fp32|configs/lm/wikitext2_char_tiny.yaml|2|1|eager|$cpu_sets data.train=$synth/train.en data.valid=$synth/valid.en data.test= output_dir=$out/lm_cpu train.batch_size=4")
  peer_device=cpu
else
  mt="data.train=$data/multi30k/train data.valid=$data/multi30k/val data.vocab_size=8000 data.spm_model=$out/multi30k_spm.model"
  mlm="data.train=$data/wikitext-2/test.txt data.valid=$data/wikitext-2/valid.txt data.vocab_size=8000 data.spm_model=$out/wikitext2_spm.model"
  rows+=("mlm|RoFormer-base MLM 64x512, bf16|configs/mlm/roformer_base.yaml|20|3|eager,compile|$mlm precision=bf16 output_dir=$out/mlm_rope_bf16")
  rows+=("mlm|BERT-base MLM 64x512, bf16|configs/mlm/bert_base.yaml|20|3|eager,compile|$mlm precision=bf16 output_dir=$out/mlm_bert_bf16")
  rows+=("mt|Transformer-base MT (max_tokens 6250), bf16|configs/wmt14_en_de/transformer_base.yaml|30|5|eager,compile|$mt precision=bf16 output_dir=$out/mt_bf16")
  rows+=("mt|Transformer-base MT, fp32|configs/wmt14_en_de/transformer_base.yaml|30|5|eager|$mt precision=fp32 output_dir=$out/mt_fp32")
  rows+=("mt|RoFormer-base MT, bf16|configs/wmt14_en_de/roformer_base.yaml|30|5||$mt precision=bf16 output_dir=$out/mt_rope_bf16")
  # Variable-length batches (data.packing documents): the bf16 row's pairs end to end, no padding.
  rows+=("mt|Transformer-base MT, bf16, variable-length|configs/wmt14_en_de/transformer_base.yaml|30|5||$mt precision=bf16 data.packing=documents output_dir=$out/mt_varlen_bf16")
  # The paper's section 4.4 causal LM (12x768, bytes) at 1024 tokens, 16 sequences an update.
  lm="data.train=$data/wikitext-2/test.txt data.valid=$data/wikitext-2/valid.txt data.test= train.batch_size=16"
  rows+=("lm|RoPE causal LM 12x768 16x1024 bytes, bf16|configs/lm/enwik8_paper.yaml|20|3|eager,compile|$lm precision=bf16 output_dir=$out/lm_rope_bf16")
  # The two RoPE placements in a whole update, both on rotor's flash core.
  rows+=("placement|RoFormer-base MLM 64x512, bf16, rotor core, RoPE in split|configs/mlm/roformer_base.yaml|20|3||$mlm precision=bf16 attention.impl=rotor output_dir=$out/mlm_rope_split")
  rows+=("placement|RoFormer-base MLM 64x512, bf16, rotor core, RoPE in kernel|configs/mlm/roformer_base.yaml|20|3||$mlm precision=bf16 attention.impl=rotor attention.rope_in_kernel=true output_dir=$out/mlm_rope_kernel")
  peer_device=cuda
  if ((!dry)) && [[ ! -f $data/multi30k/train.en || ! -f $data/wikitext-2/test.txt ]]; then
    echo "measure.sh: $data lacks multi30k/train.en or wikitext-2/test.txt (--data DIR)" >&2
    append "" "(data: $data lacks multi30k/train.en or wikitext-2/test.txt; the training rows fail)"
  fi
fi

# Time limits (s) of one rotor bench and one eager peer, by group (CPU: tiny).
declare -A rotor_limit=([mlm]=75 [mt]=60 [lm]=60 [placement]=45)
declare -A peer_limit=([mlm]=75 [mt]=75 [lm]=75)
if ((cpu)); then
  rotor_limit=([mlm]=60 [mt]=60 [lm]=60) peer_limit=([mlm]=90 [mt]=90 [lm]=90)
fi
compile_jobs=()  # "LABEL|ROTOR_JSON|NAME": the compile step, last
train_n=0
# train_group GROUP: rotor bench train, then its eager peer, for each row of GROUP.
train_group() {
  local g=$1 row label config steps warmup modes sets rjson pjson name
  for row in "${rows[@]}"; do
    IFS='|' read -r rg label config steps warmup modes sets <<<"$row"
    [[ $rg == "$g" ]] || continue
    train_n=$((train_n + 1))
    name=train$train_n
    local set_args=()
    for s in $sets; do set_args+=(--set "$s"); done
    rjson=$out/$name.rotor.json
    ((dry)) || rm -f "$rjson" "$out/$name".*.json
    step "$name.rotor" "${rotor_limit[$g]}" "$rotor" bench train "$config" --steps "$steps" \
      --warmup "$warmup" --json "$rjson" "${set_args[@]}"
    rotor_row "$label" "$rjson"
    [[ -n $modes ]] || continue
    if ((dry)) || [[ -f $rjson ]]; then
      pjson=$out/$name.eager.json
      step "$name.eager" "${peer_limit[$g]}" "$python" scripts/bench/train_peer.py --bench "$rjson" \
        --mode eager --device "$peer_device" --json "$pjson"
      peer_row "$label" "$rjson" "$pjson"
      if [[ ,$modes, == *,compile,* ]]; then compile_jobs+=("$label|$rjson|$name"); fi
    fi
  done
  return 0
}

# ---- 1. the gpu tests --------------------------------------------------------------
tests_line="gpu tests: not run"
((cpu)) && tests_line="gpu tests: not run (--cpu)"
if wants tests; then
  section "gpu tests"
  group 180
  if [[ -z $prefix ]] && command -v ctest >/dev/null; then
    step gpu_tests 180 ctest --test-dir "$build" -L gpu --output-on-failure --timeout 170
    if ((!dry)); then
      summary=$(grep -E 'tests passed|tests failed' "$out/gpu_tests.log" | tail -n 1 || true)
      tests_line="gpu tests (ctest -L gpu): ${summary:-no summary}${step_note:+ ($step_note)}"
      append "$tests_line"
      [[ $step_rc == 0 ]] || append '```' "$(grep -E '^ *[0-9]+ - |Failed|FAILED' "$out/gpu_tests.log" | tail -n 40)" '```'
    fi
  else
    passed=0 skipped=0 failed=0 failures=""
    # gtest's summary lines: "[  PASSED  ] N tests.", "[  SKIPPED ] N tests", "[  FAILED  ] N tests".
    count() { sed -n "s/^\[  $1 *\] \([0-9]*\) tests\{0,1\}[.,]\{0,1\}.*/\1/p" "$2" | tail -n 1; }
    programs=()
    for t in "$test_dir"/gpu_test_*; do [[ -x $t && ! -d $t ]] && programs+=("$t"); done
    if ((dry && ${#programs[@]} == 0)); then  # not installed here: the names the install would hold
      for src in "$root"/tests/gpu/test_*.cpp; do
        [[ -f $src ]] && programs+=("$test_dir/gpu_$(basename "$src" .cpp)")
      done
    fi
    append "| gpu test program | passed | skipped | failed | note |" "|---|---|---|---|---|"
    for t in "${programs[@]}"; do
      name=$(basename "$t")
      step "$name" 60 "$t" --gtest_brief=1
      ((dry)) && continue
      p=$(count PASSED "$out/$name.log" || true) s=$(count SKIPPED "$out/$name.log" || true)
      f=$(count FAILED "$out/$name.log" || true)
      passed=$((passed + ${p:-0})) skipped=$((skipped + ${s:-0})) failed=$((failed + ${f:-0}))
      [[ $step_rc == 0 || $step_rc == 125 ]] || failures="$failures $name"
      failing=$(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_./]*\).*/\1/p' "$out/$name.log" | grep -v '^[0-9]*$' | sort -u | head -n 8 | tr '\n' ' ' || true)
      append "| $name | ${p:-0} | ${s:-0} | ${f:-0} | ${step_note:-ok}${failing:+; failing: $failing} |"
    done
    tests_line="gpu tests (the gtest programs of $test_dir): $passed passed, $skipped skipped, $failed failed${failures:+ (failing programs:$failures)}"
    ((dry)) || append "" "$tests_line"
    ((${#programs[@]})) || append "(no gpu_test_* programs in $test_dir)"
  fi
  end_group
else
  append "" "$tests_line"
fi

# ---- 1b. compute-sanitizer on the kernels first written without a GPU -----------
# A tool of CUDA's: PATH, else /usr/local/cuda/bin. Each program's row gives
# memcheck's error count ("ERROR SUMMARY"); a program cut off at its limit
# still names, in its log, the errors found before.
tool_path() {
  local t
  t=$(command -v "$1" || true)
  [[ -z $t && -x /usr/local/cuda/bin/$1 ]] && t=/usr/local/cuda/bin/$1
  ((dry)) && t=${t:-$1}
  echo "$t"
}
if wants sanitize; then
  section "compute-sanitizer memcheck"
  sanitizer=$(tool_path compute-sanitizer)
  if [[ -z $sanitizer ]]; then
    append "(no compute-sanitizer on this machine)"
  else
    append "| gpu test program | memcheck errors | note |" "|---|---|---|"
    group 90
    for p in linear_attention_cuda decode_cuda ops_cuda; do
      if [[ -n $prefix ]]; then prog=$test_dir/gpu_test_$p; else prog=$build/tests/gpu_test_$p; fi
      if ((!dry)) && [[ ! -x $prog ]]; then
        append "| gpu_test_$p | not run | no $prog |"
        continue
      fi
      step "sanitize_$p" 30 "$sanitizer" --tool memcheck --print-limit 20 --error-exitcode 3 \
        "$prog" --gtest_brief=1
      ((dry)) && continue
      errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$out/sanitize_$p.log" | tail -n 1)
      append "| gpu_test_$p | ${errors:-(no summary)} | ${step_note:-ok} |"
      [[ ${errors:-0} == 0 ]] || append '```' "$(grep -m 12 -E 'Invalid|Address|at 0x|by thread' "$out/sanitize_$p.log")" '```'
    done
    end_group
  fi
fi

# ---- 2. masked LM and translation against Hugging Face (eager) --------------------
if wants mlm || wants mt; then
  section "One training update against Hugging Face (eager)"
  wants mlm && train_group mlm
  wants mt && train_group mt
fi

# ---- 3. attention core + RoPE split ------------------------------------------------
if wants attention; then
  section "Attention core + RoPE split against PyTorch SDPA + rotary"
  peer_json=$out/attention_peer.json
  ((dry)) || rm -f "$peer_json"
  if ((cpu)); then
    step attention_peer 60 "$python" scripts/bench/attention_peer.py --device cpu --tiny --json "$peer_json"
    block attention_peer "attention_peer.py --device cpu --tiny (fp32, math backend)"
    append "(bench_attention needs a CUDA build: not run with --cpu)"
  else
    step attention_peer 60 "$python" scripts/bench/attention_peer.py --dtype bf16 --json "$peer_json"
    block attention_peer "attention_peer.py --dtype bf16 (PyTorch SDPA flash + rotary)"
    peer_args=()
    if ((dry)) || [[ -f $peer_json ]]; then peer_args=(--peer "$peer_json"); fi
    # auto = what a model runs (attention.impl auto: cuDNN from 128 keys);
    # tc, cudnn and portable = each core forced.
    impls=(auto tc)
    # (the 2026-11-27 window skipped cudnn: `--help | grep -q` under pipefail)
    if ((dry)) || [[ $("$bench_attention" --help 2>&1 || true) == *cudnn* ]]; then impls+=(cudnn); fi
    for impl in "${impls[@]}"; do
      step "attention_$impl" 45 "$bench_attention" --dtype bf16 --impl "$impl" "${peer_args[@]}"
      block "attention_$impl" "bench_attention --impl $impl (bf16, non-causal)"
    done
    # Causal (the LM's case): the peer and what attention.impl auto runs.
    causal_json=$out/attention_peer_causal.json
    ((dry)) || rm -f "$causal_json"
    step attention_peer_causal 60 "$python" scripts/bench/attention_peer.py --dtype bf16 --causal \
      --json "$causal_json"
    block attention_peer_causal "attention_peer.py --dtype bf16 --causal"
    causal_args=()
    if ((dry)) || [[ -f $causal_json ]]; then causal_args=(--peer "$causal_json"); fi
    step attention_auto_causal 45 "$bench_attention" --dtype bf16 --impl auto --causal "${causal_args[@]}"
    block attention_auto_causal "bench_attention --impl auto --causal (bf16)"
    # RoPE in the head split vs in the tensor-core kernel (attention.rope_in_kernel).
    step attention_rope_placement 45 "$bench_attention" --dtype bf16 --rope-placement
    block attention_rope_placement "bench_attention --rope-placement (bf16)"
    # The cost of ALiBi's and T5's bias inside the flash kernel (T5's table
    # gradient by shared atomics), and T5 on the reference core.
    step attention_bias_cost 45 "$bench_attention" --dtype bf16 --causal --bias-cost --iters 5
    block attention_bias_cost "bench_attention --bias-cost --causal (bf16)"
    step attention_portable 60 "$bench_attention" --dtype bf16 --impl portable "${peer_args[@]}"
    block attention_portable "bench_attention --impl portable (bf16, non-causal)"
  fi
fi

# ---- 3b. where the tensor-core kernels' time goes (Nsight Compute) -----------------
# One forward and one backward kernel at B4 T4096 H16 D64 (bf16), the clocks
# left alone (--clock-control none): speed of light, the pipes' use,
# occupancy, the schedulers and the warps' stall reasons.
if wants ncu; then
  section "Nsight Compute: the tensor-core flash kernels, B4 T4096 H16 D64, bf16"
  ncu_bin=$(tool_path ncu)
  if [[ -z $ncu_bin ]]; then
    append "(no ncu on this machine)"
  elif ((!dry)) && [[ ! -x $bench_attention ]]; then
    append "(no bench_attention at $bench_attention)"
  else
    for k in fwd bwd; do
      step "ncu_tc_$k" 40 "$ncu_bin" --clock-control none -k "regex:flash_tc_${k}" -c 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy \
        --section SchedulerStats --section WarpStateStats \
        "$bench_attention" --dtype bf16 --impl tc --iters 1 --shape 4x4096x16x64
      block "ncu_tc_$k" "ncu -k flash_tc_$k (bench_attention --impl tc --shape 4x4096x16x64)"
    done
  fi
fi

# ---- 4. the RoPE causal LM ------------------------------------------------------------
if wants lm; then
  section "RoPE causal LM against GPTNeoXForCausalLM (eager)"
  train_group lm
fi

# ---- 5. linear attention -----------------------------------------------------------
# Linear against softmax attention by length (issue 27): the crossover in time,
# memory linear against quadratic (the reference's [T, T] matrix). 8 heads of 64.
if wants linear; then
  section "Linear attention against the softmax cores"
  if ((cpu)); then
    lin=(--device cpu --heads 2 --dim 16 --features 16 --backward --iters 1 --tokens 128,256)
  else
    lin=(--device cuda --dtype bf16 --heads 8 --dim 64 --features 64 --backward --iters 2
      --tokens 512,1024,2048,4096,8192,16384,32768)
  fi
  for mode in "" --causal; do
    name=linear_attention${mode:+_causal}
    if ((dry)) || [[ -x $bench_linear ]]; then
      step "$name" 60 "$bench_linear" "${lin[@]}" $mode
      block "$name" "bench_linear_attention ${lin[*]} $mode"
    else
      append "(no bench_linear_attention at $bench_linear)"
    fi
  done
fi

# ---- 6. the data-parallel path at world size 1 ---------------------------------
if wants launch; then
  section "rotor launch -n 1 (NCCL) against the plain run"
  step launch_check 120 env ROTOR="$rotor" bash scripts/gpu/launch_check.sh --out "$out/launch_check" \
    --updates 200 --steps 20
  if ((!dry)); then
    launch_md=$(sed -n '/^== rotor launch -n 1/,$p' "$out/launch_check.log")
    [[ -n $launch_md ]] || launch_md="launch_check failed${step_note:+ ($step_note)}: $(tail -n 3 "$out/launch_check.log")"
    append '```' "$launch_md" '```'
  fi
fi

# ---- 6b. where an update's time goes: per-op times, the device synchronized per op ----
if wants profile && ((!cpu)); then
  section "Where BERT-base MLM's update goes (rotor bench train --profile)"
  step profile_bert 60 "$rotor" bench train configs/mlm/bert_base.yaml --steps 5 --warmup 2 \
    --profile $(for s in $mlm precision=bf16 output_dir=$out/mlm_bert_profile; do printf -- '--set %s ' "$s"; done)
  block profile_bert "rotor bench train configs/mlm/bert_base.yaml --profile (bf16; ops timed one at a time)"
fi

# ---- 7. RoPE placement in a whole update -------------------------------------------
if wants placement; then
  section "RoPE in the head split or in the kernel, a whole update"
  train_group placement
fi

# ---- 8. torch.compile peers, last: each compiles for about a minute ------------------
if wants compile; then
  section "torch.compile peers"
  for job in "${compile_jobs[@]}"; do
    IFS='|' read -r label rjson name <<<"$job"
    pjson=$out/$name.compile.json
    if ((!dry && $(left) < 100)); then
      step_note="skipped: $(left) s of the budget left (a compile peer needs ~100)"
      echo "measure.sh: $name.compile $step_note" >&2
      printf '{"peer": "torch.compile peer", "mode": "compile", "absent": "%s"}\n' "$step_note" >"$pjson"
    else
      step "$name.compile" 150 "$python" scripts/bench/train_peer.py --bench "$rjson" --mode compile \
        --device "$peer_device" --json "$pjson"
    fi
    peer_row "$label" "$rjson" "$pjson"
  done
  ((${#compile_jobs[@]})) || append "(no eager peer ran, so no compile peer)"
fi

if ((dry)); then
  echo "worst case: $sum s of limits for a budget of $budget s"
  exit 0
fi
append "" "finished in $((SECONDS - start)) s (budget $budget s)"
cat "$table"
