// repack_gemm_avx2.cpp: the AVX2 tiles of the repacked products: a group
// of 4 rows (repack.hpp) by up to 4 columns of b.
//
// Per block of the group: one 8-half load gives the 4 rows' scales, spread
// to [d0 x4, d1 x4] and [d2 x4, d3 x4]; per row pair one or two 256-bit
// loads give both rows' quants. Per column the pair's int32 dot has lanes
// 0-3 for the first row and 4-7 for the second; Q4_0's zero point leaves
// as 8 times the column's lane sums (exact, in integers). The lanes of
// each row are summed once at the end, in a fixed order, so the result
// does not depend on how rows are split between threads.
#include <cstdint>
#include <cstring>

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

inline __m256i bcast16(const int8_t *p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}
inline __m256i load32(const uint8_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

// Both formats give, per row pair, quants for b's values 0-15 (lo) and
// 16-31 (hi), and the pair's int32 dot against them.
struct q4_0_pairs {
  static constexpr size_t kRecord = 72;
  static constexpr bool kOffset = true;
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

struct q8_0_pairs {
  static constexpr size_t kRecord = 136;
  static constexpr bool kOffset = false;
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

constexpr size_t kPrefetchBytes = 1024;

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
    // does (one thread's read rate goes up by a third). With more columns
    // the loads are far enough apart without it.
    if constexpr (RN <= 2) _mm_prefetch(reinterpret_cast<const char *>(rec + kPrefetchBytes), _MM_HINT_T0);
    const __m256 d4 = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(rec))));
    const __m256 da[2] = {_mm256_permutevar8x32_ps(d4, spread01), _mm256_permutevar8x32_ps(d4, spread23)};
    __m256i lo[2], hi[2];
    F::decode(rec, lo, hi);
    for (int c = 0; c < RN; ++c) {
      const __m256i yl = bcast16(yq[c] + 32 * j), yh = bcast16(yq[c] + 32 * j + 16);
      const __m256 dy = _mm256_broadcast_ss(yd[c] + j);
      __m256i corr = _mm256_setzero_si256();
      if constexpr (F::kOffset) corr = _mm256_slli_epi32(bcast16(ys[c] + 16 * j), 3);
      for (int p = 0; p < 2; ++p) {
        __m256i dot = F::dot(lo[p], hi[p], yl, yh);
        if constexpr (F::kOffset) dot = _mm256_sub_epi32(dot, corr);
        acc[p][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(da[p], dy), acc[p][c]);
      }
    }
  }
  for (int c = 0; c < RN; ++c)
    for (int p = 0; p < 2; ++p) store_pair(acc[p][c], out + c * ldo + 2 * p);
}

// Q4_K, one super-block of the group at a time. Per row, the 8 sub-blocks'
// 6-bit scales and minimums are unpacked four at a time from 32-bit words
// (the layout of quant_blocks.hpp's scale_min) and multiplied by d and dmin.
// The minimums leave once per super-block: a row's 8 minimums times b's 8
// scaled block sums, folded onto the pair's lanes (any lane of a row counts,
// the lanes are summed at the end). Per sub-block pair, each row pair's two
// 256-bit loads give both sub-blocks' values 0-15 and 16-31 of both rows.
inline void kmin_row(const uint8_t *rec, int r, float *scale, float *min) {
  uint32_t w[3];
  std::memcpy(w, rec + 16 + 12 * r, 12);
  const uint32_t sc_lo = w[0] & 0x3F3F3F3Fu, m_lo = w[1] & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u);
  const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u);
  const __m256 sc =
      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), 0, 0)));
  const __m256 m =
      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(static_cast<int>(m_lo), static_cast<int>(m_hi), 0, 0)));
  uint16_t h[2];
  std::memcpy(h, rec + 4 * r, 4);
  _mm256_store_ps(scale, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(h[0])), sc));
  _mm256_store_ps(min, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(h[1])), m));
}

// [a x4, b x4]
inline __m256 spread(const float *a, const float *b) {
  return _mm256_blend_ps(_mm256_broadcast_ss(a), _mm256_broadcast_ss(b), 0xF0);
}

template <int RN>
void rtile_q4_k(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr size_t kRecord = 144 * kPackRows;
  const int64_t nb = K / 32, nsuper = K / 256;
  const int8_t *yq[RN];
  const float *yd[RN], *ys[RN];
  for (int c = 0; c < RN; ++c) {
    yq[c] = reinterpret_cast<const int8_t *>(b + c * ldb);
    yd[c] = reinterpret_cast<const float *>(yq[c] + nb * 32);
    ys[c] = reinterpret_cast<const float *>(reinterpret_cast<const int32_t *>(yd[c] + nb) + 4 * nb);
  }
  __m256 acc[2][RN];
  for (int p = 0; p < 2; ++p)
    for (int c = 0; c < RN; ++c) acc[p][c] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  alignas(32) float scale[kPackRows][8], min[kPackRows][8];
  for (int64_t s = 0; s < nsuper; ++s) {
    const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
    if constexpr (RN <= 2)
      for (size_t o = 0; o < kRecord; o += 64)
        _mm_prefetch(reinterpret_cast<const char *>(rec + kPrefetchBytes + o), _MM_HINT_T0);
    for (int r = 0; r < kPackRows; ++r) kmin_row(rec, r, scale[r], min[r]);
    for (int c = 0; c < RN; ++c) {
      const __m256 bs = _mm256_loadu_ps(ys[c] + 8 * s);
      for (int p = 0; p < 2; ++p) {
        const __m256 m0 = _mm256_mul_ps(_mm256_load_ps(min[2 * p]), bs);
        const __m256 m1 = _mm256_mul_ps(_mm256_load_ps(min[2 * p + 1]), bs);
        const __m256 fold = _mm256_add_ps(_mm256_permute2f128_ps(m0, m1, 0x20), _mm256_permute2f128_ps(m0, m1, 0x31));
        acc[p][c] = _mm256_sub_ps(acc[p][c], fold);
      }
    }
    for (int q = 0; q < 4; ++q)
      for (int p = 0; p < 2; ++p) {
        const uint8_t *qs = rec + 64 + 128 * q + 64 * p;
        const __m256i vlo = load32(qs), vhi = load32(qs + 32);
        const __m256i x[2][2] = {
            {_mm256_and_si256(vlo, m4), _mm256_and_si256(vhi, m4)},
            {_mm256_and_si256(_mm256_srli_epi16(vlo, 4), m4), _mm256_and_si256(_mm256_srli_epi16(vhi, 4), m4)}};
        for (int h = 0; h < 2; ++h) {
          const int j = 2 * q + h;
          const __m256 sp = spread(&scale[2 * p][j], &scale[2 * p + 1][j]);
          const int64_t blk = 8 * s + j;
          for (int c = 0; c < RN; ++c) {
            const __m256i yl = bcast16(yq[c] + 32 * blk), yh = bcast16(yq[c] + 32 * blk + 16);
            const __m256i dot = _mm256_madd_epi16(
                _mm256_add_epi16(_mm256_maddubs_epi16(x[h][0], yl), _mm256_maddubs_epi16(x[h][1], yh)), ones);
            acc[p][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(sp, _mm256_broadcast_ss(yd[c] + blk)),
                                        acc[p][c]);
          }
        }
      }
  }
  for (int c = 0; c < RN; ++c)
    for (int p = 0; p < 2; ++p) store_pair(acc[p][c], out + c * ldo + 2 * p);
}

// Q6_K, one super-block of the group at a time. A row's 16 int8 scales
// times d become floats once per super-block; each 16-value half of a
// sub-block has its own, so a pair's dot is widened per half. The values
// are 0-63 before their -32, which leaves exactly, in integers, as 32 times
// b's sums per lane (one vpmaddubsw of 32s, shared by both row pairs).
template <int RN>
void rtile_q6_k(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  constexpr size_t kRecord = 210 * kPackRows;
  const int64_t nb = K / 32, nsuper = K / 256;
  const int8_t *yq[RN];
  const float *yd[RN];
  for (int c = 0; c < RN; ++c) {
    yq[c] = reinterpret_cast<const int8_t *>(b + c * ldb);
    yd[c] = reinterpret_cast<const float *>(yq[c] + nb * 32);
  }
  __m256 acc[2][RN];
  for (int p = 0; p < 2; ++p)
    for (int c = 0; c < RN; ++c) acc[p][c] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), ones = _mm256_set1_epi16(1);
  const __m256i c32 = _mm256_set1_epi8(32);
  alignas(32) float scale[kPackRows][16];
  for (int64_t s = 0; s < nsuper; ++s) {
    const uint8_t *rec = g + static_cast<size_t>(s) * kRecord;
    if constexpr (RN <= 2)
      for (size_t o = 0; o < kRecord; o += 64)
        _mm_prefetch(reinterpret_cast<const char *>(rec + kPrefetchBytes + o), _MM_HINT_T0);
    for (int r = 0; r < kPackRows; ++r) {
      uint16_t h;
      std::memcpy(&h, rec + 2 * r, 2);
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i *>(rec + 8 + 16 * r));
      _mm256_store_ps(scale[r], _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
      _mm256_store_ps(scale[r] + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)))));
    }
    for (int j = 0; j < 8; ++j) {
      const int hh = j / 4, t = j % 4;
      const int64_t blk = 8 * s + j;
      __m256i corr_lo[RN], corr_hi[RN];
      for (int c = 0; c < RN; ++c) {
        corr_lo[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(c32, bcast16(yq[c] + 32 * blk)), ones);
        corr_hi[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(c32, bcast16(yq[c] + 32 * blk + 16)), ones);
      }
      const __m128i shift = _mm_cvtsi32_si128(2 * t);
      for (int p = 0; p < 2; ++p) {
        const uint8_t *ql = rec + 72 + 128 * (2 * hh + (t & 1)) + 64 * p, *qh = rec + 72 + 128 * (4 + hh) + 64 * p;
        __m256i x[2];
        for (int half = 0; half < 2; ++half) {
          const __m256i l = load32(ql + 32 * half), top = load32(qh + 32 * half);
          const __m256i nib = t < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
          x[half] = _mm256_or_si256(nib, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(top, shift), m2), 4));
        }
        const __m256 s_lo = spread(&scale[2 * p][2 * j], &scale[2 * p + 1][2 * j]);
        const __m256 s_hi = spread(&scale[2 * p][2 * j + 1], &scale[2 * p + 1][2 * j + 1]);
        for (int c = 0; c < RN; ++c) {
          const __m256 dy = _mm256_broadcast_ss(yd[c] + blk);
          const __m256i dlo = _mm256_sub_epi32(
              _mm256_madd_epi16(_mm256_maddubs_epi16(x[0], bcast16(yq[c] + 32 * blk)), ones), corr_lo[c]);
          const __m256i dhi = _mm256_sub_epi32(
              _mm256_madd_epi16(_mm256_maddubs_epi16(x[1], bcast16(yq[c] + 32 * blk + 16)), ones), corr_hi[c]);
          acc[p][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dlo), _mm256_mul_ps(s_lo, dy), acc[p][c]);
          acc[p][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dhi), _mm256_mul_ps(s_hi, dy), acc[p][c]);
        }
      }
    }
  }
  for (int c = 0; c < RN; ++c)
    for (int p = 0; p < 2; ++p) store_pair(acc[p][c], out + c * ldo + 2 * p);
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
    case qtype::q4_k: {
      static const rtile_fn tiles[] = {rtile_q4_k<1>, rtile_q4_k<2>, rtile_q4_k<3>, rtile_q4_k<4>};
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
  static const rkernels k = {"avx2", 4, tile_avx2};
  return k;
}

}  // namespace bp::cpu

#else
namespace bp::cpu {
const rkernels &rkernels_avx2() { return rkernels_baseline(); }
}  // namespace bp::cpu
#endif
