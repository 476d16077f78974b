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

#include "repack_avx512.hpp"
#include "repack_rows_avx512.hpp"

constexpr int kAmxGroups = 4;  // 16 rows: the tiles' M
constexpr int kAmxRows = kAmxGroups * kPackRows;
constexpr int kAmxCols = 64;  // columns per call: 4 tiles of 16 share one decode of the rows
// Below this many columns the VNNI tiles run: a tile of 16 columns would be
// mostly padding.
constexpr int64_t kAmxFromN = 16;

// One block of the 16 rows in the scratch: B's 8 rows of 64 bytes, then the
// rows' 16 scales (and of a group of 16 columns of b: A's 16 rows of 32
// bytes, then the columns' scales).
constexpr size_t kAmxScales = 8 * 64, kAmxBlock = kAmxScales + kAmxRows * sizeof(float);

// The tiles' shapes (palette 1): tmm0-1 A (16 x 32 bytes), tmm2-3 B (8 x 64),
// tmm4-7 C (16 x 16 int32): 4 blocks' products in flight (tile_blocks).
struct alignas(64) tile_config {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {32, 32, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 8, 8, 16, 16, 16, 16};
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

// acc[n] += float(C's row n) * (the rows' scales times column n's).
inline void scale_block(const int32_t *c, const float *rows_d, const float *cols_d, __m512 *acc) {
  const __m512 da = _mm512_loadu_ps(rows_d);
#pragma GCC unroll 16
  for (int n = 0; n < 16; ++n)
    acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c + 16 * n)),
                             _mm512_mul_ps(da, _mm512_set1_ps(cols_d[n])), acc[n]);
}

// C = the 16 columns' block at |cols| (tile A) times the rows' block at
// |blk| (B). GCC's tile intrinsics paste the tile number into
// the instruction text, so each slot's tiles are spelled out: slot s loads A
// into tmm(s % 2), B into tmm(2 + s % 2), and sums into tmm(4 + s).
template <int Slot>
inline void tile_mul(const char *cols, const uint8_t *blk) {
  constexpr long stride = 32;
  if constexpr (Slot == 0) {
    _tile_loadd(0, cols, stride);
    _tile_loadd(2, blk, 64);
    _tile_zero(4);
    _tile_dpbssd(4, 0, 2);
  } else if constexpr (Slot == 1) {
    _tile_loadd(1, cols, stride);
    _tile_loadd(3, blk, 64);
    _tile_zero(5);
    _tile_dpbssd(5, 1, 3);
  } else if constexpr (Slot == 2) {
    _tile_loadd(0, cols, stride);
    _tile_loadd(2, blk, 64);
    _tile_zero(6);
    _tile_dpbssd(6, 0, 2);
  } else {
    _tile_loadd(1, cols, stride);
    _tile_loadd(3, blk, 64);
    _tile_zero(7);
    _tile_dpbssd(7, 1, 3);
  }
}

// kSlots blocks from j (fewer at the end of K) of the 16 columns at |cols|:
// their tile products, each into its own C, then stored to c[i]. The
// stores come after all the products: a store waits for its product, and
// the later products run meanwhile.
constexpr int kSlots = 4;
using c_tiles = int32_t[kSlots][16 * 16];
inline void tile_dots(const char *cols, const uint8_t *rows, int64_t j, int64_t count, c_tiles &c) {
  const auto at = [&](int64_t i) { return static_cast<size_t>(j + i) * kAmxBlock; };
  tile_mul<0>(cols + at(0), rows + at(0));
  if (count > 1) tile_mul<1>(cols + at(1), rows + at(1));
  if (count > 2) tile_mul<2>(cols + at(2), rows + at(2));
  if (count > 3) tile_mul<3>(cols + at(3), rows + at(3));
  _tile_stored(4, c[0], 64);
  if (count > 1) _tile_stored(5, c[1], 64);
  if (count > 2) _tile_stored(6, c[2], 64);
  if (count > 3) _tile_stored(7, c[3], 64);
}

// The 16 columns' blocks at |cols| against the decoded rows, into acc. The blocks go
// in batches of kSlots, the tile products of batch t + 1 issued before
// batch t is scaled: a vector load of a tile store's bytes waits for the
// store to finish, which a batch's scaling then need not do.
inline void tile_columns(const char *cols, const uint8_t *rows, int64_t nb, __m512 *acc) {
  alignas(64) c_tiles c[2];
  const auto count = [&](int64_t t) { return std::min<int64_t>(kSlots, nb - t * kSlots); };
  const int64_t batches = (nb + kSlots - 1) / kSlots;
  tile_dots(cols, rows, 0, count(0), c[0]);
  for (int64_t t = 0; t < batches; ++t) {
    if (t + 1 < batches) tile_dots(cols, rows, (t + 1) * kSlots, count(t + 1), c[(t + 1) % 2]);
    for (int64_t i = 0; i < count(t); ++i) {
      const size_t at = static_cast<size_t>(t * kSlots + i) * kAmxBlock + kAmxScales;
      scale_block(c[t % 2][i], reinterpret_cast<const float *>(rows + at), reinterpret_cast<const float *>(cols + at),
                  acc);
    }
  }
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
  for (int n0 = 0; n0 < rn; n0 += 16) {
    __m512 acc[16];
    for (int n = 0; n < 16; ++n) acc[n] = _mm512_setzero_ps();
    tile_columns(b + static_cast<size_t>(n0) * ldb, rows, nb, acc);
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

// A group of 16 columns takes kAmxBlock bytes per block, as the decoded rows
// do: the columns' 32 values each (A's 16 rows of 32 bytes), their scales.
size_t col_bytes_amx(qtype q, int64_t K, int64_t N) {
  return amx(q, N) ? static_cast<size_t>(K / 32) * kAmxBlock / 16 : rkernels_avx512_vnni().col_bytes(q, K, N);
}

// Column n quantized as a ract column (in |scratch|), then its values and
// scales into its slot of its group's blocks.
void quantize_b_amx(qtype q, int64_t N, const float *x, int64_t K, char *scratch, char *cols, int64_t n) {
  if (!amx(q, N)) return rkernels_avx512_vnni().quantize_b(q, N, x, K, scratch, cols, n);
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
}  // namespace bp::cpu
#endif
