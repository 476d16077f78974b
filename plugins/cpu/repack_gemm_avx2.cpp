// repack_gemm_avx2.cpp: the AVX2 tiles of the repacked products: a group
// of 4 rows (repack.hpp) by up to 4 columns of b.
//
// Per block of the group: one 8-half load gives the 4 rows' scales, spread
// to [d0 x4, d1 x4] and [d2 x4, d3 x4]; per row pair one or two 256-bit
// loads give both rows' quants. Per column the pair's int32 dot has lanes
// 0-3 for the first row and 4-7 for the second; Q4_0's and Q5_0's zero
// points leave as 8 or 16 times the column's lane sums (exact, in
// integers). The lanes of
// each row are summed once at the end, in a fixed order, so the result
// does not depend on how rows are split between threads.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "repack.hpp"
#include "simd.hpp"

#if defined(BP_X86_SIMD)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace bp::cpu {
namespace {

#include "repack_simd.hpp"

inline __m256i bcast16(const int8_t *p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}
inline __m256i load32(const uint8_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

// The 32-value formats give, per row pair, quants for b's values 0-15 (lo)
// and 16-31 (hi), and the pair's int32 dot against them; kOffsetShift is
// log2 of the zero point taken out through b's lane sums (0: none).
struct q4_0_pairs {
  static constexpr size_t kRecord = 72;
  static constexpr size_t kPrefetch = 2048;
  static constexpr int kOffsetShift = 3;
  static void decode(const uint8_t *rec, __m256i lo[2], __m256i hi[2]) {
    const __m256i m = _mm256_set1_epi8(0x0F);
    for (int p = 0; p < 2; ++p) {
      const __m256i v = load32(rec + 8 + 32 * p);
      lo[p] = _mm256_and_si256(v, m);
      hi[p] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    }
  }
  // Unsigned nibbles (<= 15) by int8: a pair of products per int16 lane is
  // at most 2 * 15 * 127, so both halves add in int16 before widening.
  static __m256i dot(__m256i lo, __m256i hi, __m256i yl, __m256i yh) {
    const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, yl), _mm256_maddubs_epi16(hi, yh));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
  }
};

// Q5_0: Q4_0's nibbles with a fifth bit from the rows' qh words. One
// broadcast load gives all 4 words in both 128-bit lanes; per row pair a
// byte shuffle copies byte k / 8 of row 2p's word to byte k of the low lane
// and of row 2p + 1's to the high one (bytes 2 and 3 for values 16-31),
// and a compare against bit k % 8 of each byte makes 0x10 where it is set.
// The values are 0-31 unsigned: both halves still add in int16
// (2 * 2 * 31 * 127 < 32768).
struct q5_0_pairs {
  static constexpr size_t kRecord = 88;
  static constexpr size_t kPrefetch = 1024;
  static constexpr int kOffsetShift = 4;
  static void decode(const uint8_t *rec, __m256i lo[2], __m256i hi[2]) {
    const __m256i m = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    const __m256i words = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rec + 8)));
    const auto high = [&](int a, int b) {  // byte a of row 2p's word in the low lane, of row 2p + 1's (b) in the high
      const __m256i idx = _mm256_setr_epi64x(0x0101010101010101LL * a, 0x0101010101010101LL * (a + 1),
                                             0x0101010101010101LL * b, 0x0101010101010101LL * (b + 1));
      const __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(words, idx), bit);
      return _mm256_and_si256(_mm256_cmpeq_epi8(x, bit), m10);
    };
    for (int p = 0; p < 2; ++p) {
      const __m256i v = load32(rec + 24 + 32 * p);
      lo[p] = _mm256_or_si256(_mm256_and_si256(v, m), high(8 * p, 8 * p + 4));
      hi[p] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m), high(8 * p + 2, 8 * p + 6));
    }
  }
  static __m256i dot(__m256i lo, __m256i hi, __m256i yl, __m256i yh) { return q4_0_pairs::dot(lo, hi, yl, yh); }
};

struct q8_0_pairs {
  static constexpr size_t kRecord = 136;
  static constexpr size_t kPrefetch = 0;
  static constexpr int kOffsetShift = 0;
  static void decode(const uint8_t *rec, __m256i lo[2], __m256i hi[2]) {
    for (int p = 0; p < 2; ++p) {
      lo[p] = load32(rec + 8 + 64 * p);
      hi[p] = load32(rec + 8 + 64 * p + 32);
    }
  }
  // Signed by signed: |x| by y with x's sign, widened per half (two int16
  // pairs of 127 * 127 would not fit).
  static __m256i dot1(__m256i x, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(y, x)), _mm256_set1_epi16(1));
  }
  static __m256i dot(__m256i lo, __m256i hi, __m256i yl, __m256i yh) {
    return _mm256_add_epi32(dot1(lo, yl), dot1(hi, yh));
  }
};

// Rows 2p and 2p + 1 from lanes 0-3 and 4-7, in a fixed order.
inline void store_pair(__m256 v, float *out) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  out[0] = (f[0] + f[1]) + (f[2] + f[3]);
  out[1] = (f[4] + f[5]) + (f[6] + f[7]);
}

template <class F, int RN>
void rtile(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  const int64_t nb = K / 32;
  const int8_t *yq[RN];
  const float *yd[RN];
  const int8_t *ys[RN];
  for (int c = 0; c < RN; ++c) {
    yq[c] = reinterpret_cast<const int8_t *>(b + c * ldb);
    yd[c] = reinterpret_cast<const float *>(yq[c] + nb * 32);
    ys[c] = reinterpret_cast<const int8_t *>(yd[c] + nb);
  }
  __m256 acc[2][RN];
  for (int p = 0; p < 2; ++p)
    for (int c = 0; c < RN; ++c) acc[p][c] = _mm256_setzero_ps();
  const __m256i spread01 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i spread23 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t *rec = g + static_cast<size_t>(j) * F::kRecord;
    // A product of few columns is bound by the weights' stream from DRAM:
    // asking ahead keeps more lines in flight than the hardware prefetcher
    // does. How far pays depends on the format (F::kPrefetch, measured:
    // docs/plugins/cpu.md); Q8_0's stream, the densest, is read fastest by
    // the hardware prefetcher alone. With more columns the loads are far
    // enough apart without it.
    if constexpr (RN <= 2 && F::kPrefetch > 0)
      _mm_prefetch(reinterpret_cast<const char *>(rec + F::kPrefetch), _MM_HINT_T0);
    const __m256 d4 = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(rec))));
    const __m256 da[2] = {_mm256_permutevar8x32_ps(d4, spread01), _mm256_permutevar8x32_ps(d4, spread23)};
    __m256i lo[2], hi[2];
    F::decode(rec, lo, hi);
    for (int c = 0; c < RN; ++c) {
      const __m256i yl = bcast16(yq[c] + 32 * j), yh = bcast16(yq[c] + 32 * j + 16);
      const __m256 dy = _mm256_broadcast_ss(yd[c] + j);
      __m256i corr = _mm256_setzero_si256();
      if constexpr (F::kOffsetShift > 0) corr = _mm256_slli_epi32(bcast16(ys[c] + 16 * j), F::kOffsetShift);
      for (int p = 0; p < 2; ++p) {
        __m256i dot = F::dot(lo[p], hi[p], yl, yh);
        if constexpr (F::kOffsetShift > 0) dot = _mm256_sub_epi32(dot, corr);
        acc[p][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(da[p], dy), acc[p][c]);
      }
    }
  }
  for (int c = 0; c < RN; ++c)
    for (int p = 0; p < 2; ++p) store_pair(acc[p][c], out + c * ldo + 2 * p);
}

// The K-quant tiles read rkact columns (repack.hpp): one b scale per
// super-block, so each row pair's dots are summed in int32 lanes over the
// whole super-block, every sub-block's (or half's) scale applied by the
// vpmaddwd that widens its dot, and converted to float once per super-block.
// A pair's int16 scale vector holds row 2p's scale in the low 128 bits and
// row 2p + 1's in the high ones, like the pair's quants; one vpshufb per
// sub-block broadcasts a scale from a vector of 8 (in_lane_word).
struct kcols {
  const int8_t *q;
  const float *d;
  const int16_t *sum16;
};
inline kcols kcol_at(const char *b, int64_t K) {
  const auto *q = reinterpret_cast<const int8_t *>(b);
  const auto *d = reinterpret_cast<const float *>(q + K);
  return {q, d, reinterpret_cast<const int16_t *>(d + K / 256)};
}

// vpshufb control: int16 word |w| of each 128-bit lane, in all 8 words.
inline __m256i in_lane_word(int w) {
  const int lo = 2 * w, hi = 2 * w + 1;
  return _mm256_set1_epi16(static_cast<short>(lo | (hi << 8)));
}

// [row 2p's 8 int16 | row 2p + 1's 8 int16] from two rows' 8 bytes.
inline __m256i pair_i8_to_i16(const int8_t *a, const int8_t *b) {
  uint64_t x, y;
  std::memcpy(&x, a, 8);
  std::memcpy(&y, b, 8);
  return _mm256_cvtepi8_epi16(_mm_set_epi64x(static_cast<long long>(y), static_cast<long long>(x)));
}

// [d_2p x4, d_2p+1 x4] as floats, from two f16 values.
inline __m256 pair_f16(const uint8_t *a, const uint8_t *b) {
  uint16_t ha, hb;
  std::memcpy(&ha, a, 2);
  std::memcpy(&hb, b, 2);
  return _mm256_blend_ps(_mm256_set1_ps(_cvtsh_ss(ha)), _mm256_set1_ps(_cvtsh_ss(hb)), 0xF0);
}

// Q4_K's 6-bit scales and minimums of the group's 4 rows (quant_blocks.hpp's
// scale_min), as int16: scales[p] and mins[p] hold row 2p's 8 in the low
// 128 bits and row 2p + 1's in the high ones. The record keeps word w of
// the 4 rows' 12 scale bytes side by side (repack.hpp), so each step below
// works on the 4 rows at once.
inline void kscales(const uint8_t *rec, __m256i scales[2], __m256i mins[2]) {
  const kscale_bytes k = kscales_of(rec);
  const __m128i sc_lo = k.sc_lo, sc_hi = k.sc_hi, m_lo = k.m_lo, m_hi = k.m_hi;
  // [row 0's 8, row 1's 8] and [row 2's 8, row 3's 8].
  scales[0] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi32(sc_lo, sc_hi));
  scales[1] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi32(sc_lo, sc_hi));
  mins[0] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi32(m_lo, m_hi));
  mins[1] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi32(m_lo, m_hi));
}

// Rows 2p and 2p + 1 from lanes 0-3 and 4-7 of |acc| (float).
template <int RN>
inline void store_pairs(__m256 acc[2][RN], float *out, int64_t ldo) {
  for (int c = 0; c < RN; ++c)
    for (int p = 0; p < 2; ++p) store_pair(acc[p][c], out + c * ldo + 2 * p);
}

// Q4_K (Q5 false) and Q5_K. Per sub-block pair q and row pair p, two 256-bit
// loads hold both sub-blocks' nibbles of both rows (values 0-15, then
// 16-31); Q5_K's fifth bits come from the pair's two 256-bit loads of qh
// bytes laid out the same way. The minimums leave once per super-block:
// vpmaddwd of the pair's 8 minimums by b's 8 32-value sums gives each row's
// term spread over its four lanes.
template <bool Q5, int RN>
void rtile_k(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr size_t kRecord = (Q5 ? 176 : 144) * kPackRows;
  constexpr size_t kQs = Q5 ? 192 : 64;
  const int64_t nsuper = K / 256;
  kcols y[RN];
  for (int c = 0; c < RN; ++c) y[c] = kcol_at(b + c * ldb, K);
  __m256 acc[2][RN];
  for (int p = 0; p < 2; ++p)
    for (int c = 0; c < RN; ++c) acc[p][c] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
  for (int64_t s = 0; s < nsuper; ++s) {
    const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
    if constexpr (RN <= 2) prefetch_record(rec, kRecord);
    __m256i scales[2], mins[2];
    kscales(rec, scales, mins);
    // [d0 dmin0 d1 dmin1 ... d3 dmin3] spread to [d_2p x4, d_2p+1 x4] and the same for dmin.
    const __m256 dd = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rec)));
    const __m256 d[2] = {_mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2)),
                         _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6))};
    const __m256 dmin[2] = {_mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3)),
                            _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(5, 5, 5, 5, 7, 7, 7, 7))};
    // One row pair at a time over the whole super-block (its other bytes
    // stay in L1), so only RN int32 accumulators are live: with 4 columns,
    // both pairs' would leave too few registers.
    for (int p = 0; p < 2; ++p) {
      __m256i dots[RN];
      for (int c = 0; c < RN; ++c) dots[c] = _mm256_setzero_si256();
      for (int q = 0; q < 4; ++q) {
        const uint8_t *qs = rec + kQs + 128 * q + 64 * p;
        for (int h = 0; h < 2; ++h) {
          __m256i x0 = _mm256_and_si256(_mm256_srli_epi16(load32(qs), 4 * h), m4);
          __m256i x1 = _mm256_and_si256(_mm256_srli_epi16(load32(qs + 32), 4 * h), m4);
          if constexpr (Q5) {
            // Bit j of the pair's qh bytes (values 0-15, then 16-31) is
            // sub-block j's fifth bit: 0x10 where it is set.
            const __m128i shift = _mm_cvtsi32_si128(2 * q + h);
            const auto fifth = [&](const uint8_t *qh) {
              return _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(load32(qh), shift), 4), m10);
            };
            x0 = _mm256_or_si256(x0, fifth(rec + 64 + 64 * p));
            x1 = _mm256_or_si256(x1, fifth(rec + 96 + 64 * p));
          }
          const __m256i sc = _mm256_shuffle_epi8(scales[p], in_lane_word(2 * q + h));
          const int64_t at = 256 * s + 32 * (2 * q + h);
          for (int c = 0; c < RN; ++c) {
            // Values (<= 15, 31 for Q5_K) by int8: both halves add in int16
            // (<= 2 * 2 * 31 * 127 < 32768).
            const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(x0, bcast16(y[c].q + at)),
                                                 _mm256_maddubs_epi16(x1, bcast16(y[c].q + at + 16)));
            dots[c] = _mm256_add_epi32(dots[c], _mm256_madd_epi16(p16, sc));
          }
        }
      }
      for (int c = 0; c < RN; ++c) {
        // b's 32-value sums (16-value ones added pairwise), in both 128-bit lanes.
        const __m256i s16 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(y[c].sum16 + 16 * s));
        const __m256i s32 = _mm256_permute4x64_epi64(_mm256_hadd_epi16(s16, s16), 0x88);
        const __m256 dy = _mm256_set1_ps(y[c].d[s]);
        const __m256 mterm = _mm256_cvtepi32_ps(_mm256_madd_epi16(mins[p], s32));
        acc[p][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[c]), _mm256_mul_ps(d[p], dy), acc[p][c]);
        acc[p][c] = _mm256_fnmadd_ps(mterm, _mm256_mul_ps(dmin[p], dy), acc[p][c]);
      }
    }
  }
  store_pairs<RN>(acc, out, ldo);
}

// Q6_K. A row's 16 int8 scales, one per 16 values, are two vectors of 8
// per pair (halves 0-7 and 8-15). The values are 0-63 before their -32,
// which leaves once per super-block, in integers, as 32 times vpmaddwd of
// the scales by b's 16-value sums.
template <int RN>
void rtile_q6_k(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr size_t kRecord = 210 * kPackRows;
  const int64_t nsuper = K / 256;
  kcols y[RN];
  for (int c = 0; c < RN; ++c) y[c] = kcol_at(b + c * ldb, K);
  __m256 acc[2][RN];
  for (int p = 0; p < 2; ++p)
    for (int c = 0; c < RN; ++c) acc[p][c] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  for (int64_t s = 0; s < nsuper; ++s) {
    const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
    if constexpr (RN <= 2) prefetch_record(rec, kRecord);
    __m256i scales[2][2];  // [pair][halves 0-7, 8-15]
    __m256 d[2];
    for (int p = 0; p < 2; ++p) {
      const auto *sa = reinterpret_cast<const int8_t *>(rec + 8 + 16 * (2 * p));
      const auto *sb = reinterpret_cast<const int8_t *>(rec + 8 + 16 * (2 * p + 1));
      scales[p][0] = pair_i8_to_i16(sa, sb);
      scales[p][1] = pair_i8_to_i16(sa + 8, sb + 8);
      d[p] = pair_f16(rec + 4 * p, rec + 4 * p + 2);
    }
    __m256i dots[2][RN];
    for (int p = 0; p < 2; ++p)
      for (int c = 0; c < RN; ++c) dots[p][c] = _mm256_setzero_si256();
    // One 32-value step j (compile-time, so each step's shift is an
    // immediate): bits 2t and 2t + 1 of the qh bytes go to bits 4-5 with one
    // shift of the 16-bit lanes (what crosses a byte is masked away).
    const auto step = [&](auto jc) {
      constexpr int j = decltype(jc)::value;
      const __m256i pick_lo = in_lane_word((2 * j) % 8), pick_hi = in_lane_word((2 * j + 1) % 8);
      const int64_t at = 256 * s + 32 * j;
      for (int p = 0; p < 2; ++p) {
        const uint8_t *ql = rec + 72 + 128 * q6k_ql_chunk(j) + 64 * p, *qh = rec + 72 + 128 * q6k_qh_chunk(j) + 64 * p;
        __m256i x[2];
        for (int half = 0; half < 2; ++half) {
          const __m256i l = load32(ql + 32 * half), top = load32(qh + 32 * half);
          __m256i nib, moved = top;
          if constexpr (q6k_high_nibble(j)) {
            nib = _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
          } else {
            nib = _mm256_and_si256(l, m4);
          }
          if constexpr (q6k_top_shift(j) > 0) moved = _mm256_slli_epi16(top, q6k_top_shift(j));
          if constexpr (q6k_top_shift(j) < 0) moved = _mm256_srli_epi16(top, -q6k_top_shift(j));
          x[half] = _mm256_or_si256(nib, _mm256_and_si256(moved, m30));
        }
        const __m256i sc_lo = _mm256_shuffle_epi8(scales[p][j / 4], pick_lo);
        const __m256i sc_hi = _mm256_shuffle_epi8(scales[p][j / 4], pick_hi);
        for (int c = 0; c < RN; ++c) {
          // Values <= 63 by int8: a pair of products fits int16 (2 * 63 * 127).
          const __m256i lo = _mm256_madd_epi16(_mm256_maddubs_epi16(x[0], bcast16(y[c].q + at)), sc_lo);
          const __m256i hi = _mm256_madd_epi16(_mm256_maddubs_epi16(x[1], bcast16(y[c].q + at + 16)), sc_hi);
          dots[p][c] = _mm256_add_epi32(dots[p][c], _mm256_add_epi32(lo, hi));
        }
      }
    };
    [&]<int... J>(std::integer_sequence<int, J...>) { (step(std::integral_constant<int, J>{}), ...); }
    (std::make_integer_sequence<int, 8>{});
    for (int c = 0; c < RN; ++c) {
      const __m256i s16 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(y[c].sum16 + 16 * s));
      // b's sums of halves 0-7 in both 128-bit lanes, then of halves 8-15.
      const __m256i s_lo = _mm256_permute4x64_epi64(s16, 0x44), s_hi = _mm256_permute4x64_epi64(s16, 0xEE);
      const __m256 dy = _mm256_set1_ps(y[c].d[s]);
      for (int p = 0; p < 2; ++p) {
        const __m256i offset = _mm256_slli_epi32(
            _mm256_add_epi32(_mm256_madd_epi16(scales[p][0], s_lo), _mm256_madd_epi16(scales[p][1], s_hi)), 5);
        acc[p][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(dots[p][c], offset)), _mm256_mul_ps(d[p], dy),
                                    acc[p][c]);
      }
    }
  }
  store_pairs<RN>(acc, out, ldo);
}

template <class F>
rtile_fn tile_for(int rn) {
  static const rtile_fn tiles[] = {rtile<F, 1>, rtile<F, 2>, rtile<F, 3>, rtile<F, 4>};
  return tiles[rn - 1];
}

rtile_fn tile_avx2(qtype q, int rn) {
  switch (q) {
    case qtype::q4_0:
      return tile_for<q4_0_pairs>(rn);
    case qtype::q8_0:
      return tile_for<q8_0_pairs>(rn);
    case qtype::q5_0:
      return tile_for<q5_0_pairs>(rn);
    case qtype::q4_k: {
      static const rtile_fn tiles[] = {rtile_k<false, 1>, rtile_k<false, 2>, rtile_k<false, 3>, rtile_k<false, 4>};
      return tiles[rn - 1];
    }
    case qtype::q5_k: {
      static const rtile_fn tiles[] = {rtile_k<true, 1>, rtile_k<true, 2>, rtile_k<true, 3>, rtile_k<true, 4>};
      return tiles[rn - 1];
    }
    case qtype::q6_k: {
      static const rtile_fn tiles[] = {rtile_q6_k<1>, rtile_q6_k<2>, rtile_q6_k<3>, rtile_q6_k<4>};
      return tiles[rn - 1];
    }
    default:
      return nullptr;
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const rkernels &rkernels_avx2() {
  static const rkernels k = {"avx2", [](qtype, int64_t) { return 4; }, column_bytes, quantize_column,
                             [](qtype q, int64_t, int rn) { return tile_avx2(q, rn); }};
  return k;
}

}  // namespace bp::cpu

#else
namespace bp::cpu {
const rkernels &rkernels_avx2() { return rkernels_baseline(); }
}  // namespace bp::cpu
#endif
