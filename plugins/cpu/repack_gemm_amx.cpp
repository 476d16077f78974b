// repack_gemm_amx.cpp: the AMX int8 tiles of the repacked products for the
// 32-value formats (Q4_0, Q8_0, Q5_0) with kAmxFromN or more columns of b:
// 16 rows (kAmxGroups groups of repack.hpp) by up to kAmxCallCols columns per
// call; and the tile set's dispatch, which hands Q4_K and Q5_K to
// repack_gemm_amx_k.cpp, and narrower products and Q6_K to the AVX-512 VNNI
// tiles (rkernels_avx512_vnni).
//
// TDPBSSD multiplies a tile of 16 rows of signed bytes (A) by a tile of
// signed bytes in quads (B: row k holds 4 consecutive values of each of 16
// columns) into 16 x 16 int32 sums. Every 32-value block has a scale of its
// own on both sides, so each block is one TDPBSSD of K = 32 (A 16 x 32
// bytes, B 8 x 64), and its int32 tile is stored and scaled into f32
// accumulators with AVX-512, block after block: acc += float(dot) * (d_row
// * d_col), the operation the VNNI wide tiles do in the same order, so each
// output is one accumulation in a fixed order, the same bits as theirs, and
// does not depend on how rows are split between threads.
//   A: 16 columns of b, kept in groups of 16 columns (quantize_b_amx): per
//      block the 16 columns' 32 values side by side, then their 16 scales,
//      so a tile load reads 512 contiguous bytes.
//   B: the 16 rows' block decoded to signed values (the codes less the zero
//      point) and arranged as TDPBSSD wants them, once per call for the
//      whole K into a scratch of the thread (amx_rows), then read by every
//      column tile of the call.
//   C: row n is column n's dots with the 16 rows, so a row of the f32
//      accumulators is 16 outputs side by side in dst.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "isa.hpp"
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
#include "repack_rows_avx512.hpp"

// Below this many columns the VNNI tiles run: a tile of 16 columns would be
// mostly padding.
constexpr int64_t kAmxFromN = 16;

// One block of the 16 rows in the scratch: B's 8 rows of 64 bytes, then the
// rows' 16 scales (and of a group of 16 columns of b: A's 16 rows of 32
// bytes, then the columns' scales).
constexpr size_t kAmxScales = kAmxTileBytes, kAmxBlock = kAmxScales + kAmxRows * sizeof(float);

// The 16 rows at |g| (kAmxGroups groups of F's records, nb blocks each) into
// |dst|, kAmxBlock bytes per block: B (the codes less the zero point), then
// the rows' scales.
template <class F>
void decode_rows(const uint8_t *g, int64_t nb, uint8_t *dst) {
  const __m512i zero = _mm512_set1_epi8(static_cast<char>(1 << F::kZeroShift));
  const size_t group_bytes = static_cast<size_t>(nb) * F::kRecord;
  for (int64_t j = 0; j < nb; ++j) {
    uint8_t *blk = dst + static_cast<size_t>(j) * kAmxBlock;
    __m512i lo[kAmxGroups], hi[kAmxGroups];
    for (int q = 0; q < kAmxGroups; ++q) {
      const uint8_t *rec = g + q * group_bytes + static_cast<size_t>(j) * F::kRecord;
      F::decode(rec, lo[q], hi[q]);
      lo[q] = _mm512_sub_epi8(lo[q], zero);
      hi[q] = _mm512_sub_epi8(hi[q], zero);
      _mm_storeu_ps(reinterpret_cast<float *>(blk + kAmxScales) + kPackRows * q,
                    _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(rec))));
    }
    store_b_tile(lo, hi, blk);
  }
}

// acc[n] += float(C's row n) * (the rows' scales times column n's).
inline void scale_block(const int32_t *c, const float *rows_d, const float *cols_d, __m512 *acc) {
  const __m512 da = _mm512_loadu_ps(rows_d);
#pragma GCC unroll 16
  for (int n = 0; n < 16; ++n)
    acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c + 16 * n)),
                             _mm512_mul_ps(da, _mm512_set1_ps(cols_d[n])), acc[n]);
}

// The 16 columns' blocks at |cols| against the decoded rows, into acc, in
// batches of kSlots blocks.
inline void tile_columns(const char *cols, const uint8_t *rows, int64_t nb, __m512 *acc) {
  const auto count = [&](int64_t t) { return std::min<int64_t>(kSlots, nb - t * kSlots); };
  pipelined((nb + kSlots - 1) / kSlots,
            [&](int64_t t, c_tiles &c) {
              const size_t at = static_cast<size_t>(t * kSlots) * kAmxBlock;
              tile_dots(cols + at, rows + at, kAmxBlock, count(t), c);
            },
            [&](int64_t t, c_tiles &c) {
              for (int64_t i = 0; i < count(t); ++i) {
                const size_t at = static_cast<size_t>(t * kSlots + i) * kAmxBlock + kAmxScales;
                scale_block(c[i], reinterpret_cast<const float *>(rows + at),
                            reinterpret_cast<const float *>(cols + at), acc);
              }
            });
}

// Not inlined into its kAmxCallCols wrappers (amx_tile_for): one copy per format.
template <class F>
__attribute__((noinline)) void amx_tile(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo,
                                        int rn) {
  const int64_t nb = K / 32;
  uint8_t *rows = amx_rows(static_cast<size_t>(nb) * kAmxBlock);
  decode_rows<F>(g, nb, rows);
  for_column_tiles(rn, out, ldo,
                   [&](int n0, __m512 *acc) { tile_columns(b + static_cast<size_t>(n0) * ldb, rows, nb, acc); });
}

template <class F, int RN>
void amx_tile_for(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  amx_tile<F>(g, b, ldb, K, out, ldo, RN);
}

// The formats with AMX tiles; Q4_K and Q5_K's are repack_gemm_amx_k.cpp's.
bool amx(qtype q, int64_t N) {
  return (q == qtype::q4_0 || q == qtype::q8_0 || q == qtype::q5_0 || q == qtype::q4_k || q == qtype::q5_k) &&
         N >= kAmxFromN;
}
bool amx_k(qtype q) { return q == qtype::q4_k || q == qtype::q5_k; }

template <class F>
rtile_fn tiles_of(int rn) {
  return tile_of<kAmxCallCols>(rn, [](auto c) -> rtile_fn { return amx_tile_for<F, decltype(c)::value>; });
}

rtile_fn tile_amx(qtype q, int64_t N, int rn) {
  if (!amx(q, N)) return rkernels_avx512_vnni().tile(q, N, rn);
  if (amx_k(q)) return rkernels_amx_k().tile(q, N, rn);
  switch (q) {
    case qtype::q4_0:
      return tiles_of<q4_0_rows>(rn);
    case qtype::q8_0:
      return tiles_of<q8_0_rows>(rn);
    default:
      return tiles_of<q5_0_rows>(rn);
  }
}

int max_cols_amx(qtype q, int64_t N) { return amx(q, N) ? kAmxCallCols : rkernels_avx512_vnni().max_cols(q, N); }

int tile_groups_amx(qtype q, int64_t N) { return amx(q, N) ? kAmxGroups : 1; }

// A group of 16 columns takes kAmxBlock bytes per block, as the decoded rows
// do: the columns' 32 values each (A's 16 rows of 32 bytes), their scales.
size_t col_bytes_amx(qtype q, int64_t K, int64_t N) {
  if (!amx(q, N)) return rkernels_avx512_vnni().col_bytes(q, K, N);
  if (amx_k(q)) return rkernels_amx_k().col_bytes(q, K, N);
  return static_cast<size_t>(K / 32) * kAmxBlock / kAmxTileCols;
}

// Column n quantized as a ract column (in |scratch|), then its values and
// scales into its slot of its group's blocks.
void quantize_b_amx(qtype q, int64_t N, const float *x, int64_t K, char *scratch, char *cols, int64_t n) {
  if (!amx(q, N)) return rkernels_avx512_vnni().quantize_b(q, N, x, K, scratch, cols, n);
  if (amx_k(q)) return rkernels_amx_k().quantize_b(q, N, x, K, scratch, cols, n);
  quantize_ract_col(x, K, scratch);
  const ract_col_parts y = ract_col_at(scratch, K);
  const size_t slot = static_cast<size_t>(n % 16);
  char *group = cols + static_cast<size_t>(n / 16) * 16 * col_bytes_amx(q, K, N);
  for (int64_t j = 0; j < y.blocks; ++j) {
    char *blk = group + static_cast<size_t>(j) * kAmxBlock;
    std::memcpy(blk + 32 * slot, y.qs + 32 * j, 32);
    std::memcpy(blk + kAmxScales + sizeof(float) * slot, &y.d[j], sizeof(float));
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const rkernels &rkernels_amx() {
  static const rkernels k = {"amx", max_cols_amx, col_bytes_amx, quantize_b_amx, tile_amx, tile_groups_amx};
  return k;
}

}  // namespace bp::cpu

#else
namespace bp::cpu {
const rkernels &rkernels_amx() { return rkernels_avx2(); }
const rkernels &rkernels_amx_k() { return rkernels_avx2(); }
}  // namespace bp::cpu
#endif
