#!/usr/bin/env bash
# Everything docs/performance.md reports, measured in one call on a GPU machine
# (10 minutes at most; the machine needs the NVIDIA driver, CUDA 13, cuDNN,
# NCCL, PyTorch and transformers, and no network):
#   1. the `gpu` tests (ctest -L gpu in a build tree; the gpu_test_* programs of
#      an installed tree without ctest);
#   2. bench_attention against PyTorch SDPA + rotary (scripts/bench/attention_peer.py),
#      rotor's kernel and cuDNN; bench_linear_attention: linear attention (elu1,
#      FAVOR+) against the softmax cores from 512 to 32k tokens, time and memory;
#   3. `rotor bench train` against its Hugging Face peers (scripts/bench/train_peer.py:
#      MarianMTModel, RoFormerForMaskedLM, BertForMaskedLM, GPTNeoXForCausalLM; eager
#      and torch.compile) replaying the same batch shapes: Transformer-base translation
#      on Multi30k (max_tokens 6250) in bf16 and fp32, RoFormer- and BERT-base masked
#      LM 64 x 512 and the 12 x 768 RoPE causal LM 16 x 1024 (bytes) on WikiText-2 in bf16;
#   4. scripts/gpu/launch_check.sh: `rotor launch -n 1` (NCCL at world size 1)
#      against the plain run (equal losses) and the launcher's cost in step time;
# and prints one markdown table (also in OUT/table.md).
#
#   scripts/gpu/measure.sh [--build DIR | --prefix DIR] [--data DIR] [--out DIR]
#                          [--budget SECONDS] [--only tests,attention,train,launch] [--no-compile]
#                          [--cpu] [--dry-run]
#
#   --build DIR    a build tree (default build); --prefix DIR an installed tree
#                  (cmake --install, scripts/install/bundle.sh; its gpu tests are in
#                  libexec/rotor/tests when installed with ROTOR_INSTALL_TESTS=ON)
#   --data DIR     raw text: DIR/multi30k/{train,val}.{en,de}, DIR/wikitext-2/{test,valid}.txt
#                  (default ROTOR_SHARED_DATA, else ../shared/data, shared/data, or the
#                  data/ of a tree unpacked from scripts/gpu/pack.sh)
#   --out DIR      logs and JSON files (default runs/measure)
#   --budget S     stop starting optional steps (torch.compile peers first) when
#                  fewer than the seconds they need are left of S (default 560)
#   --cpu          the CPU fallback: tiny configs on synthetic data, peers on
#                  PyTorch's CPU where it is installed, no gpu tests or attention
#                  bench; checks the script itself (tests/CMakeLists.txt)
#   --dry-run      print the commands, run nothing
# Exit status: 0 when the table was printed (failed steps are rows that say so),
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
budget=560
only=tests,attention,train,launch
compile=1
cpu=0
dry=0
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --prefix) prefix=${2:?}; shift 2 ;;
    --data) data=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
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
for step in ${only//,/ }; do
  case $step in tests | attention | train | launch) ;; *) echo "measure.sh: --only: unknown step $step" >&2; exit 2 ;; esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }

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
# The python3 of the peers: $PYTHON, else the first with torch and
# transformers of .venv's, the one on PATH and Debian's (else python3, and the
# peers report themselves absent).
python=${PYTHON:-}
if [[ -z $python ]]; then
  for candidate in .venv/bin/python3 python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch, transformers" 2>/dev/null; then
      python=$candidate
      break
    fi
  done
  python=${python:-python3}
fi
mkdir -p "$out"
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }

# Runs "$@" with its output in $out/NAME.log under a timeout of LIMIT seconds
# (capped by the budget left); returns its status. --dry-run prints it.
step() {
  local name=$1 limit=$2
  shift 2
  if ((dry)); then
    printf '%q ' "$@"
    echo
    return 0
  fi
  local remaining
  remaining=$(left)
  ((remaining < limit)) && limit=$remaining
  if ((limit < 5)); then
    echo "measure.sh: $name skipped: the time budget is spent" | tee "$out/$name.log" >&2
    return 124
  fi
  local t0=$SECONDS rc=0
  timeout --kill-after=5 "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
  echo "measure.sh: $name: exit $rc after $((SECONDS - t0)) s (log $out/$name.log)" >&2
  return "$rc"
}

# ---- libraries: cuDNN, NCCL and NVRTC may live in Python wheels (nvidia/*/lib) ----
add_library_dirs() {
  ((dry)) && return 0
  [[ -x $rotor ]] || return 0
  ldd "$rotor" 2>/dev/null | grep -q "not found" || return 0
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

if ((!dry)) && [[ ! -x $rotor ]]; then
  echo "measure.sh: no rotor at $rotor (--build DIR or --prefix DIR)" >&2
  exit 1
fi
add_library_dirs
if ((!dry)); then
  "$rotor" info >"$out/info.txt" 2>&1 || { cat "$out/info.txt" >&2; echo "measure.sh: rotor info failed" >&2; exit 1; }
fi

# ---- 1. the gpu tests --------------------------------------------------------------
tests_line="gpu tests: not run"
if wants tests && ((!cpu)); then
  if [[ -z $prefix ]] && command -v ctest >/dev/null; then
    step gpu_tests 240 ctest --test-dir "$build" -L gpu --output-on-failure --timeout 200 || true
    ((dry)) || tests_line="gpu tests (ctest -L gpu): $(grep -E 'tests passed|tests failed' "$out/gpu_tests.log" | tail -n 1)"
  else
    passed=0 skipped=0 failed=0 failures=""
    # gtest's summary lines: "[  PASSED  ] N tests.", "[  SKIPPED ] N tests", "[  FAILED  ] N tests".
    count() { sed -n "s/^\[  $1 *\] \([0-9]*\) tests\{0,1\}[.,]\{0,1\}.*/\1/p" "$2" | tail -n 1; }
    for t in "$test_dir"/gpu_test_*; do
      [[ -x $t && ! -d $t ]] || continue
      name=$(basename "$t")
      step "$name" 200 "$t" --gtest_brief=1 || failures="$failures $name"
      ((dry)) && continue
      passed=$((passed + $(count PASSED "$out/$name.log" || true) + 0))
      skipped=$((skipped + $(count SKIPPED "$out/$name.log" || true) + 0))
      failed=$((failed + $(count FAILED "$out/$name.log" || true) + 0))
    done
    tests_line="gpu tests (the gtest programs of $test_dir): $passed passed, $skipped skipped, $failed failed${failures:+ (failing programs:$failures)}"
  fi
fi

# ---- 2. attention core + RoPE split ------------------------------------------------
attention_md=""
if wants attention && ((!cpu)); then
  if step attention_peer 120 "$python" scripts/bench/attention_peer.py --dtype bf16 --json "$out/attention_peer.json"; then
    peer_args=(--peer "$out/attention_peer.json")
  else
    peer_args=()
  fi
  # rotor = what the model runs; tc and portable = each of rotor's kernels forced.
  impls=(rotor tc portable)
  if ((dry)) || "$bench_attention" --help 2>&1 | grep -q cudnn; then impls+=(cudnn); fi
  for impl in "${impls[@]}"; do
    step "attention_$impl" 120 "$bench_attention" --dtype bf16 --impl "$impl" "${peer_args[@]}" || true
    ((dry)) || attention_md+=$'\n'"bench_attention --impl $impl (bf16, non-causal):"$'\n'"$(cat "$out/attention_$impl.log")"$'\n'
  done
  # RoPE in the head split vs in the tensor-core kernel (attention.rope_in_kernel).
  step attention_rope_placement 120 "$bench_attention" --dtype bf16 --rope-placement || true
  ((dry)) || attention_md+=$'\n'"bench_attention --rope-placement (bf16):"$'\n'"$(cat "$out/attention_rope_placement.log")"$'\n'
  # Linear against softmax attention by length (issue 27): the crossover in time,
  # memory linear against quadratic (the reference's [T, T] matrix). 8 heads of 64.
  lin_tokens=512,1024,2048,4096,8192,16384,32768
  for mode in "" --causal; do
    name=linear_attention${mode:+_causal}
    step "$name" 90 "$bench_linear" --device cuda --dtype bf16 --heads 8 --dim 64 --features 64 \
      --backward --iters 2 --tokens $lin_tokens $mode || true
    ((dry)) || attention_md+=$'\n'"bench_linear_attention --device cuda --dtype bf16 --heads 8 --backward $mode:"$'\n'"$(cat "$out/$name.log")"$'\n'
  done
fi

# ---- 3. one training update against Hugging Face ----------------------------------
# A row: LABEL|CONFIG|STEPS|WARMUP|PEER MODES|--set overrides (space-separated).
rows=()
if ((cpu)); then
  synth=$out/synth
  if ((!dry)) && [[ ! -f $synth/train.en ]]; then
    "$rotor" synth numbers-en-de --output "$synth" --seed 1 >/dev/null
  fi
  cpu_sets="device=cpu precision=fp32 train.log_interval=1000"
  rows+=("Transformer (quickstart size) MT, CPU fp32|configs/quickstart/numbers_sinusoidal.yaml|3|1|eager|$cpu_sets data.train=$synth/train data.valid=$synth/valid output_dir=$out/mt_cpu data.spm_model=$out/mt_cpu_spm.model")
  rows+=("RoFormer-tiny MLM, CPU fp32|configs/mlm/roformer_tiny.yaml|2|1|eager|$cpu_sets data.train=$synth/train.en data.valid=$synth/valid.en output_dir=$out/mlm_cpu data.spm_model=$out/mlm_cpu_spm.model data.vocab_size=150 data.seq_len=64 train.batch_size=8")
  rows+=("Causal LM (char tiny), CPU fp32|configs/lm/wikitext2_char_tiny.yaml|2|1|eager|$cpu_sets data.train=$synth/train.en data.valid=$synth/valid.en data.test= output_dir=$out/lm_cpu train.batch_size=4")
  peer_device=cpu
else
  modes=eager
  ((compile)) && modes=eager,compile
  mt="data.train=$data/multi30k/train data.valid=$data/multi30k/val data.vocab_size=8000 data.spm_model=$out/multi30k_spm.model"
  mlm="data.train=$data/wikitext-2/test.txt data.valid=$data/wikitext-2/valid.txt data.vocab_size=8000 data.spm_model=$out/wikitext2_spm.model"
  rows+=("Transformer-base MT (max_tokens 6250), bf16|configs/wmt14_en_de/transformer_base.yaml|30|5|$modes|$mt precision=bf16 output_dir=$out/mt_bf16")
  rows+=("Transformer-base MT, fp32|configs/wmt14_en_de/transformer_base.yaml|30|5|eager|$mt precision=fp32 output_dir=$out/mt_fp32")
  rows+=("RoFormer-base MT, bf16|configs/wmt14_en_de/roformer_base.yaml|30|5||$mt precision=bf16 output_dir=$out/mt_rope_bf16")
  rows+=("RoFormer-base MLM 64x512, bf16|configs/mlm/roformer_base.yaml|20|3|$modes|$mlm precision=bf16 output_dir=$out/mlm_rope_bf16")
  # The two RoPE placements in a whole update, both on rotor's flash core.
  rows+=("RoFormer-base MLM 64x512, bf16, rotor core, RoPE in split|configs/mlm/roformer_base.yaml|20|3||$mlm precision=bf16 attention.impl=rotor output_dir=$out/mlm_rope_split")
  rows+=("RoFormer-base MLM 64x512, bf16, rotor core, RoPE in kernel|configs/mlm/roformer_base.yaml|20|3||$mlm precision=bf16 attention.impl=rotor attention.rope_in_kernel=true output_dir=$out/mlm_rope_kernel")
  rows+=("BERT-base MLM 64x512, bf16|configs/mlm/bert_base.yaml|20|3|$modes|$mlm precision=bf16 output_dir=$out/mlm_bert_bf16")
  # The paper's section 4.4 causal LM (12x768, bytes) at 1024 tokens, 16 sequences an update.
  lm="data.train=$data/wikitext-2/test.txt data.valid=$data/wikitext-2/valid.txt data.test= train.batch_size=16"
  rows+=("RoPE causal LM 12x768 16x1024 bytes, bf16|configs/lm/enwik8_paper.yaml|20|3|$modes|$lm precision=bf16 output_dir=$out/lm_rope_bf16")
  peer_device=cuda
  if ((!dry)) && wants train && [[ ! -f $data/multi30k/train.en || ! -f $data/wikitext-2/test.txt ]]; then
    echo "measure.sh: $data lacks multi30k/train.en or wikitext-2/test.txt (--data DIR)" >&2
  fi
fi

table_rows=()
compile_jobs=()  # "ROTOR_JSON|PEER_JSON|NAME" run last, as the budget allows
if wants train; then
  i=0
  for row in "${rows[@]}"; do
    IFS='|' read -r label config steps warmup modes sets <<<"$row"
    i=$((i + 1))
    name=train$i
    set_args=()
    for s in $sets; do set_args+=(--set "$s"); done
    rjson=$out/$name.rotor.json
    rm -f "$rjson"
    step "$name.rotor" 240 "$rotor" bench train "$config" --steps "$steps" --warmup "$warmup" \
      --json "$rjson" "${set_args[@]}" || true
    peers=""
    for mode in ${modes//,/ }; do
      pjson=$out/$name.$mode.json
      rm -f "$pjson"
      peers=${peers:+$peers,}$pjson
      if [[ $mode == compile ]]; then
        compile_jobs+=("$rjson|$pjson|$name.$mode")
      elif ((dry)) || [[ -f $rjson ]]; then
        step "$name.$mode" 180 "$python" scripts/bench/train_peer.py --bench "$rjson" --mode "$mode" \
          --device "$peer_device" --json "$pjson" || true
      fi
    done
    table_rows+=(--row "$label=$rjson:$peers")
  done
fi

# ---- 4. the data-parallel path at world size 1 ---------------------------------
launch_md=""
if wants launch && ((!cpu)); then
  step launch_check 150 env ROTOR="$rotor" bash scripts/gpu/launch_check.sh --out "$out/launch_check" \
    --updates 200 --steps 20 || true
  ((dry)) || launch_md=$(sed -n '/^== rotor launch -n 1/,$p' "$out/launch_check.log")
  ((dry)) || [[ -n $launch_md ]] || launch_md="launch_check failed: $(tail -n 3 "$out/launch_check.log")"
fi

# torch.compile peers last: each compiles for about a minute.
for job in "${compile_jobs[@]}"; do
  IFS='|' read -r rjson pjson name <<<"$job"
  if ((dry)) || [[ -f $rjson ]]; then
    if ((dry)) || (($(left) > 150)); then
      step "$name" 240 "$python" scripts/bench/train_peer.py --bench "$rjson" --mode compile \
        --device "$peer_device" --json "$pjson" || true
    else
      printf '{"peer": "torch.compile peer", "mode": "compile", "absent": "skipped: %s s of the budget left"}\n' \
        "$(left)" >"$pjson"
    fi
  fi
done

((dry)) && exit 0

# ---- the report ---------------------------------------------------------------------
{
  echo "## Measured by scripts/gpu/measure.sh"
  echo
  device=$(grep -m1 -E '^ *cuda:0' "$out/info.txt" || echo "no GPU (rotor info: $out/info.txt)")
  # An installed tree (pack.sh) knows its commit from the install step.
  if [[ -n $prefix && -f $prefix/share/rotor/COMMIT ]]; then
    commit=$(head -n 1 "$prefix/share/rotor/COMMIT")
  else
    commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo "?")
  fi
  echo "${device# *}; rotor at $commit; $((SECONDS - start)) s in all"
  echo
  echo "$tests_line"
  if ((${#table_rows[@]})); then
    echo
    "$python" scripts/bench/perf_table.py "${table_rows[@]}"
  fi
  if [[ -n $launch_md ]]; then
    echo
    echo '```'
    echo "$launch_md"
    echo '```'
  fi
  if [[ -n $attention_md ]]; then
    echo
    echo '```'
    echo "$attention_md"
    echo '```'
  fi
} | tee "$out/table.md"
