// repack_rows_avx512.hpp: the 32-value formats' records (Q4_0, Q5_0, Q8_0;
// repack.hpp) decoded to the 4 rows' codes with AVX-512, for the VNNI tiles
// (repack_gemm_avx512.cpp) and the AMX ones (repack_gemm_amx.cpp). Include it
// inside the file's target region, within an anonymous namespace in bp::cpu,
// after repack_avx512.hpp.
#ifndef BP_PLUGIN_CPU_REPACK_ROWS_AVX512_HPP_
#define BP_PLUGIN_CPU_REPACK_ROWS_AVX512_HPP_

inline __m512i load64(const uint8_t *p) { return _mm512_loadu_si512(p); }

// ---- the 32-value formats ----------------------------------------------
// Each format gives a block's unsigned codes of the 4 rows (row r in lane
// r): values 0-15 (lo) and 16-31 (hi); kZeroShift is log2 of the zero
// point taken from them.
struct q4_0_rows {
  static constexpr size_t kRecord = 72;
  static constexpr size_t kPrefetch = 2048;
  static constexpr int kZeroShift = 3;
  // The record's two pairs' 32 nibble bytes are rows 0, 1, 2, 3 in turn.
  static void decode(const uint8_t *rec, __m512i &lo, __m512i &hi) {
    const __m512i m = _mm512_set1_epi8(0x0F);
    const __m512i v = load64(rec + 8);
    lo = _mm512_and_si512(v, m);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
  }
};

// Q5_0: the fifth bits from the 4 rows' qh words. A broadcast of the 16
// bytes of words puts all of them in every lane; one byte shuffle copies
// byte k / 8 of row r's word to byte k of lane r (bytes 2 and 3 for values
// 16-31), and a test against bit k % 8 gives the mask of the values that
// get 16.
struct q5_0_rows {
  static constexpr size_t kRecord = 88;
  static constexpr size_t kPrefetch = 1024;
  static constexpr int kZeroShift = 4;
  static void decode(const uint8_t *rec, __m512i &lo, __m512i &hi) {
    const __m512i m = _mm512_set1_epi8(0x0F), m16 = _mm512_set1_epi8(16);
    const __m512i bit = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ULL));
    const __m512i words = bcast16(rec + 8);
    const auto fifth = [&](int byte) {  // byte |byte| (and byte + 1) of lane r's word r
      constexpr long long kOnes = 0x0101010101010101LL;
      const __m512i idx =
          _mm512_setr_epi64(kOnes * byte, kOnes * (byte + 1), kOnes * (4 + byte), kOnes * (5 + byte),
                            kOnes * (8 + byte), kOnes * (9 + byte), kOnes * (12 + byte), kOnes * (13 + byte));
      return _mm512_test_epi8_mask(_mm512_shuffle_epi8(words, idx), bit);
    };
    const __m512i v = load64(rec + 24);
    lo = _mm512_and_si512(v, m);
    lo = _mm512_mask_add_epi8(lo, fifth(0), lo, m16);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
    hi = _mm512_mask_add_epi8(hi, fifth(2), hi, m16);
  }
};

// Q8_0: per pair the record holds both rows' values 0-15, then both rows'
// 16-31; the codes are the values plus 128 (the sign bit flipped).
struct q8_0_rows {
  static constexpr size_t kRecord = 136;
  static constexpr size_t kPrefetch = 2048;
  static constexpr int kZeroShift = 7;
  static void decode(const uint8_t *rec, __m512i &lo, __m512i &hi) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    lo = _mm512_xor_si512(load32x2(rec + 8, rec + 72), flip);
    hi = _mm512_xor_si512(load32x2(rec + 40, rec + 104), flip);
  }
};

#endif  // BP_PLUGIN_CPU_REPACK_ROWS_AVX512_HPP_
