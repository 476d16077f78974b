// repack_gemm_avx512.cpp: the AVX-512 VNNI tiles of the repacked products
// for the 32-value formats (Q4_0, Q8_0, Q5_0), and the tile set's dispatch,
// which hands the K-quants to repack_gemm_avx512_k.cpp: a group of 4 rows
// (repack.hpp) by up to 32 columns of b (the wide tiles, with 4 or more
// columns) or by 1-3 columns.
//
// vpdpbusd multiplies unsigned bytes by signed ones, 4 products per int32
// lane: the weights' codes go in unsigned (Q4_0's nibbles, Q5_0's 5-bit
// codes, the K-quants' codes as they are; Q8_0's values plus 128), b's
// values signed, and every zero point or offset leaves exactly, in
// integers. The wide tiles make a register's 16 lanes 16 outputs (4 rows
// by 4 columns); the others hold 16 values of the 4 rows in a register, row
// r in 128-bit lane r, broadcast each 16 values of b to the 4 lanes, and
// sum each row's 4 lanes once at the end. Every output is one accumulation
// in a fixed order, so the result does not depend on how rows are split
// between threads.
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "repack.hpp"
#include "simd.hpp"

#if defined(BP_X86_SIMD)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c")
#endif

namespace bp::cpu {
namespace {

#include "repack_avx512.hpp"
#include "repack_rows_avx512.hpp"
#include "repack_simd.hpp"

// The 4-rows-per-register tiles of the 32-value formats run only below
// kWideFromN columns.
constexpr int kNarrowCols = 3;

int zero_shift(qtype q) {
  switch (q) {
    case qtype::q4_0:
      return q4_0_rows::kZeroShift;
    case qtype::q5_0:
      return q5_0_rows::kZeroShift;
    default:
      return q8_0_rows::kZeroShift;
  }
}

// With fewer than kWideFromN columns: per block, one register holds the 4
// rows' values 0-15 and another their 16-31; each column's dot starts from
// its lane sums (which quantize_b_vnni made -z times themselves) and takes
// two vpdpbusd.
template <class F, int RN>
void rtile(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  const int64_t nb = K / 32;
  // Column c's codes at b + c * ldb, its scales and lane sums further on.
  const auto scales = static_cast<size_t>(nb) * 32, sums = scales + static_cast<size_t>(nb) * sizeof(float);
  __m512 acc[RN];
  for (int c = 0; c < RN; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t *rec = g + static_cast<size_t>(j) * F::kRecord;
    if constexpr (RN <= 2 && F::kPrefetch > 0) prefetch_record(rec, F::kRecord, F::kPrefetch);
    const __m512 da = row_scales(rec);
    __m512i lo, hi;
    F::decode(rec, lo, hi);
    const char *col = b;
    for (int c = 0; c < RN; ++c, col += ldb) {
      const char *y = col + 32 * j;
      __m512i dot = _mm512_dpbusd_epi32(bcast16(col + sums + 16 * j), lo, bcast16(y));
      dot = _mm512_dpbusd_epi32(dot, hi, bcast16(y + 16));
      const float dy = reinterpret_cast<const float *>(col + scales)[j];
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(da, _mm512_set1_ps(dy)), acc[c]);
    }
  }
  for (int c = 0; c < RN; ++c) store_rows(acc[c], out + c * ldo);
}

// ---- the 32-value formats, wide: one register, 16 outputs ---------------
// With 4 or more columns, b is kept in groups of 4 columns, and a register's
// 16 int32 lanes are 16 outputs, row r and column c in lane 4r + c: the
// 8 quads (4 values) of a block are 8 vpdpbusd, each by the rows' quad k
// (one vpshufd of the decoded block spreads row r's over lane r) and the 4
// columns' (one broadcast load). A group block of b:
//   int8  codes[8][4][4]  quad k of columns 0-3
//   int32 start[4]        -z times each column's sum over the block
//   float d[4]            each column's scale
// so one conversion, one product of the scales and one FMA serve 16
// outputs of a block, where the 4-row tiles above spend them on 4.
constexpr size_t kWideStart = 8 * 16, kWideScales = kWideStart + 16, kWideBlock = kWideScales + 16;
constexpr int kWideCols = 32;
constexpr int64_t kWideFromN = 4;

template <class F, int RN>
void rtile_wide(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr int NG = (RN + 3) / 4;
  const int64_t nb = K / 32;
  const size_t group = 4 * ldb;  // ldb: a group's bytes per column
  __m512 acc[NG];
  for (int q = 0; q < NG; ++q) acc[q] = _mm512_setzero_ps();
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t *rec = g + static_cast<size_t>(j) * F::kRecord;
    const __m512 da = row_scales(rec);
    __m512i lo, hi;
    F::decode(rec, lo, hi);
    __m512i w[8];
    spread_quads(lo, w);
    spread_quads(hi, w + 4);
    const char *blk = b + static_cast<size_t>(j) * kWideBlock;
    __m512i dot[NG];
    for (int q = 0; q < NG; ++q) dot[q] = bcast16(blk + q * group + kWideStart);
    wide_dots<NG>(dot, w, 8, blk, group);
    for (int q = 0; q < NG; ++q) {
      const __m512 dy =
          _mm512_broadcast_f32x4(_mm_loadu_ps(reinterpret_cast<const float *>(blk + q * group + kWideScales)));
      acc[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[q]), _mm512_mul_ps(da, dy), acc[q]);
    }
  }
  store_wide<NG>(acc, RN, out, ldo);
}

bool wide(int64_t N) { return N >= kWideFromN; }

// Format F's tile for rn columns of a product of N.
template <class F>
rtile_fn tiles_of(int64_t N, int rn) {
  if (wide(N)) return tile_of<kWideCols>(rn, [](auto c) -> rtile_fn { return rtile_wide<F, decltype(c)::value>; });
  return tile_of<kNarrowCols>(rn, [](auto c) -> rtile_fn { return rtile<F, decltype(c)::value>; });
}

// The K-quants go to their own tile set (repack_gemm_avx512_k.cpp).
rtile_fn tile_vnni(qtype q, int64_t N, int rn) {
  if (reads_rkact(q)) return rkernels_avx512_vnni_k().tile(q, N, rn);
  switch (q) {
    case qtype::q4_0:
      return tiles_of<q4_0_rows>(N, rn);
    case qtype::q8_0:
      return tiles_of<q8_0_rows>(N, rn);
    case qtype::q5_0:
      return tiles_of<q5_0_rows>(N, rn);
    default:
      return nullptr;
  }
}

int max_cols_vnni(qtype q, int64_t N) {
  if (reads_rkact(q)) return rkernels_avx512_vnni_k().max_cols(q, N);
  return wide(N) ? kWideCols : kNarrowCols;
}

size_t col_bytes_vnni(qtype q, int64_t K, int64_t N) {
  if (reads_rkact(q)) return rkernels_avx512_vnni_k().col_bytes(q, K, N);
  return wide(N) ? static_cast<size_t>(K / 32) * kWideBlock / 4 : column_bytes(q, K, N);
}

// The narrow tiles read ract columns whose lane sums are -z times b's, where
// their dots start; the wide ones, group blocks (above).
void quantize_b_vnni(qtype q, int64_t N, const float *x, int64_t K, char *scratch, char *cols, int64_t n) {
  if (reads_rkact(q)) return rkernels_avx512_vnni_k().quantize_b(q, N, x, K, scratch, cols, n);
  const int shift = zero_shift(q);
  if (!wide(N)) {
    quantize_column(q, N, x, K, scratch, cols, n);
    const ract_col_parts y = ract_col_at(cols + static_cast<size_t>(n) * column_bytes(q, K, N), K);
    for (int64_t i = 0; i < 4 * y.blocks; ++i) y.sums[i] = -(y.sums[i] * (1 << shift));
    return;
  }
  quantize_ract_col(x, K, scratch);
  const ract_col_parts y = ract_col_at(scratch, K);
  const size_t slot = 4 * static_cast<size_t>(n % 4);
  char *group = cols + static_cast<size_t>(n / 4) * 4 * col_bytes_vnni(q, K, N);
  for (int64_t j = 0; j < y.blocks; ++j) {
    char *blk = group + static_cast<size_t>(j) * kWideBlock;
    for (int k = 0; k < 8; ++k) std::memcpy(blk + 16 * k + slot, y.qs + 32 * j + 4 * k, 4);
    const int32_t start = -((y.sums[4 * j] + y.sums[4 * j + 1] + y.sums[4 * j + 2] + y.sums[4 * j + 3]) * (1 << shift));
    std::memcpy(blk + kWideStart + slot, &start, 4);
    std::memcpy(blk + kWideScales + slot, &y.d[j], 4);
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const rkernels &rkernels_avx512_vnni() {
  static const rkernels k = {"avx512-vnni", max_cols_vnni, col_bytes_vnni, quantize_b_vnni, tile_vnni};
  return k;
}

}  // namespace bp::cpu

#else
namespace bp::cpu {
const rkernels &rkernels_avx512_vnni() { return rkernels_avx2(); }
const rkernels &rkernels_avx512_vnni_k() { return rkernels_avx2(); }
}  // namespace bp::cpu
#endif