#!/usr/bin/env bash
# The main job: install what is missing, build, list plugins and devices,
# then run the demo decoder graph on the default device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
./build/bin/bp-devices
./build/bin/bp-run --device "${BP_DEVICE:-auto}"
