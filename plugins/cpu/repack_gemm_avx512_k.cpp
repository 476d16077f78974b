// repack_gemm_avx512_k.cpp: the AVX-512 VNNI tiles of the repacked products
// for the K-quants (Q4_K, Q5_K, Q6_K): a group of 4 rows (repack.hpp) by 1-8
// columns of b, or by up to 32 (the wide tiles, with more than 8 columns).
// repack_gemm_avx512.cpp says how vpdpbusd takes the codes and why each
// output is one accumulation in a fixed order; its dispatch calls the tile
// set here for these formats.
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
#include "repack_kquant_avx512.hpp"
#include "repack_simd.hpp"

// The narrow tiles take up to kMaxColsK columns in one tile, which measured
// faster than 2 groups of wide ones.
constexpr int kMaxColsK = 8;
bool wide(int64_t N) { return N > kMaxColsK; }

// A Q6_K super-block record of the group: the 4 rows' d, their scales at
// kQ6kScales (16 per row), the ql and qh chunks from kQ6kBits.
constexpr size_t kQ6kRecord = 210 * kPackRows, kQ6kScales = 8, kQ6kBits = kQ6kScales + 64;

// Q6_K's 6-bit codes (0-63) of a super-block record's 32-value step J, the
// 4 rows' values 0-15 (part 0) or 16-31 (part 1), row r in 128-bit lane r.
template <int J>
inline __m512i q6k_codes(const uint8_t *rec, int part) {
  const uint8_t *ql = rec + kQ6kBits + 128 * q6k_ql_chunk(J), *qh = rec + kQ6kBits + 128 * q6k_qh_chunk(J);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i l = load32x2(ql + 32 * part, ql + 64 + 32 * part);
  const __m512i top = load32x2(qh + 32 * part, qh + 64 + 32 * part);
  __m512i nib, moved = top;
  if constexpr (q6k_high_nibble(J)) {
    nib = _mm512_and_si512(_mm512_srli_epi16(l, 4), m4);
  } else {
    nib = _mm512_and_si512(l, m4);
  }
  if constexpr (q6k_top_shift(J) > 0) moved = _mm512_slli_epi16(top, q6k_top_shift(J));
  if constexpr (q6k_top_shift(J) < 0) moved = _mm512_srli_epi16(top, -q6k_top_shift(J));
  return _mm512_ternarylogic_epi32(nib, moved, _mm512_set1_epi8(0x30), 0xF8);  // nib | (moved & 0x30)
}

// ---- the K-quants ------------------------------------------------------
// Q4_K (Q5 false) and Q5_K, against rkact columns (one b scale per
// super-block). Per sub-block pair q, two loads give the 4 rows' nibble
// bytes for values 0-15 and 16-31 (sub-block 2q in the low nibbles, 2q + 1
// in the high), plus for Q5_K their fifth bits from the qh bytes laid out
// the same way. The codes (0-15, 0-31) go into vpdpbusd unsigned, b
// signed. A sub-block's dot per lane (8 products, at most 8 * 31 * 127)
// fits int16, so vpackssdw puts both sub-blocks' dots in one register and
// one vpdpwssd by the pair's scales, [sc_2q x4, sc_2q+1 x4] per row,
// accumulates them in int32: 5 vpdpbusd-class instructions per 2
// sub-blocks of the 4 rows. The minimums leave once per super-block,
// vpdpwssd of each row's 8 minimums by b's 8 32-value sums.
template <bool Q5, int RN>
void rtile_k(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr size_t kRecord = kquant_codes<Q5>::kRecord;
  const int64_t nsuper = K / 256;
  // Column c's codes at b + c * ldb, its scales and 16-value sums after them.
  const auto scales = static_cast<size_t>(K), sums = scales + static_cast<size_t>(nsuper) * sizeof(float);
  __m512 acc[RN];
  for (int c = 0; c < RN; ++c) acc[c] = _mm512_setzero_ps();
  // vpermw indices: word 4r + k of the scales (k < 4) sits at 4r + k of a
  // vector of [sub-blocks 0-3 of rows 0-3 | sub-blocks 4-7 of rows 0-3],
  // k >= 4 at 16 + 4r + k - 4; pair q takes sub-blocks 2q and 2q + 1.
  const auto word_of = [](int r, int k) { return k < 4 ? 4 * r + k : 16 + 4 * r + k - 4; };
  alignas(64) int16_t pair_idx[4][32], min_idx[32];
  for (int r = 0; r < kPackRows; ++r)
    for (int k = 0; k < 8; ++k) {
      min_idx[8 * r + k] = static_cast<int16_t>(word_of(r, k));
      for (int q = 0; q < 4; ++q) pair_idx[q][8 * r + k] = static_cast<int16_t>(word_of(r, 2 * q + k / 4));
    }
  const __m512i d_idx = pick_2r_plus(0), dmin_idx = pick_2r_plus(1);
  for (int64_t s = 0; s < nsuper; ++s) {
    const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
    if constexpr (RN <= 2) prefetch_record(rec, kRecord);
    // The 4 rows' 6-bit scales and minimums (quant_blocks.hpp's scale_min)
    // from the three words of each row, side by side in the record.
    const kscale_bytes k = kscales_of(rec);
    const __m128i sc_lo = k.sc_lo, sc_hi = k.sc_hi, m_lo = k.m_lo, m_hi = k.m_hi;
    const __m512i sc16 = _mm512_cvtepu8_epi16(_mm256_set_m128i(sc_hi, sc_lo));
    const __m512i mins =
        _mm512_permutexvar_epi16(_mm512_load_si512(min_idx), _mm512_cvtepu8_epi16(_mm256_set_m128i(m_hi, m_lo)));
    const __m512 dd = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rec))));
    const __m512 d = _mm512_permutexvar_ps(d_idx, dd), dmin = _mm512_permutexvar_ps(dmin_idx, dd);
    const kquant_codes<Q5> codes(rec);
    __m512i dots[RN];
    for (int c = 0; c < RN; ++c) dots[c] = _mm512_setzero_si512();
    const char *y0 = b + 256 * s;
    for (int q = 0; q < 4; ++q) {
      __m512i a_lo, a_hi, b_lo, b_hi;
      codes.pair(q, a_lo, a_hi, b_lo, b_hi);
      const __m512i sc = _mm512_permutexvar_epi16(_mm512_load_si512(pair_idx[q]), sc16);
      const char *y = y0 + 64 * q;
      for (int c = 0; c < RN; ++c, y += ldb) {
        const __m512i da =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), a_lo, bcast16(y)), a_hi, bcast16(y + 16));
        const __m512i db = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), b_lo, bcast16(y + 32)), b_hi,
                                               bcast16(y + 48));
        dots[c] = _mm512_dpwssd_epi32(dots[c], _mm512_packs_epi32(da, db), sc);
      }
    }
    const char *col = b;
    for (int c = 0; c < RN; ++c, col += ldb) {
      const float dy = reinterpret_cast<const float *>(col + scales)[s];
      // b's 8 sums of 32 values from its 16 of 16, in every lane.
      const __m256i s16 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(col + sums) + s);
      const __m512i s32 = _mm512_broadcast_i32x4(_mm256_cvtepi32_epi16(_mm256_madd_epi16(s16, _mm256_set1_epi16(1))));
      const __m512 mterm = _mm512_cvtepi32_ps(_mm512_dpwssd_epi32(_mm512_setzero_si512(), mins, s32));
      const __m512 vdy = _mm512_set1_ps(dy);
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[c]), _mm512_mul_ps(d, vdy), acc[c]);
      acc[c] = _mm512_fnmadd_ps(mterm, _mm512_mul_ps(dmin, vdy), acc[c]);
    }
  }
  for (int c = 0; c < RN; ++c) store_rows(acc[c], out + c * ldo);
}

// Q6_K. Per 32-value step j, two loads of ql bytes and two of qh bytes
// give the 4 rows' 6-bit codes (0-63) for values 0-15 and 16-31, each half
// with its own int8 scale. A half's dot per lane (4 products, at most
// 4 * 63 * 127) fits int16, so as for Q4_K one vpackssdw and one vpdpwssd
// by [sc_2j x4, sc_2j+1 x4] per row scale and add both halves. The codes'
// -32 leaves once per super-block: each column's int32 dot starts from two
// vpdpwssd of -32 times the rows' 16 scales by b's 16 sums of 16 values.
template <int RN>
void rtile_q6_k(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr size_t kRecord = kQ6kRecord;
  const int64_t nsuper = K / 256;
  const auto scales = static_cast<size_t>(K), sums = scales + static_cast<size_t>(nsuper) * sizeof(float);
  __m512 acc[RN];
  for (int c = 0; c < RN; ++c) acc[c] = _mm512_setzero_ps();
  // vpermt2w indices into [rows 0, 1 | rows 2, 3] of the 16 scales as int16
  // (row r's scale k at word 32 (r / 2) + 16 (r % 2) + k): step j's pair
  // [sc_2j x4, sc_2j+1 x4] per row, and scales 0-7 / 8-15 of each row.
  alignas(64) int16_t step_idx[8][32], half_idx[2][32];
  for (int r = 0; r < kPackRows; ++r)
    for (int k = 0; k < 8; ++k) {
      const int row = 32 * (r / 2) + 16 * (r % 2);
      for (int j = 0; j < 8; ++j) step_idx[j][8 * r + k] = static_cast<int16_t>(row + 2 * j + k / 4);
      for (int h = 0; h < 2; ++h) half_idx[h][8 * r + k] = static_cast<int16_t>(row + 8 * h + k);
    }
  for (int64_t s = 0; s < nsuper; ++s) {
    const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
    if constexpr (RN <= 2) prefetch_record(rec, kRecord);
    const __m512i sc01 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(rec + kQ6kScales)));
    const __m512i sc23 =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(rec + kQ6kScales + 32)));
    const __m512i minus32 = _mm512_set1_epi16(-32);
    const __m512i off_lo =
        _mm512_mullo_epi16(_mm512_permutex2var_epi16(sc01, _mm512_load_si512(half_idx[0]), sc23), minus32);
    const __m512i off_hi =
        _mm512_mullo_epi16(_mm512_permutex2var_epi16(sc01, _mm512_load_si512(half_idx[1]), sc23), minus32);
    const __m512 d = row_scales(rec);
    __m512i dots[RN];
    const char *col = b;
    for (int c = 0; c < RN; ++c, col += ldb) {
      const auto *s16 = reinterpret_cast<const int16_t *>(col + sums) + 16 * s;
      dots[c] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), off_lo, bcast16(s16)), off_hi,
                                    bcast16(s16 + 8));
    }
    const char *y0 = b + 256 * s;
    const auto step = [&](auto jc) {
      constexpr int j = decltype(jc)::value;
      const __m512i x_lo = q6k_codes<j>(rec, 0), x_hi = q6k_codes<j>(rec, 1);
      const __m512i sc = _mm512_permutex2var_epi16(sc01, _mm512_load_si512(step_idx[j]), sc23);
      const char *y = y0 + 32 * j;
      for (int c = 0; c < RN; ++c, y += ldb) {
        const __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x_lo, bcast16(y));
        const __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x_hi, bcast16(y + 16));
        dots[c] = _mm512_dpwssd_epi32(dots[c], _mm512_packs_epi32(lo, hi), sc);
      }
    };
    [&]<int... J>(std::integer_sequence<int, J...>) { (step(std::integral_constant<int, J>{}), ...); }
    (std::make_integer_sequence<int, 8>{});
    col = b;
    for (int c = 0; c < RN; ++c, col += ldb) {
      const float dy = reinterpret_cast<const float *>(col + scales)[s];
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[c]), _mm512_mul_ps(d, _mm512_set1_ps(dy)), acc[c]);
    }
  }
  for (int c = 0; c < RN; ++c) store_rows(acc[c], out + c * ldo);
}

// ---- the K-quants, wide: one register, 16 outputs ----------------------
// With more than kMaxColsK columns the K-quants take the wide tiles' shape
// too: b in groups of 4 columns, lane 4r + c of a register row r's dot with
// column c. A sub-block's dot (32 values of Q4_K and Q5_K, 16 of Q6_K) is 8 or 4
// vpdpbusd by the rows' quads (vpshufd) and the columns' (a broadcast
// load); one conversion and one FMA by d times the rows' sub-block scales
// (shared by all columns) add it to the super-block's float sum, so 16
// outputs pay for the scales what the narrow tiles above pay for 4. The
// minimums (Q4_K, Q5_K) and Q6_K's -32 leave once per super-block through
// vpdpwssd of the rows' minimums or scales by b's sums, and b's scale
// multiplies the super-block's sum once. A group block of b per
// super-block:
//   int8  codes[64][4][4]  quad k of columns 0-3
//   int16 sums16[8][4][2]  each column's sums of 16 values 2i and 2i + 1
//   int16 sums32[4][4][2]  each column's sums of 32 values 2i and 2i + 1
//   float d[4]             each column's scale
// kWideKSub: the codes of one 32-value sub-block (half that for Q6_K's 16).
constexpr size_t kWideKSub = 8 * 16, kWideKSums16 = 8 * kWideKSub, kWideKSums32 = kWideKSums16 + 128;
constexpr size_t kWideKScales = kWideKSums32 + 64;
constexpr size_t kWideKBlock = kWideKScales + 16;
constexpr int kWideColsK = 32;

// Lane 4r + c of each gets lane 4r + k of the source, k = 0-3.
alignas(64) constexpr int32_t kPickQuarter[4][16] = {{0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12},
                                                     {1, 1, 1, 1, 5, 5, 5, 5, 9, 9, 9, 9, 13, 13, 13, 13},
                                                     {2, 2, 2, 2, 6, 6, 6, 6, 10, 10, 10, 10, 14, 14, 14, 14},
                                                     {3, 3, 3, 3, 7, 7, 7, 7, 11, 11, 11, 11, 15, 15, 15, 15}};
inline __m512 pick_quarter(__m512 v, int k) { return _mm512_permutexvar_ps(_mm512_load_si512(kPickQuarter[k]), v); }

// Q4_K (Q5 false) and Q5_K.
template <bool Q5, int RN>
void rtile_k_wide(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr int NG = (RN + 3) / 4;
  constexpr size_t kRecord = kquant_codes<Q5>::kRecord;
  const int64_t nsuper = K / 256;
  const size_t group = 4 * ldb;
  __m512 acc[NG];
  for (int q = 0; q < NG; ++q) acc[q] = _mm512_setzero_ps();
  const __m512i d_idx = pick_2r_plus(0), dmin_idx = pick_2r_plus(1);
  for (int64_t s = 0; s < nsuper; ++s) {
    const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
    const char *blk0 = b + static_cast<size_t>(s) * kWideKBlock;
    const kscale_bytes k = kscales_of(rec);
    const __m512 dd = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rec))));
    const __m512 d = _mm512_permutexvar_ps(d_idx, dd), dmin = _mm512_permutexvar_ps(dmin_idx, dd);
    // d times sub-block 4h + k's scale of row r at lane 4r + k.
    const __m512 dsc[2] = {_mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(k.sc_lo))),
                           _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(k.sc_hi)))};
    const __m512i m_lo = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(k.m_lo)),
                  m_hi = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(k.m_hi));
    // Dword 2r + i of the rows' minimums as words (4r + k) is row r's pair
    // (2i, 2i + 1); lane 4r + c of pair i gets it.
    const __m512i mins[4] = {_mm512_permutexvar_epi32(d_idx, m_lo), _mm512_permutexvar_epi32(dmin_idx, m_lo),
                             _mm512_permutexvar_epi32(d_idx, m_hi), _mm512_permutexvar_epi32(dmin_idx, m_hi)};
    const kquant_codes<Q5> codes(rec);
    __m512 sum[NG];
    for (int q = 0; q < NG; ++q) sum[q] = _mm512_setzero_ps();
    // Sub-block t: its values 0-15 and 16-31 of the 4 rows.
    const auto sub = [&](int t, __m512i x_lo, __m512i x_hi) {
      __m512i w[8];
      spread_quads(x_lo, w);
      spread_quads(x_hi, w + 4);
      const __m512 scale = pick_quarter(dsc[t / 4], t % 4);
      const char *blk = blk0 + kWideKSub * t;
      __m512i dot[NG];
      for (int q = 0; q < NG; ++q) dot[q] = _mm512_setzero_si512();
      wide_dots<NG>(dot, w, 8, blk, group);
      for (int q = 0; q < NG; ++q) sum[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[q]), scale, sum[q]);
    };
    for (int p = 0; p < 4; ++p) {
      __m512i a_lo, a_hi, b_lo, b_hi;
      codes.pair(p, a_lo, a_hi, b_lo, b_hi);
      sub(2 * p, a_lo, a_hi);
      sub(2 * p + 1, b_lo, b_hi);
    }
    const char *blk = blk0;
    for (int q = 0; q < NG; ++q, blk += group) {
      __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mins[0], bcast16(blk + kWideKSums32));
      for (int i = 1; i < 4; ++i) m = _mm512_dpwssd_epi32(m, mins[i], bcast16(blk + kWideKSums32 + 16 * i));
      const __m512 dy = _mm512_broadcast_f32x4(_mm_loadu_ps(reinterpret_cast<const float *>(blk + kWideKScales)));
      acc[q] = _mm512_fmadd_ps(_mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), dmin, sum[q]), dy, acc[q]);
    }
  }
  store_wide<NG>(acc, RN, out, ldo);
}

// Q6_K: 16 halves of 16 values, each with its own int8 scale; the codes'
// -32 leaves as d times -32 times vpdpwssd of the rows' scales by b's sums
// of 16 values.
template <int RN>
void rtile_q6_k_wide(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr int NG = (RN + 3) / 4;
  constexpr size_t kRecord = kQ6kRecord;
  const int64_t nsuper = K / 256;
  const size_t group = 4 * ldb;
  __m512 acc[NG];
  for (int q = 0; q < NG; ++q) acc[q] = _mm512_setzero_ps();
  // Dwords (q, 4 + q, 8 + q, 12 + q) of the 64 scale bytes: scales
  // 4q-4q+3 of rows 0-3.
  alignas(64) int32_t quarter_idx[4][16], pair_idx[8][16];
  for (int i = 0; i < 16; ++i) {
    for (int q = 0; q < 4; ++q) quarter_idx[q][i] = 4 * (i % 4) + q;
    // Row r's scale pair i among [rows 0, 1 | rows 2, 3] as words.
    for (int p = 0; p < 8; ++p) pair_idx[p][i] = 8 * (i / 4) + p;
  }
  for (int64_t s = 0; s < nsuper; ++s) {
    const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
    const char *blk0 = b + static_cast<size_t>(s) * kWideKBlock;
    const __m512i sc = _mm512_loadu_si512(rec + kQ6kScales);  // row r's 16 scales at 16r
    const __m512 d = row_scales(rec);
    __m512 dsc[4];
    for (int q = 0; q < 4; ++q) {
      const __m128i bytes = _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_load_si512(quarter_idx[q]), sc));
      dsc[q] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)));
    }
    const __m512i sc01 = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(sc)),
                  sc23 = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(sc, 1));
    __m512 sum[NG];
    for (int q = 0; q < NG; ++q) sum[q] = _mm512_setzero_ps();
    // Half h: 16 values of the 4 rows.
    const auto half = [&](int h, __m512i x) {
      __m512i w[4];
      spread_quads(x, w);
      const __m512 scale = pick_quarter(dsc[h / 4], h % 4);
      const char *blk = blk0 + kWideKSub / 2 * h;
      __m512i dot[NG];
      for (int q = 0; q < NG; ++q) dot[q] = _mm512_setzero_si512();
      wide_dots<NG>(dot, w, 4, blk, group);
      for (int q = 0; q < NG; ++q) sum[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[q]), scale, sum[q]);
    };
    const auto step = [&](auto jc) {
      constexpr int j = decltype(jc)::value;
      half(2 * j, q6k_codes<j>(rec, 0));
      half(2 * j + 1, q6k_codes<j>(rec, 1));
    };
    [&]<int... J>(std::integer_sequence<int, J...>) { (step(std::integral_constant<int, J>{}), ...); }
    (std::make_integer_sequence<int, 8>{});
    __m512i pairs[8];
    for (int p = 0; p < 8; ++p) pairs[p] = _mm512_permutex2var_epi32(sc01, _mm512_load_si512(pair_idx[p]), sc23);
    const __m512 dm32 = _mm512_mul_ps(d, _mm512_set1_ps(-32.0f));
    const char *blk = blk0;
    for (int q = 0; q < NG; ++q, blk += group) {
      __m512i off = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pairs[0], bcast16(blk + kWideKSums16));
      for (int p = 1; p < 8; ++p) off = _mm512_dpwssd_epi32(off, pairs[p], bcast16(blk + kWideKSums16 + 16 * p));
      const __m512 dy = _mm512_broadcast_f32x4(_mm_loadu_ps(reinterpret_cast<const float *>(blk + kWideKScales)));
      acc[q] = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(off), dm32, sum[q]), dy, acc[q]);
    }
  }
  store_wide<NG>(acc, RN, out, ldo);
}

rtile_fn tile_k(qtype q, int64_t N, int rn) {
  const bool w = wide(N);
  switch (q) {
    case qtype::q4_k:
      if (w) return tile_of<kWideColsK>(rn, [](auto c) -> rtile_fn { return rtile_k_wide<false, decltype(c)::value>; });
      return tile_of<kMaxColsK>(rn, [](auto c) -> rtile_fn { return rtile_k<false, decltype(c)::value>; });
    case qtype::q5_k:
      if (w) return tile_of<kWideColsK>(rn, [](auto c) -> rtile_fn { return rtile_k_wide<true, decltype(c)::value>; });
      return tile_of<kMaxColsK>(rn, [](auto c) -> rtile_fn { return rtile_k<true, decltype(c)::value>; });
    case qtype::q6_k:
      if (w) return tile_of<kWideColsK>(rn, [](auto c) -> rtile_fn { return rtile_q6_k_wide<decltype(c)::value>; });
      return tile_of<kMaxColsK>(rn, [](auto c) -> rtile_fn { return rtile_q6_k<decltype(c)::value>; });
    default:
      return nullptr;
  }
}

int max_cols_k(qtype, int64_t N) { return wide(N) ? kWideColsK : kMaxColsK; }

size_t col_bytes_k(qtype q, int64_t K, int64_t N) {
  return wide(N) ? static_cast<size_t>(K / 256) * kWideKBlock / 4 : column_bytes(q, K, N);
}

// Column n's rkact quantization (in |scratch|) into its slot of its group's
// wide K-quant blocks.
void quantize_b_wide_k(const float *x, int64_t K, char *scratch, char *group, size_t slot) {
  quantize_rkact_col(x, K, scratch);
  const rkact_col_parts y = rkact_col_at(scratch, K);
  for (int64_t s = 0; s < y.supers; ++s) {
    char *blk = group + static_cast<size_t>(s) * kWideKBlock;
    const int8_t *qs = y.qs + 256 * s;
    const int16_t *sums = y.sums + 16 * s;
    for (int k = 0; k < 64; ++k) std::memcpy(blk + 16 * k + slot, qs + 4 * k, 4);
    for (int i = 0; i < 8; ++i) std::memcpy(blk + kWideKSums16 + 16 * i + slot, sums + 2 * i, 4);
    for (int i = 0; i < 4; ++i) {
      const int16_t pair[2] = {static_cast<int16_t>(sums[4 * i] + sums[4 * i + 1]),
                               static_cast<int16_t>(sums[4 * i + 2] + sums[4 * i + 3])};
      std::memcpy(blk + kWideKSums32 + 16 * i + slot, pair, 4);
    }
    std::memcpy(blk + kWideKScales + slot, &y.d[s], 4);
  }
}

// The narrow tiles read rkact columns; the wide ones, group blocks (above).
void quantize_b_k(qtype q, int64_t N, const float *x, int64_t K, char *scratch, char *cols, int64_t n) {
  if (!wide(N)) return quantize_column(q, N, x, K, scratch, cols, n);
  char *group = cols + static_cast<size_t>(n / 4) * 4 * col_bytes_k(q, K, N);
  quantize_b_wide_k(x, K, scratch, group, 4 * static_cast<size_t>(n % 4));
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const rkernels &rkernels_avx512_vnni_k() {
  static const rkernels k = {"avx512-vnni", max_cols_k, col_bytes_k, quantize_b_k, tile_k};
  return k;
}

}  // namespace bp::cpu

#endif
