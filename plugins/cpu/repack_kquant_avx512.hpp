// repack_kquant_avx512.hpp: Q4_K's and Q5_K's records (repack.hpp) decoded
// to the 4 rows' codes with AVX-512, for the VNNI tiles
// (repack_gemm_avx512_k.cpp) and the AMX ones (repack_gemm_amx_k.cpp).
// Include it inside the file's target region, within an anonymous
// namespace in bp::cpu, after repack_avx512.hpp.
#ifndef BP_PLUGIN_CPU_REPACK_KQUANT_AVX512_HPP_
#define BP_PLUGIN_CPU_REPACK_KQUANT_AVX512_HPP_

// Q4_K's (Q5 false) and Q5_K's codes (0-15, 0-31) of a super-block record
// (repack.hpp), sub-block pair by pair: for pair p, the 4 rows' values
// 0-15 and 16-31 of sub-block 2p (lo0, hi0; row r in 128-bit lane r) and
// of sub-block 2p + 1 (lo1, hi1).
template <bool Q5>
struct kquant_codes {
  static constexpr size_t kQh = 64;  // Q5_K's qh bytes, after d, dmin and the scales
  static constexpr size_t kQs = Q5 ? kQh + 128 : kQh;
  static constexpr size_t kRecord = (Q5 ? 176 : 144) * kPackRows;  // a super-block record of the group
  const uint8_t *rec;
  __m512i qh_lo, qh_hi;  // Q5_K's qh bytes, laid out as the nibbles
  explicit kquant_codes(const uint8_t *record) : rec(record) {
    if constexpr (Q5) {
      qh_lo = load32x2(rec + kQh, rec + kQh + 64);
      qh_hi = load32x2(rec + kQh + 32, rec + kQh + 96);
    }
  }
  void pair(int p, __m512i &lo0, __m512i &hi0, __m512i &lo1, __m512i &hi1) const {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const uint8_t *qs = rec + kQs + 128 * p;
    const __m512i lo = load32x2(qs, qs + 64), hi = load32x2(qs + 32, qs + 96);
    lo0 = _mm512_and_si512(lo, m4);
    hi0 = _mm512_and_si512(hi, m4);
    lo1 = _mm512_and_si512(_mm512_srli_epi16(lo, 4), m4);
    hi1 = _mm512_and_si512(_mm512_srli_epi16(hi, 4), m4);
    if constexpr (Q5) {
      lo0 = fifth(lo0, qh_lo, 2 * p);
      hi0 = fifth(hi0, qh_hi, 2 * p);
      lo1 = fifth(lo1, qh_lo, 2 * p + 1);
      hi1 = fifth(hi1, qh_hi, 2 * p + 1);
    }
  }
  // Bit j of each qh byte (sub-block j's fifth bit) moved to bit 4 of the
  // same byte of x; 0xF8: a | (b & c).
  static __m512i fifth(__m512i x, __m512i qh, int j) {
    const __m512i moved =
        j <= 4 ? _mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - j)) : _mm512_srl_epi16(qh, _mm_cvtsi32_si128(j - 4));
    return _mm512_ternarylogic_epi32(x, moved, _mm512_set1_epi8(0x10), 0xF8);
  }
};

#endif  // BP_PLUGIN_CPU_REPACK_KQUANT_AVX512_HPP_
