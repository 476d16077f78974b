#!/bin/sh
# bp-gguf quantize against llama.cpp's llama-quantize on the same f16 files,
# for every mix: the same type and bytes for every tensor (compare_gguf.py)
# and the same file.
#
#   sh compare_quantize.sh BP_GGUF NODE_DIR WORK [MIX ...]
#
# NODE_DIR holds node-llama-cpp 3.21.1 and its prebuilt linux-x64 libraries
# (tests/models/llamacpp/setup.sh installs them). llama-quantize is built in
# WORK from the llama.cpp source node-llama-cpp carries (its git bundle),
# linked against those libraries: a few seconds. The inputs are synthesized
# by bp-gguf synth into WORK unless QUANTIZE_INPUTS names f16/bf16/f32 files
# (space-separated). THREADS (default 2) goes to both tools.
# Exit 0 when every file and mix agrees, 1 when one differs, 77 (skip) when
# node-llama-cpp, git or a C++ compiler is missing.
set -u
BP_GGUF=${1:?usage: compare_quantize.sh BP_GGUF NODE_DIR WORK [MIX ...]}
NODE_DIR=${2:?usage}
WORK=${3:?usage}
shift 3
MIXES=${*:-Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS MXFP4_MOE F16 BF16 F32}
THREADS=${THREADS:-2}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
LLAMA=$NODE_DIR/node_modules/node-llama-cpp/llama
BINS=$NODE_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64

[ -f "$LLAMA/gitRelease.bundle" ] || { echo "SKIPPED: no node-llama-cpp in $NODE_DIR"; exit 77; }
[ -f "$BINS/libllama-common.so" ] || { echo "SKIPPED: no prebuilt linux-x64 libraries in $NODE_DIR"; exit 77; }
command -v git >/dev/null 2>&1 || { echo "SKIPPED: git is not installed"; exit 77; }
CXX=${CXX:-c++}
command -v "$CXX" >/dev/null 2>&1 || { echo "SKIPPED: no C++ compiler ($CXX)"; exit 77; }
mkdir -p "$WORK" || exit 1

SRC=$WORK/llama.cpp
if [ ! -d "$SRC/tools/quantize" ]; then
    rm -rf "$SRC"
    git clone -q "$LLAMA/gitRelease.bundle" "$SRC" 2>/dev/null || { echo "cannot clone $LLAMA/gitRelease.bundle"; exit 1; }
fi
LQ=$WORK/llama-quantize
if [ ! -x "$LQ" ]; then
    echo "building llama-quantize from $SRC against $BINS"
    "$CXX" -std=c++17 -O2 -I"$SRC/include" -I"$SRC/ggml/include" -I"$SRC/common" -I"$SRC/vendor" \
        "$SRC/tools/quantize/quantize.cpp" "$SRC/tools/quantize/main.cpp" -o "$LQ" \
        -L"$BINS" -l:libllama-common.so -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so \
        -Wl,-rpath,"$BINS" -lpthread || { echo "cannot build llama-quantize"; exit 1; }
fi

INPUTS=${QUANTIZE_INPUTS:-}
if [ -z "$INPUTS" ]; then
    # an untied llama with 4 query heads per key head and ffn_down rows of
    # 352 (whole 32-blocks, not 256-blocks), a tied qwen2 with rows of 360
    # (not 32-blocks either), a bf16 qwen3 with 16 layers
    common="--embd 256 --heads 4 --n-vocab 600"
    "$BP_GGUF" synth "$WORK/llama-untied.gguf" --arch llama --type f16 --layers 8 --kv-heads 1 --ff 352 $common >/dev/null &&
    "$BP_GGUF" synth "$WORK/qwen2-tied.gguf" --arch qwen2 --vocab bpe --type f16 --layers 8 --kv-heads 2 --ff 360 \
        --tied $common >/dev/null &&
    "$BP_GGUF" synth "$WORK/qwen3-bf16.gguf" --arch qwen3 --vocab bpe --type bf16 --layers 16 --kv-heads 2 --ff 512 \
        $common >/dev/null || { echo "bp-gguf synth failed"; exit 1; }
    INPUTS="$WORK/llama-untied.gguf $WORK/qwen2-tied.gguf $WORK/qwen3-bf16.gguf"
fi

failed=0
for in in $INPUTS; do
    for mix in $MIXES; do
        lq_out=$WORK/lq.gguf
        bp_out=$WORK/bp.gguf
        rm -f "$lq_out" "$bp_out"
        if ! "$LQ" "$in" "$lq_out" "$mix" "$THREADS" >"$WORK/lq.log" 2>&1; then
            echo "$(basename "$in") $mix: llama-quantize failed (see $WORK/lq.log)"; failed=1; continue
        fi
        if ! "$BP_GGUF" quantize "$in" "$bp_out" "$mix" --threads "$THREADS" --no-progress >"$WORK/bp.log" 2>&1; then
            echo "$(basename "$in") $mix: bp-gguf quantize failed: $(tail -1 "$WORK/bp.log")"; failed=1; continue
        fi
        verdict=$("$PYTHON" "$HERE/compare_gguf.py" "$lq_out" "$bp_out" | tail -1)
        case $verdict in
            same*) file=differs; cmp -s "$lq_out" "$bp_out" && file="the same file" ;;
            *) failed=1; "$PYTHON" "$HERE/compare_gguf.py" "$lq_out" "$bp_out" | head -5; file= ;;
        esac
        echo "$(basename "$in") $mix: $verdict${file:+, $file}"
    done
done
rm -f "$WORK/lq.gguf" "$WORK/bp.gguf"
[ $failed = 0 ] && echo "bp-gguf quantize agrees with llama-quantize on every file and mix"
exit $failed
