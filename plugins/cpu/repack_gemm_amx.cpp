// repack_gemm_amx.cpp: the AMX int8 tiles of the repacked products for the
// 32-value formats (Q4_0, Q8_0, Q5_0) with kAmxFromN or more columns of b:
// 16 rows (kAmxGroups groups of repack.hpp) by up to kAmxCols columns per
// call. Narrower products, and the other formats, run the AVX-512 VNNI tiles
// (rkernels_avx512_vnni), which the tile set here hands them to.
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
//   A: 16 columns of b, each block's 32 values where the ract layout
//      (repack.hpp) keeps them, one tile load with the columns' stride.
//   B: the 16 rows' block decoded to signed values (the codes less the zero
//      point) and arranged as TDPBSSD wants them, once per call for the
//      whole K into a scratch of the thread (amx_rows), then read by every
//      column tile of the call.
//   C: row n is column n's dots with the 16 rows, so a row of the f32
//      accumulators is 16 outputs side by side in dst.
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

#include "repack_avx512.hpp"
#include "repack_rows_avx512.hpp"

constexpr int kAmxGroups = 4;  // 16 rows: the tiles' M
constexpr int kAmxRows = kAmxGroups * kPackRows;
constexpr int kAmxCols = 64;  // columns per call: 4 tiles of 16 share one decode of the rows
// Below this many columns the VNNI tiles run: a tile of 16 columns would be
// mostly padding.
constexpr int64_t kAmxFromN = 16;

// One block of the 16 rows in the scratch: B's 8 rows of 64 bytes, then the
// rows' 16 scales.
constexpr size_t kAmxScales = 8 * 64, kAmxBlock = kAmxScales + kAmxRows * sizeof(float);

// The tiles' shapes (palette 1): tmm0-1 A (16 x 32 bytes), tmm2-3 B (8 x 64),
// tmm4-5 C (16 x 16 int32); blocks alternate between the two of each, so a
// block's TDPBSSD need not wait for the previous block's C to be read.
struct alignas(64) tile_config {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {32, 32, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 8, 8, 16, 16};
};

// 4x4 transpose of 128-bit lanes: lane k of out[i] is lane i of in[k].
inline void transpose_lanes(const __m512i *in, __m512i *out) {
  const __m512i t0 = _mm512_shuffle_i64x2(in[0], in[1], 0x44), t1 = _mm512_shuffle_i64x2(in[0], in[1], 0xEE);
  const __m512i t2 = _mm512_shuffle_i64x2(in[2], in[3], 0x44), t3 = _mm512_shuffle_i64x2(in[2], in[3], 0xEE);
  out[0] = _mm512_shuffle_i64x2(t0, t2, 0x88);
  out[1] = _mm512_shuffle_i64x2(t0, t2, 0xDD);
  out[2] = _mm512_shuffle_i64x2(t1, t3, 0x88);
  out[3] = _mm512_shuffle_i64x2(t1, t3, 0xDD);
}

// The 16 rows at |g| (kAmxGroups groups of F's records, nb blocks each) into
// |dst|, kAmxBlock bytes per block. A group's decoded 16 values of its 4 rows
// (row r in lane r, quad k in dword 4r + k) transposed within the register
// give lane k = quad k of rows 0-3; the 4 groups' lanes k side by side are
// B's row k.
template <class F>
void decode_rows(const uint8_t *g, int64_t nb, uint8_t *dst) {
  const __m512i quads = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i zero = _mm512_set1_epi8(static_cast<char>(1 << F::kZeroShift));
  const size_t group_bytes = static_cast<size_t>(nb) * F::kRecord;
  for (int64_t j = 0; j < nb; ++j) {
    uint8_t *blk = dst + static_cast<size_t>(j) * kAmxBlock;
    __m512i lo[kAmxGroups], hi[kAmxGroups];
    for (int q = 0; q < kAmxGroups; ++q) {
      const uint8_t *rec = g + q * group_bytes + static_cast<size_t>(j) * F::kRecord;
      F::decode(rec, lo[q], hi[q]);
      lo[q] = _mm512_permutexvar_epi32(quads, _mm512_sub_epi8(lo[q], zero));
      hi[q] = _mm512_permutexvar_epi32(quads, _mm512_sub_epi8(hi[q], zero));
      _mm_storeu_ps(reinterpret_cast<float *>(blk + kAmxScales) + kPackRows * q,
                    _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(rec))));
    }
    __m512i rows[8];
    transpose_lanes(lo, rows);
    transpose_lanes(hi, rows + 4);
    for (int k = 0; k < 8; ++k) _mm512_storeu_si512(blk + 64 * k, rows[k]);
  }
}

// A thread's decoded rows, kept between calls so the vector is allocated once.
uint8_t *amx_rows(int64_t nb) {
  thread_local std::vector<uint8_t> v;
  const size_t bytes = static_cast<size_t>(nb) * kAmxBlock + 64;
  if (v.size() < bytes) v.resize(bytes);
  return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
}

// acc[n] += float(C's row n) * (the rows' scales times column n's), for
// block j of the tile's columns (their scales at dcol[n][j]).
inline void scale_block(const int32_t *c, const float *rows_d, const float *const *dcol, int64_t j, __m512 *acc) {
  const __m512 da = _mm512_loadu_ps(rows_d);
#pragma GCC unroll 16
  for (int n = 0; n < 16; ++n)
    acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c + 16 * n)),
                             _mm512_mul_ps(da, _mm512_set1_ps(dcol[n][j])), acc[n]);
}

// C = the 16 columns' values at |cols| (tile A, rows ldb apart) times the
// rows' block at |blk| (B), stored to |c|. GCC's tile intrinsics paste the
// tile number into the instruction text, so each of the two sets of tiles
// (Odd: tmm1, tmm3, tmm5; else tmm0, tmm2, tmm4) is spelled out.
template <bool Odd>
inline void tile_dot(const char *cols, size_t ldb, const uint8_t *blk, int32_t *c) {
  const auto stride = static_cast<long>(ldb);
  if constexpr (Odd) {
    _tile_loadd(1, cols, stride);
    _tile_loadd(3, blk, 64);
    _tile_zero(5);
    _tile_dpbssd(5, 1, 3);
    _tile_stored(5, c, 64);
  } else {
    _tile_loadd(0, cols, stride);
    _tile_loadd(2, blk, 64);
    _tile_zero(4);
    _tile_dpbssd(4, 0, 2);
    _tile_stored(4, c, 64);
  }
}

// Block j of the 16 columns at |cols| into acc.
template <bool Odd>
inline void tile_block(const char *cols, size_t ldb, const uint8_t *rows, const float *const *dcol, int64_t j,
                       int32_t *c, __m512 *acc) {
  const uint8_t *blk = rows + static_cast<size_t>(j) * kAmxBlock;
  tile_dot<Odd>(cols + 32 * j, ldb, blk, c);
  scale_block(c, reinterpret_cast<const float *>(blk + kAmxScales), dcol, j, acc);
}

// Not inlined into its kAmxCols wrappers (amx_tile_for): one copy per format.
template <class F>
__attribute__((noinline)) void amx_tile(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo,
                                        int rn) {
  const int64_t nb = K / 32;
  uint8_t *rows = amx_rows(nb);
  decode_rows<F>(g, nb, rows);
  // GCC's tile loads are asm statements that do not say they read memory:
  // the decoded rows must be in memory before them.
  __asm__ volatile("" ::: "memory");
  static const tile_config cfg;
  _tile_loadconfig(&cfg);
  alignas(64) int32_t c[2][16 * 16];
  for (int n0 = 0; n0 < rn; n0 += 16) {
    const char *cols = b + static_cast<size_t>(n0) * ldb;
    const float *dcol[16];  // column n's block scales, after its nb * 32 values
    for (int n = 0; n < 16; ++n)
      dcol[n] = reinterpret_cast<const float *>(cols + static_cast<size_t>(n) * ldb + static_cast<size_t>(nb) * 32);
    __m512 acc[16];
    for (int n = 0; n < 16; ++n) acc[n] = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 1 < nb; j += 2) {
      tile_block<false>(cols, ldb, rows, dcol, j, c[0], acc);
      tile_block<true>(cols, ldb, rows, dcol, j + 1, c[1], acc);
    }
    if (j < nb) tile_block<false>(cols, ldb, rows, dcol, j, c[0], acc);
    for (int n = 0; n < 16 && n0 + n < rn; ++n) _mm512_storeu_ps(out + (n0 + n) * ldo, acc[n]);
  }
  // Hands the tile state back, so the thread's context switches do not
  // carry 8 KiB of tiles between products.
  _tile_release();
}

template <class F, int RN>
void amx_tile_for(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  amx_tile<F>(g, b, ldb, K, out, ldo, RN);
}

bool amx(qtype q, int64_t N) { return (q == qtype::q4_0 || q == qtype::q8_0 || q == qtype::q5_0) && N >= kAmxFromN; }

template <class F>
rtile_fn tiles_of(int rn) {
  return tile_of<kAmxCols>(rn, [](auto c) -> rtile_fn { return amx_tile_for<F, decltype(c)::value>; });
}

rtile_fn tile_amx(qtype q, int64_t N, int rn) {
  if (!amx(q, N)) return rkernels_avx512_vnni().tile(q, N, rn);
  switch (q) {
    case qtype::q4_0:
      return tiles_of<q4_0_rows>(rn);
    case qtype::q8_0:
      return tiles_of<q8_0_rows>(rn);
    default:
      return tiles_of<q5_0_rows>(rn);
  }
}

int max_cols_amx(qtype q, int64_t N) { return amx(q, N) ? kAmxCols : rkernels_avx512_vnni().max_cols(q, N); }

int tile_groups_amx(qtype q, int64_t N) { return amx(q, N) ? kAmxGroups : 1; }

// b in the plain ract layout: the A tiles read it where it is.
size_t col_bytes_amx(qtype q, int64_t K, int64_t N) {
  return amx(q, N) ? column_bytes(q, K, N) : rkernels_avx512_vnni().col_bytes(q, K, N);
}

void quantize_b_amx(qtype q, int64_t N, const float *x, int64_t K, char *scratch, char *cols, int64_t n) {
  if (!amx(q, N)) return rkernels_avx512_vnni().quantize_b(q, N, x, K, scratch, cols, n);
  quantize_column(q, N, x, K, scratch, cols, n);
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
}  // namespace bp::cpu
#endif
