#!/bin/bash
# check.sh: the GPU plugins on a real GPU, in one run that fits a short
# lease: the device as the plugins see it, the conformance suite on vulkan
# (each matrix x vector shape) and opencl, the vulkan plugin's tests, the
# quantized products' GPU time per dispatch, and bp-generate beside
# llama.cpp's Vulkan build (llama-bench) on 1B-shaped files of six weight
# types and 7B-shaped q4_0 and q4_K files, pp512 and tg128: vulkan with its
# default shaders and with the previous ones
# (mul_mv=workgroup,fuse=false,attention=row), and opencl with its defaults
# (tiled prompt products, split decode attention, products fused with the
# next node) and without (matmul=dot,attention=row,fuse=false); then a
# profile of a 7B decode step both ways. Run
# from the repository root on the GPU machine, with the folder
# scripts/gpu/pack.sh made (default .gpu) and the Vulkan loader unpacked
# (see docs/plugins/vulkan.md, "On a GPU").
#
#   scripts/gpu/check.sh [PACK_DIR] [STAGES]
#
# STAGES: any of "devices ops tests bench models" (default all). Results go
# to $OUT (default /tmp/gpu-check), a table per stage on stdout.
set -u
P=$(cd "${1:-.gpu}" && pwd)
stages=${2:-"devices ops tests bench models"}
types=${TYPES:-"q4_0 q8_0 q4_K q6_K q5_K bf16"}  # 1B-shaped files
big_types=${BIG_TYPES:-"q4_0 q4_K"}                # llama-2-7B-shaped files
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
for z in "$P"/lib/*.xz; do [ -f "${z%.xz}" ] || xz -d -k "$z"; done
export LD_LIBRARY_PATH=$P/lib BP_PLUGIN_PATH=$P/lib/backplane/plugins
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
stamp() { echo "== $1 ($(date +%T))"; }

stamp devices
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader
"$P/bin/bp-devices" > "$out/devices.txt" 2>&1
grep -A3 -iE 'vulkan:0|problems' "$out/devices.txt" | head -8
# Without a Vulkan device every stage would measure nothing (llama-bench
# falls back to its CPU backend): stop here.
grep -q '"vulkan:0"' "$out/devices.txt" || { echo "no vulkan device: stopping"; exit 1; }
if has ops; then
  ops_specs=${SPECS:-"vulkan vulkan:mul_mv=workgroup,attention=row vulkan:attention=split vulkan:fast_paths=false"}
  grep -q '"opencl:0"' "$out/devices.txt" &&
    ops_specs="$ops_specs opencl opencl:matmul=tiled,attention=tile opencl:attention=split"
  grep -q 'cooperative matrices NV' "$out/devices.txt" && ops_specs="$ops_specs vulkan:coopmat=true"
  for spec in $ops_specs; do
    stamp "bp-test-ops $spec"
    timeout 150 "$P/bin/bp-test-ops" -d "$spec" > "$out/test-ops-${spec//[:=]/_}.txt" 2>&1
    echo "rc=$?"; grep -E 'FAIL|^OK|failed' "$out/test-ops-${spec//[:=]/_}.txt" | head -15
  done
fi
if has tests; then
  stamp bp_test_plugins_vulkan
  BP_TEST_PLUGIN_DIR=$P/lib/backplane/plugins timeout 150 "$P/bin/bp_test_plugins_vulkan" > "$out/gtest-vulkan.txt" 2>&1
  echo "rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED TEST' "$out/gtest-vulkan.txt" | head -20
fi
if has bench; then
  # GPU time per dispatch (profile=true) and the wall time per product,
  # submission and wait included (bp-bench's figure).
  stamp "bp-bench quantized products"
  BP_LOG=info timeout 200 "$P/bin/bp-bench" --device vulkan:profile=true --threads 8 --benchmark_min_time=0.1 \
    --benchmark_filter='Quant/MUL_MAT_(f32|q8_0|q4_0|q5_0|q4_K|q5_K|q6_K|bf16)(_dram)?/M=(4096|32768),N=(1|512),.*vulkan' \
    > "$out/bench.txt" 2> "$out/bench-log.txt"
  echo "rc=$?"; grep -E 'MUL_MAT' "$out/bench.txt" | awk '{print $1, $2, $3, $(NF-1), $NF}' | head -40
  grep -E 'profile' "$out/bench-log.txt" | head -40
fi
# One file: bp-generate on each device spec of $specs beside llama-bench
# (-ngl 99), a table row per spec. $1 size label, $2 type, $3 file.
bench_file() {
  local size=$1 t=$2 f=$3 ll spec bp
  ll=$(cd $L && LD_LIBRARY_PATH=$L timeout 120 ./llama-bench -m "$f" -ngl 99 -p 512 -n 128 -r ${REPS:-2} -o json \
    2> "$out/llama-$size-$t.log")
  echo "$ll" > "$out/llama-$size-$t.json"
  for spec in $specs; do
    bp=$(timeout 120 "$P/bin/bp-generate" --model "$f" --device "$spec" --bench --pp 512 --tg 128 --reps ${REPS:-2} \
      --json 2> "$out/gen-$size-$t-${spec//[:=,;]/_}.log")
    echo "$bp" > "$out/gen-$size-$t-${spec//[:=,;]/_}.json"
    python3 - "$size" "$t" "$spec" "$bp" "$ll" "$(stat -L -c %s "$f")" <<'PY'
import json, sys
size, t, spec = sys.argv[1:4]
try:
    bp = json.loads(sys.argv[4]); bpp, btg = bp["pp_tokens_per_s"], bp["tg_tokens_per_s"]
except Exception:
    bpp = btg = float("nan")
try:
    r = json.loads(sys.argv[5])
    lpp = [x["avg_ts"] for x in r if x["n_prompt"]][0]; ltg = [x["avg_ts"] for x in r if x["n_gen"]][0]
except Exception:
    lpp = ltg = float("nan")
b = int(sys.argv[6])
print(f"| {size} {t} | {b/2**20:.0f} MiB | {spec} | {bpp:.1f} | {lpp:.1f} | {bpp/lpp:.2f} | {btg:.1f} | {ltg:.1f} "
      f"| {btg/ltg:.2f} | {btg*b/1e9:.0f} | {ltg*b/1e9:.0f} |", flush=True)
PY
  done
}

if has models; then
  stamp models
  L=/tmp/llama-peer
  mkdir -p $L && cp "$P"/llama/* $L/ && xz -d -f $L/libggml-vulkan.so.xz && chmod +x $L/llama-bench
  # vulkan with its default shaders and with the previous ones (a workgroup
  # per matrix x vector row, no GPU fusion, a workgroup per attention row:
  # the plugin parameters keep them selectable); opencl, where it lists a
  # device, with its defaults (tiled products, split decode attention, fused
  # products) and without them (matmul=dot,attention=row,fuse=false).
  prev=vulkan:mul_mv=workgroup,fuse=false,attention=row
  specs=${SPECS_MODELS:-"vulkan $prev"}
  grep -q '"opencl:0"' "$out/devices.txt" && specs="$specs opencl opencl:matmul=dot,attention=row,fuse=false"
  # The prompt products on the tensor cores, where the device has them.
  grep -q 'cooperative matrices NV' "$out/devices.txt" && specs="$specs vulkan:coopmat=true"
  echo "| file | size | device | pp512 | llama.cpp pp512 | ratio | tg128 | llama.cpp tg128 | ratio | tg weight GB/s | llama.cpp |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  # A llama-shaped file per size and type, synthesised once: "1b" (2048
  # wide, 16 layers, 32/8 heads, ff 8192) and "7b" (llama-2-7B's shape).
  shape_1b="--embd 2048 --layers 16 --heads 32 --kv-heads 8 --ff 8192"
  shape_7b="--embd 4096 --layers 32 --heads 32 --kv-heads 32 --ff 11008"
  for size_types in "1b:$types" "7b:$big_types"; do
    size=${size_types%%:*}
    shape_var=shape_$size
    for t in ${size_types#*:}; do
      f=${MODEL_DIR:-/tmp}/llama-$size-$t.gguf
      [ -f "$f" ] || "$P/bin/bp-gguf" synth "$f" --arch llama --type "$t" --vocab spm ${!shape_var} \
        --n-vocab 32000 --ctx 2048 > /dev/null 2>&1
      bench_file "${size^^}" "$t" "$f"
    done
  done
  # Where a decode step's GPU time goes: per-dispatch times of the first
  # 7B type, new shaders then the previous ones.
  t=${big_types%% *}
  for spec in vulkan:profile=true $prev,profile=true; do
    stamp "profile 7B $t $spec"
    BP_LOG=info timeout 90 "$P/bin/bp-generate" --model ${MODEL_DIR:-/tmp}/llama-7b-$t.gguf --device $spec --bench \
      --pp 0 --tg 16 --reps 1 --profile > "$out/profile-7b-$t-${spec//[:=,;]/_}.txt" 2>&1
    grep -E 'profile|tok' "$out/profile-7b-$t-${spec//[:=,;]/_}.txt" | head -24
  done
  # Host and device on one timeline: the gaps between a step's dispatches.
  t=${types%% *}
  stamp "trace 1B $t"
  timeout 60 "$P/bin/bp-generate" --model ${MODEL_DIR:-/tmp}/llama-1b-$t.gguf --device vulkan --bench --pp 0 --tg 8 \
    --reps 1 --trace "$out/trace-$t.json" --profile > "$out/trace-$t.txt" 2>&1
  tail -25 "$out/trace-$t.txt"
fi
stamp done
