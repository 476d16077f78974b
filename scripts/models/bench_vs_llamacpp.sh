#!/bin/sh
# bench_vs_llamacpp.sh: Backplane's and llama.cpp's pp and tg on the same
# 1B-shaped llama files (n_embd 2048, 16 layers, 32 heads, 8 KV heads, ff 8192,
# vocab 32000), made by bp-gguf synth, with the same thread count, measured
# one after the other in one run. The figures of docs/models.md.
#
#   scripts/models/bench_vs_llamacpp.sh BUILD_DIR NODE_DIR [TYPES] [DEVICE]
#
# BUILD_DIR holds bin/bp-gguf and bin/bp-generate; NODE_DIR holds
# node_modules/node-llama-cpp (tests/models/llamacpp/setup.sh NODE_DIR
# installs it). TYPES defaults to "q4_0 q8_0 q4_K q6_K", DEVICE to cpu:threads=2.
# With LLAMA_BENCH=path/to/llama-bench (built from the llama.cpp source that
# node-llama-cpp carries: git clone its llama/gitRelease.bundle, cmake
# -DGGML_NATIVE=ON, ninja llama-bench) llama.cpp's figures come from
# llama-bench itself; else from node-llama-cpp's prebuilt library, whose
# per-call overhead in JavaScript lowers its tg figure.
# The files go to $BP_BENCH_DIR (default /tmp/bp-bench-1b) and are kept.
set -eu
echo "| type | file | Backplane pp512 tok/s | llama.cpp pp512 | ratio | Backplane tg128 tok/s | llama.cpp tg128 | ratio | Backplane tg weight GB/s | llama.cpp tg weight GB/s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
build=$1
node_dir=$2
types=${3:-"q4_0 q8_0 q4_K q6_K"}
device=${4:-cpu:threads=2}
threads=2
dir=${BP_BENCH_DIR:-/tmp/bp-bench-1b}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
for t in $types; do
  f="$dir/llama-1b-$t.gguf"
  [ -f "$f" ] || "$build/bin/bp-gguf" synth "$f" --arch llama --type "$t" --vocab spm --embd 2048 --layers 16 \
    --heads 32 --kv-heads 8 --ff 8192 --n-vocab 32000 --ctx 2048 >&2
  bp=$("$build/bin/bp-generate" --model "$f" --device "$device" --bench --pp 512 --tg 128 --reps 3 --json)
  if [ -n "${LLAMA_BENCH:-}" ]; then
    ll=$("$LLAMA_BENCH" -m "$f" -t $threads -p 512 -n 128 -r 3 -o json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(json.dumps({"pp_tokens_per_s": [x["avg_ts"] for x in r if x["n_prompt"]][0],
                  "tg_tokens_per_s": [x["avg_ts"] for x in r if x["n_gen"]][0]}))')
  else
    ll=$(node "$here/llamacpp_bench.mjs" "$f" --pp 512 --tg 128 --reps 3 --threads $threads --node-dir "$node_dir")
  fi
  python3 - "$t" "$device" "$bp" "$ll" "$(stat -c %s "$f")" <<'PY'
import json, sys
t, dev, bp, ll = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
size = int(sys.argv[5])
bpp, btg, lpp, ltg = bp["pp_tokens_per_s"], bp["tg_tokens_per_s"], ll["pp_tokens_per_s"], ll["tg_tokens_per_s"]
# Each generated token reads every weight once: the file's bytes per token.
print(f"| {t} | {size / 2**20:.0f} MiB | {bpp:.1f} | {lpp:.1f} | {bpp/lpp:.2f} | {btg:.1f} | {ltg:.1f} | {btg/ltg:.2f} "
      f"| {btg * size / 1e9:.1f} | {ltg * size / 1e9:.1f} |", flush=True)
PY
done
