// repack_gemm_amx_k.cpp: the AMX int8 tiles of the repacked products for
// Q4_K and Q5_K: 16 rows (kAmxGroups groups) by up to a call's columns, as
// repack_gemm_amx.cpp does for the 32-value formats, whose dispatch hands
// these formats here.
//
// Each 32-value sub-block is one TDPBSSD (the codes, 0-15 or 0-31, are
// signed bytes as they are; b's values quantized with one scale per
// super-block, rkact). Per super-block the 8 sub-blocks' int32 dots are
// scaled into a float sum by d times each row's sub-block scale, in
// sub-block order; the minimums leave in integers, each output's sum of
// its row's 8 minimums times the column's 8 sums of 32 values (vpdpwssd);
// then acc += (sum - mins * dmin) * the column's scale. These are the
// operations of the VNNI wide K-quant tiles (repack_gemm_avx512_k.cpp) in
// the same order with the same operands, so the outputs equal theirs bit
// for bit and do not depend on how rows are split between threads.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "repack.hpp"
#include "simd.hpp"

#if defined(BP_X86_SIMD)
#if defined(__clang__)
#pragma clang attribute push(                                                                            \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c,amx-tile,amx-int8"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c,amx-tile,amx-int8")
#endif

namespace bp::cpu {
namespace {

#include "repack_amx.hpp"
#include "repack_avx512.hpp"
#include "repack_kquant_avx512.hpp"
#include "repack_simd.hpp"

constexpr int kSubBlocks = 8;  // of 32 values in a super-block

// The 16 rows' super-block in the thread's scratch: B per sub-block, then
// per sub-block the rows' d times their scale (f32), the rows' dmin (f32),
// and their minimums as int16 pairs (pair i: sub-blocks 2i and 2i + 1).
constexpr size_t kRowsScales = kSubBlocks * kAmxTileBytes, kRowsDmin = kRowsScales + kSubBlocks * 64;
constexpr size_t kRowsMins = kRowsDmin + 64, kRowsBlock = kRowsMins + 4 * 64;
// A group of 16 columns of b per super-block: A per sub-block, each
// column's sums of 32 values as int16 pairs (pair i as above), its scale.
constexpr size_t kColsSums = kSubBlocks * kAmxTileBytes, kColsScales = kColsSums + 4 * 64;
constexpr size_t kColsBlock = kColsScales + 64;

// The 16 rows at |g| (kAmxGroups groups of records, nsuper super-blocks
// each) into |dst|, kRowsBlock bytes per super-block. The scales are the
// VNNI tiles' (d times the 6-bit scale, each a float product).
template <bool Q5>
void decode_rows_k(const uint8_t *g, int64_t nsuper, uint8_t *dst) {
  using codes = kquant_codes<Q5>;
  const size_t group_bytes = static_cast<size_t>(nsuper) * codes::kRecord;
  for (int64_t s = 0; s < nsuper; ++s) {
    uint8_t *blk = dst + static_cast<size_t>(s) * kRowsBlock;
    auto *scale = reinterpret_cast<float *>(blk + kRowsScales);
    auto *dmin = reinterpret_cast<float *>(blk + kRowsDmin);
    auto *mins = reinterpret_cast<uint32_t *>(blk + kRowsMins);
    const uint8_t *rec[kAmxGroups];
    for (int q = 0; q < kAmxGroups; ++q) {
      rec[q] = g + q * group_bytes + static_cast<size_t>(s) * codes::kRecord;
      const kscale_bytes k = kscales_of(rec[q]);
      alignas(16) uint8_t sc[2][16], m[2][16];  // byte 4r + t: row r's sub-block t (+ 4 in [1])
      _mm_store_si128(reinterpret_cast<__m128i *>(sc[0]), k.sc_lo);
      _mm_store_si128(reinterpret_cast<__m128i *>(sc[1]), k.sc_hi);
      _mm_store_si128(reinterpret_cast<__m128i *>(m[0]), k.m_lo);
      _mm_store_si128(reinterpret_cast<__m128i *>(m[1]), k.m_hi);
      alignas(32) float dd[8];  // d and dmin of rows 0-3
      _mm256_store_ps(dd, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rec[q]))));
      for (int r = 0; r < kPackRows; ++r) {
        const int row = kPackRows * q + r;
        const auto sub = [&](const uint8_t(*v)[16], int t) { return v[t / 4][4 * r + t % 4]; };
        for (int t = 0; t < kSubBlocks; ++t) scale[kAmxRows * t + row] = dd[2 * r] * static_cast<float>(sub(sc, t));
        dmin[row] = dd[2 * r + 1];
        for (int i = 0; i < 4; ++i)
          mins[kAmxRows * i + row] = sub(m, 2 * i) | static_cast<uint32_t>(sub(m, 2 * i + 1)) << 16;
      }
    }
    const codes c[kAmxGroups] = {codes(rec[0]), codes(rec[1]), codes(rec[2]), codes(rec[3])};
    for (int p = 0; p < kSubBlocks / 2; ++p) {
      __m512i lo0[kAmxGroups], hi0[kAmxGroups], lo1[kAmxGroups], hi1[kAmxGroups];
      for (int q = 0; q < kAmxGroups; ++q) c[q].pair(p, lo0[q], hi0[q], lo1[q], hi1[q]);
      store_b_tile(lo0, hi0, blk + kAmxTileBytes * (2 * p));
      store_b_tile(lo1, hi1, blk + kAmxTileBytes * (2 * p + 1));
    }
  }
}

// The 16 columns' super-blocks at |cols| against the decoded rows, into
// acc: each super-block's 8 tile products in two batches of 4, its sums
// (one per column) finished after the second.
inline void tile_columns_k(const char *cols, const uint8_t *rows, int64_t nsuper, __m512 *acc) {
  __m512 sum[kAmxTileCols];
  pipelined(
      2 * nsuper,
      [&](int64_t t, c_tiles &c) {
        const size_t a = static_cast<size_t>(t / 2) * kColsBlock + (t % 2) * kSlots * kAmxTileBytes;
        const size_t b = static_cast<size_t>(t / 2) * kRowsBlock + (t % 2) * kSlots * kAmxTileBytes;
        tile_dots(cols + a, rows + b, kAmxTileBytes, kSlots, c);
      },
      [&](int64_t t, c_tiles &c) {
        const uint8_t *r = rows + static_cast<size_t>(t / 2) * kRowsBlock;
        const char *col = cols + static_cast<size_t>(t / 2) * kColsBlock;
        if (t % 2 == 0)
          for (int n = 0; n < kAmxTileCols; ++n) sum[n] = _mm512_setzero_ps();
        for (int i = 0; i < kSlots; ++i) {
          const int sub = static_cast<int>(t % 2) * kSlots + i;
          const __m512 scale = _mm512_loadu_ps(reinterpret_cast<const float *>(r + kRowsScales) + kAmxRows * sub);
#pragma GCC unroll 16
          for (int n = 0; n < kAmxTileCols; ++n)
            sum[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c[i] + kAmxRows * n)), scale, sum[n]);
        }
        if (t % 2 == 0) return;
        const __m512 dmin = _mm512_loadu_ps(reinterpret_cast<const float *>(r + kRowsDmin));
        __m512i mins[4];
        for (int i = 0; i < 4; ++i) mins[i] = _mm512_loadu_si512(r + kRowsMins + 64 * i);
        const auto *pairs = reinterpret_cast<const int32_t *>(col + kColsSums);
        const auto *dy = reinterpret_cast<const float *>(col + kColsScales);
        for (int n = 0; n < kAmxTileCols; ++n) {
          __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mins[0], _mm512_set1_epi32(pairs[n]));
          for (int i = 1; i < 4; ++i)
            m = _mm512_dpwssd_epi32(m, mins[i], _mm512_set1_epi32(pairs[kAmxTileCols * i + n]));
          acc[n] =
              _mm512_fmadd_ps(_mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), dmin, sum[n]), _mm512_set1_ps(dy[n]), acc[n]);
        }
      });
}

// Not inlined into its wrappers (amx_tile_k_for): one copy per format.
template <bool Q5>
__attribute__((noinline)) void amx_tile_k(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out,
                                          int64_t ldo, int rn) {
  const int64_t nsuper = K / 256;
  uint8_t *rows = amx_rows(static_cast<size_t>(nsuper) * kRowsBlock);
  decode_rows_k<Q5>(g, nsuper, rows);
  for_column_tiles(rn, out, ldo,
                   [&](int n0, __m512 *acc) { tile_columns_k(b + static_cast<size_t>(n0) * ldb, rows, nsuper, acc); });
}

template <bool Q5, int RN>
void amx_tile_k_for(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  amx_tile_k<Q5>(g, b, ldb, K, out, ldo, RN);
}

rtile_fn tile_k(qtype q, int64_t, int rn) {
  if (q == qtype::q5_k)
    return tile_of<kAmxCallCols>(rn, [](auto c) -> rtile_fn { return amx_tile_k_for<true, decltype(c)::value>; });
  return tile_of<kAmxCallCols>(rn, [](auto c) -> rtile_fn { return amx_tile_k_for<false, decltype(c)::value>; });
}

int max_cols_k(qtype, int64_t) { return kAmxCallCols; }

int tile_groups_k(qtype, int64_t) { return kAmxGroups; }

size_t col_bytes_k(qtype, int64_t K, int64_t) { return static_cast<size_t>(K / 256) * kColsBlock / kAmxTileCols; }

// Column n quantized as an rkact column (in |scratch|), then into its slot
// of its group's super-blocks: its 32-value sub-blocks as A's rows, its
// sums of 32 values from the 16-value ones as the VNNI wide tiles pair
// them, its scale.
void quantize_b_k(qtype q, int64_t N, const float *x, int64_t K, char *scratch, char *cols, int64_t n) {
  quantize_rkact_col(x, K, scratch);
  const rkact_col_parts y = rkact_col_at(scratch, K);
  const size_t slot = static_cast<size_t>(n % kAmxTileCols);
  char *group = cols + static_cast<size_t>(n / kAmxTileCols) * kAmxTileCols * col_bytes_k(q, K, N);
  for (int64_t s = 0; s < y.supers; ++s) {
    char *blk = group + static_cast<size_t>(s) * kColsBlock;
    const int16_t *sums = y.sums + 16 * s;
    for (int t = 0; t < kSubBlocks; ++t) std::memcpy(blk + kAmxTileBytes * t + 32 * slot, y.qs + 256 * s + 32 * t, 32);
    for (int i = 0; i < 4; ++i) {
      const int16_t pair[2] = {static_cast<int16_t>(sums[4 * i] + sums[4 * i + 1]),
                               static_cast<int16_t>(sums[4 * i + 2] + sums[4 * i + 3])};
      std::memcpy(blk + kColsSums + 64 * i + 4 * slot, pair, 4);
    }
    std::memcpy(blk + kColsScales + 4 * slot, &y.d[s], 4);
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const rkernels &rkernels_amx_k() {
  static const rkernels k = {"amx", max_cols_k, col_bytes_k, quantize_b_k, tile_k, tile_groups_k};
  return k;
}

}  // namespace bp::cpu

#endif
