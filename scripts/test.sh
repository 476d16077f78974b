#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every CTest test,
# then the op conformance runner on every device found.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
./build/bin/bp-test-ops
ctest --test-dir build --output-on-failure -j "$(nproc)"
