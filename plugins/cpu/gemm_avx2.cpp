// gemm_avx2.cpp: the AVX2 dot-product tiles of MUL_MAT's thin products
// (driven by mul_mat_dot_run, matmul_dot.hpp), compiled for AVX2 + FMA +
// F16C through target attributes and called only when cpu_isa() is avx2.
//
// The same design as the AVX-512 tiles in gemm_avx512.cpp, at 8 lanes and
// with 16 registers: a tile of RM rows of a by RN rows of b keeps RM x RN
// ymm accumulators, reads a straight from its rows (F16 widened by
// vcvtph2ps, BF16 by a zero-extension and a shift) and b from the interleaved panel, and requests the next
// tile's rows of a into L2 as it goes. The general 4 x 2 kernel of
// ops_matmul.cpp, which these replace for dense rows, walked 32 rows of a
// in K blocks of 256 and widened F16 rows into scratch first: f32 weights
// streamed at about half the AVX-512 tiles' rate, F16 ones at a quarter.
#include <cstdint>

#include "matmul_dot.hpp"
#include "simd.hpp"

namespace bp::cpu {

namespace {

BP_AVX2 inline float hsum8(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  return ((f[0] + f[4]) + (f[1] + f[5])) + ((f[2] + f[6]) + (f[3] + f[7]));
}

// 8 values of row |p| at k (F32, or F16 / BF16 widened; a bf16 is the top
// half of an f32).
template <bp_type T>
BP_AVX2 inline __m256 load_a8(const void *p, int64_t k) {
  if constexpr (T == BP_TYPE_F32) {
    return _mm256_loadu_ps(static_cast<const float *>(p) + k);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(static_cast<const uint16_t *>(p) + k));
    if constexpr (T == BP_TYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// The last |n| < 8 values of row |p| from k, zeros after them: nothing past
// the row's end is read.
template <bp_type T>
BP_AVX2 inline __m256 load_a8_tail(const void *p, int64_t k, int64_t n) {
  if constexpr (T == BP_TYPE_F32) {
    alignas(32) float f[8] = {};
    for (int64_t i = 0; i < n; ++i) f[i] = static_cast<const float *>(p)[k + i];
    return _mm256_load_ps(f);
  } else {
    alignas(16) uint16_t h[8] = {};
    for (int64_t i = 0; i < n; ++i) h[i] = static_cast<const uint16_t *>(p)[k + i];
    return load_a8<T>(h, 0);
  }
}

template <int RM, int RN, bp_type T>
BP_AVX2 void dot_tile(const void *const *a, const float *bp, int64_t K, float *out, int64_t ldo,
                      const void *const *next) {
  constexpr int64_t kElem = T == BP_TYPE_F32 ? 4 : 2;
  __m256 acc[RM][RN];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    if (next && (k * kElem) % 64 == 0) {
      for (int i = 0; i < RM; ++i) _mm_prefetch(static_cast<const char *>(next[i]) + k * kElem, _MM_HINT_T1);
    }
    const float *bk = bp + k * RN;
    __m256 va[RM];
    for (int i = 0; i < RM; ++i) va[i] = load_a8<T>(a[i], k);
    for (int j = 0; j < RN; ++j) {
      const __m256 vb = _mm256_load_ps(bk + j * 8);
      for (int i = 0; i < RM; ++i) acc[i][j] = _mm256_fmadd_ps(va[i], vb, acc[i][j]);
    }
  }
  if (k < K) {  // the tail: a's zeros past K meet the panel's zeros
    __m256 va[RM];
    for (int i = 0; i < RM; ++i) va[i] = load_a8_tail<T>(a[i], k, K - k);
    const float *bk = bp + k * RN;
    for (int j = 0; j < RN; ++j) {
      const __m256 vb = _mm256_load_ps(bk + j * 8);
      for (int i = 0; i < RM; ++i) acc[i][j] = _mm256_fmadd_ps(va[i], vb, acc[i][j]);
    }
  }
  for (int j = 0; j < RN; ++j)
    for (int i = 0; i < RM; ++i) out[j * ldo + i] = hsum8(acc[i][j]);
}

// Rows of a per tile for RN <= kGroup rows of b: RM x RN accumulators plus
// RM rows of a and one row of b within the 16 ymm registers, and more rows
// of a when b is thin (more loads in flight from memory).
constexpr int kGroup = 4;
constexpr int rows_for(int rn) { return rn == 1 ? 8 : rn == 2 ? 4 : rn == 3 ? 3 : 2; }
constexpr int kWideRows = rows_for(kGroup);

template <bp_type T>
dot_fn tile_fn(int rows, int rn) {
  static const dot_fn own[kGroup] = {dot_tile<rows_for(1), 1, T>, dot_tile<rows_for(2), 2, T>,
                                     dot_tile<rows_for(3), 3, T>, dot_tile<rows_for(4), 4, T>};
  static const dot_fn wide[kGroup] = {dot_tile<kWideRows, 1, T>, dot_tile<kWideRows, 2, T>, dot_tile<kWideRows, 3, T>,
                                      dot_tile<kWideRows, 4, T>};
  static const dot_fn single[kGroup] = {dot_tile<1, 1, T>, dot_tile<1, 2, T>, dot_tile<1, 3, T>, dot_tile<1, 4, T>};
  if (rows == 1) return single[rn - 1];
  return rows == rows_for(rn) ? own[rn - 1] : wide[rn - 1];
}

int rows_for_fn(int rn) { return rows_for(rn); }
dot_fn tile_for(bp_type type, int rows, int rn) {
  return type == BP_TYPE_F16    ? tile_fn<BP_TYPE_F16>(rows, rn)
         : type == BP_TYPE_BF16 ? tile_fn<BP_TYPE_BF16>(rows, rn)
                                : tile_fn<BP_TYPE_F32>(rows, rn);
}

}  // namespace

const dot_kernels &dot_kernels_avx2() {
  static const dot_kernels k{8, kGroup, rows_for_fn, tile_for};
  return k;
}

}  // namespace bp::cpu
