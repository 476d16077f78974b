#!/bin/sh
# pack.sh: gathers what scripts/gpu/check.sh runs on a GPU machine that has
# no build tools or Debian libraries: Backplane's tools, libraries and the
# cpu, vulkan and opencl plugins from BUILD_DIR, the shared libraries they
# need that such a machine lacks (the OpenCL ICD loader included: the
# vendor's ICD file names its driver), and (when LLAMA_BENCH_DIR is set) a
# llama-bench linked against node-llama-cpp's prebuilt Vulkan build, as the
# peer.
#
#   scripts/gpu/pack.sh BUILD_DIR OUT_DIR
#
# LLAMA_BENCH_DIR: a folder holding llama-bench and the prebuilt libraries
# (libggml-vulkan.so is stored xz-compressed, as it is most of the bytes).
set -eu
build=$1
out=$2
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/backplane/plugins"
for t in bp-devices bp-test-ops bp-bench bp-generate bp-gguf bp_test_plugins_vulkan; do
  cp "$build/bin/$t" "$out/bin/"
done
cp -P "$build"/lib/libbackplane*.so* "$out/lib/"
cp "$build/lib/backplane/plugins/libbp-cpu.so" "$build/lib/backplane/plugins/libbp-vulkan.so" \
  "$out/lib/backplane/plugins/"
[ -f "$build/lib/backplane/plugins/libbp-opencl.so" ] &&
  cp "$build/lib/backplane/plugins/libbp-opencl.so" "$out/lib/backplane/plugins/"
# The Debian libraries the tools link that a CUDA image does not ship.
for l in libspdlog.so.1.10 libfmt.so.9 libbenchmark.so.1debian libgfortran.so.5 libquadmath.so.0 libpcre2-8.so.0 \
  libOpenCL.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$out/lib/"
done
# bp-bench's sgemm reference, compressed (check.sh unpacks it).
xz -T0 -3 -c /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 > "$out/lib/libopenblas.so.0.xz"
if [ -n "${LLAMA_BENCH_DIR:-}" ]; then
  mkdir -p "$out/llama"
  for f in llama-bench libggml-base.so libggml.vulkan.v0.4.0.so libllama.vulkan.v0.4.0.so libllama-common.so \
    libggml-cpu-x64.so; do
    cp "$LLAMA_BENCH_DIR/$f" "$out/llama/"
  done
  xz -T0 -3 -c "$LLAMA_BENCH_DIR/libggml-vulkan.so" > "$out/llama/libggml-vulkan.so.xz"
fi
strip "$out"/bin/* "$out"/lib/*.so* "$out"/lib/backplane/plugins/*.so 2>/dev/null || true
du -sh "$out"
