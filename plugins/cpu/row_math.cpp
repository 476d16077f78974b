// row_math.cpp: row_math.hpp's functions, each picking the loop of the level
// cpu_isa() allows: row_math_avx512.cpp, row_math_avx2.cpp, or the portable
// loops (row_math_kernels.hpp); and the streamed stores.
#include "row_math.hpp"

#include <algorithm>
#include <cstdint>

#include "isa.hpp"
#include "row_math_kernels.hpp"
#include "simd.hpp"

namespace bp::cpu {
namespace {

#ifdef BP_X86_SIMD
// The level the row loops use: cpu_isa() (plugins/common/isa.hpp), which
// BP_CPU_ISA / BP_CPU_BASELINE cap so the tests can check every path.
plugins::isa_level level() {
  static const plugins::isa_level l = plugins::cpu_isa();
  return l;
}
bool have_avx2() { return level() >= plugins::isa_level::avx2; }
bool have_avx512() { return level() == plugins::isa_level::avx512; }
#endif

}  // namespace

double row_sum(const float *x, int64_t n) {
#ifdef BP_X86_SIMD
  if (have_avx512()) return sum_avx512(x, n);
  if (have_avx2()) return sum_avx2(x, n);
#endif
  return sum_portable(x, n);
}

double row_sum_sq(const float *x, int64_t n, double center) {
#ifdef BP_X86_SIMD
  if (have_avx512()) return sum_sq_avx512(x, n, center);
  if (have_avx2()) return sum_sq_avx2(x, n, center);
#endif
  return sum_sq_portable(x, n, center);
}

float row_max(const float *x, int64_t n) {
#ifdef BP_X86_SIMD
  if (have_avx512()) return max_avx512(x, n);
  if (have_avx2()) return max_avx2(x, n);
#endif
  return max_portable(x, n);
}

double row_exp_shift_sum(float *y, int64_t n, float shift) {
#ifdef BP_X86_SIMD
  if (have_avx512()) return exp_shift_sum_avx512(y, n, shift);
  if (have_avx2()) return exp_shift_sum_avx2(y, n, shift);
#endif
  return exp_shift_sum_portable(y, n, shift);
}

namespace {

// The element-wise loops: AVX-512 when chosen, else plain loops that GCC
// vectorizes for the baseline (SSE2): memory-bound at DRAM sizes either way,
// the wider path mostly frees the core for the other passes of a row.
void scale_add_cached(float *y, const float *x, int64_t n, float scale, const float *add) {
#ifdef BP_X86_SIMD
  if (have_avx512()) return scale_add_avx512(y, x, n, scale, add);
#endif
  scale_add_portable(y, x, n, scale, add);
}

void sub_scale_cached(float *y, const float *x, int64_t n, float center, float scale) {
#ifdef BP_X86_SIMD
  if (have_avx512()) return sub_scale_avx512(y, x, n, center, scale);
#endif
  sub_scale_portable(y, x, n, center, scale);
}

void binary_cached(row_binary_op op, float *y, const float *a, const float *b, int64_t n) {
#ifdef BP_X86_SIMD
  if (have_avx512()) return binary_avx512(op, y, a, b, n);
#endif
  binary_portable(op, y, a, b, n);
}

// The unary ops: AVX-512 for all but TANH (libm's tanhf on every path);
// AVX2 for the exp-based ones; else the portable loops.
void unary_cached(row_unary_op op, float *y, const float *x, int64_t n) {
#ifdef BP_X86_SIMD
  if (op != row_unary_op::tanh && have_avx512()) return unary_avx512(op, y, x, n);
  if ((op == row_unary_op::exp || op == row_unary_op::sigmoid || op == row_unary_op::silu ||
       op == row_unary_op::gelu) &&
      have_avx2())
    return unary_avx2(op, y, x, n);
#endif
  switch (op) {
    case row_unary_op::neg:
      return unary_portable<row_unary_op::neg>(y, x, n);
    case row_unary_op::abs:
      return unary_portable<row_unary_op::abs>(y, x, n);
    case row_unary_op::sqr:
      return unary_portable<row_unary_op::sqr>(y, x, n);
    case row_unary_op::sqrt:
      return unary_portable<row_unary_op::sqrt>(y, x, n);
    case row_unary_op::exp:
      return unary_portable<row_unary_op::exp>(y, x, n);
    case row_unary_op::relu:
      return unary_portable<row_unary_op::relu>(y, x, n);
    case row_unary_op::gelu:
      return unary_portable<row_unary_op::gelu>(y, x, n);
    case row_unary_op::silu:
      return unary_portable<row_unary_op::silu>(y, x, n);
    case row_unary_op::tanh:
      return unary_portable<row_unary_op::tanh>(y, x, n);
    default:
      return unary_portable<row_unary_op::sigmoid>(y, x, n);
  }
}

// Streamed rows: the cached loop computes kStreamChunk floats at a time into
// an L1 buffer, which non-temporal stores of 32 (AVX2) or 64 (AVX-512) bytes
// then copy out. Small chunks keep the reads of the inputs and the writes of
// y interleaved: computing a whole row first and streaming it after was
// 10-13% slower. 16-byte (SSE2) non-temporal stores were slower than plain
// stores, so the baseline path does not stream (2-core Zen 4 VM, rows of
// 4096 and 65536 floats, 2 threads over 64 MiB). Elements before y's first
// 64-byte boundary, and after the last whole vector, get plain stores.
constexpr int64_t kStreamChunk = 256;

// f(out, i, len) computes elements [i, i + len) of the row into out[0, len).
template <class F>
void each_streamed_chunk(float *y, int64_t n, F f) {
#ifdef BP_X86_SIMD
  const uintptr_t addr = reinterpret_cast<uintptr_t>(y);
  if (!have_avx2() || addr % alignof(float) != 0) return f(y, 0, n);
  int64_t i = std::min(n, static_cast<int64_t>((64 - addr % 64) % 64 / sizeof(float)));
  if (i > 0) f(y, 0, i);
  alignas(64) float chunk[kStreamChunk];
  int64_t (*const stream_copy)(float *, const float *, int64_t) = have_avx512() ? stream_copy_avx512 : stream_copy_avx2;
  while (i < n) {
    const int64_t len = std::min(n - i, kStreamChunk);
    f(chunk, i, len);
    const int64_t done = stream_copy(y + i, chunk, len);
    for (int64_t j = done; j < len; ++j) y[i + j] = chunk[j];
    i += len;
  }
#else
  f(y, 0, n);
#endif
}

}  // namespace

void row_store_fence(row_store store) {
#ifdef BP_X86_SIMD
  if (store == row_store::streamed) _mm_sfence();  // non-temporal stores are not ordered by the pool's release
#else
  (void)store;
#endif
}

void row_scale_add(float *y, const float *x, int64_t n, float scale, const float *add, row_store store) {
  if (store == row_store::cached) return scale_add_cached(y, x, n, scale, add);
  each_streamed_chunk(y, n, [&](float *out, int64_t i, int64_t len) {
    scale_add_cached(out, x + i, len, scale, add ? add + i : nullptr);
  });
}

void row_sub_scale(float *y, const float *x, int64_t n, float center, float scale, row_store store) {
  if (store == row_store::cached) return sub_scale_cached(y, x, n, center, scale);
  each_streamed_chunk(y, n,
                      [&](float *out, int64_t i, int64_t len) { sub_scale_cached(out, x + i, len, center, scale); });
}

void row_binary(row_binary_op op, float *y, const float *a, const float *b, int64_t n, row_store store) {
  if (store == row_store::cached) return binary_cached(op, y, a, b, n);
  each_streamed_chunk(y, n, [&](float *out, int64_t i, int64_t len) { binary_cached(op, out, a + i, b + i, len); });
}

void row_unary(row_unary_op op, float *y, const float *x, int64_t n, row_store store) {
  if (store == row_store::cached) return unary_cached(op, y, x, n);
  each_streamed_chunk(y, n, [&](float *out, int64_t i, int64_t len) { unary_cached(op, out, x + i, len); });
}

}  // namespace bp::cpu
