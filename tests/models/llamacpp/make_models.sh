#!/bin/sh
# make_models.sh: the seeded random-weight models the llama.cpp cross-check
# runs (bp-gguf synth), one per architecture x weight type and vocabulary
# kind, into DIR.
#
#   make_models.sh BP_GGUF DIR
set -eu
gguf=$1
dir=$2
mkdir -p "$dir"
synth() {  # NAME ARGS...
  name=$1; shift
  "$gguf" synth "$dir/$name.gguf" "$@" > /dev/null
}
# 32-value blocks: the default shape (embd 64, ff 160).
synth llama-spm-f32 --arch llama --type f32 --vocab spm
synth llama-spm-q8_0 --arch llama --type q8_0 --vocab spm
synth llama-bpe-f16-freqs --arch llama --type f16 --vocab bpe --rope-freqs --tied
synth qwen2-bpe-q4_0 --arch qwen2 --type q4_0 --vocab bpe
synth qwen2-bpe-bf16 --arch qwen2 --type bf16 --vocab bpe
synth qwen3-bpe-q5_0 --arch qwen3 --type q5_0 --vocab bpe
synth llama-spm-q4_1 --arch llama --type q4_1 --vocab spm
synth qwen2-bpe-q5_1-tied --arch qwen2 --type q5_1 --vocab bpe --tied
synth llama-bpe-iq4_nl --arch llama --type iq4_nl --vocab bpe
synth qwen3-bpe-mxfp4 --arch qwen3 --type mxfp4 --vocab bpe
# 256-value blocks (K quants, IQ4_XS): rows of 256.
synth llama-spm-q4_K --arch llama --type q4_K --vocab spm --embd 256 --ff 512
synth qwen2-bpe-q5_K --arch qwen2 --type q5_K --vocab bpe --embd 256 --ff 256
synth qwen3-bpe-q6_K --arch qwen3 --type q6_K --vocab bpe --embd 256 --ff 256 --head-dim 64
synth llama-spm-q2_K --arch llama --type q2_K --vocab spm --embd 256 --ff 512
synth qwen2-bpe-q3_K-tied --arch qwen2 --type q3_K --vocab bpe --embd 256 --ff 256 --tied
synth llama-bpe-iq4_xs --arch llama --type iq4_xs --vocab bpe --embd 256 --ff 512
