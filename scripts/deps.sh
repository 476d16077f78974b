#!/usr/bin/env bash
# Installs the Debian 12 packages Backplane builds and tests with, if missing.
# Safe to run again: it asks apt only for what is not installed yet.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libcli11-dev libopenblas-dev
      # bp-server (tools/bp-server): HTTP by cpp-httplib.
      libcpp-httplib-dev
      # Vulkan: loader + headers, Mesa's lavapipe (a real driver on the CPU),
      # glslang to compile the shaders at build time, the validation layer.
      libvulkan-dev mesa-vulkan-drivers glslang-tools glslang-dev vulkan-validationlayers
      # OpenCL: the ICD loader, headers, PoCL (a real driver on the CPU).
      ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
      # clang: the sanitizer pass builds with it (its UBSan checks enum loads).
      clang
      # gRPC: the remote protocol library and bp-serve (remote/).
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
      # The Python module (python/) and its tests (tests/python).
      pybind11-dev python3-dev python3-numpy python3-pytest
      # The model library (models/): PCRE2 for the tokenizers' pre-tokenizer patterns.
      libpcre2-dev
      ccache)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
