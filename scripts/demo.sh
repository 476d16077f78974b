#!/usr/bin/env bash
# The main job: install what is missing, build, list plugins and devices,
# run the demo decoder graph on the default device, then generate text with a
# real (small) model: models/tiny/tiny-kjv.gguf, a llama trained on the King
# James Bible (models/tiny/README.md). Your own GGUF file runs the same way:
#   ./build/bin/bp-generate --model FILE.gguf --device "vulkan;cpu" -p "..." -n 64
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
./build/bin/bp-devices
./build/bin/bp-run --device "${BP_DEVICE:-auto}"
# Sampled, not greedy: a model this small repeats itself under argmax. The
# repetition penalty keeps it off its favourite phrases ("and the LORD"),
# and top-p 0.9 at temperature 0.6 off the tail where its misspelt words are
# (models/tiny/README.md, "Output").
./build/bin/bp-generate --model models/tiny/tiny-kjv.gguf --device "${BP_DEVICE:-cpu}" \
  -p "In the beginning God created" -n 64 --temp 0.6 --top-p 0.9 --repeat-penalty 1.3 --seed 3
