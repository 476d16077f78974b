// repack_simd.hpp: steps the AVX2 and AVX-512 repacked tiles share,
// written with 128-bit intrinsics and constants so that each tile file
// compiles them for its own target (include it inside that file's target
// region, within namespace bp::cpu).
#ifndef BP_PLUGIN_CPU_REPACK_SIMD_HPP_
#define BP_PLUGIN_CPU_REPACK_SIMD_HPP_

// Q4_K's and Q5_K's 6-bit scales and minimums of a group's 4 rows
// (quant_blocks.hpp's scale_min) as bytes, from the record's three words
// of each row, word w of the 4 rows side by side (repack.hpp): each of the
// four holds [row 0's 4 | row 1's 4 | row 2's 4 | row 3's 4], sub-blocks
// 0-3 (lo) or 4-7 (hi).
struct kscale_bytes {
  __m128i sc_lo, sc_hi, m_lo, m_hi;
};
inline kscale_bytes kscales_of(const uint8_t *rec) {
  const auto word = [&](int w) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(rec + kscale_word_at(w, 0)));
  };
  const __m128i w0 = word(0), w1 = word(1), w2 = word(2);
  const __m128i m3f = _mm_set1_epi8(0x3F), m0f = _mm_set1_epi8(0x0F), m30 = _mm_set1_epi8(0x30);
  return {_mm_and_si128(w0, m3f), _mm_or_si128(_mm_and_si128(w2, m0f), _mm_and_si128(_mm_srli_epi16(w0, 2), m30)),
          _mm_and_si128(w1, m3f),
          _mm_or_si128(_mm_and_si128(_mm_srli_epi16(w2, 4), m0f), _mm_and_si128(_mm_srli_epi16(w1, 2), m30))};
}

// A tile of one or two columns is bound by the weights' stream from DRAM,
// which asking ahead keeps fuller: every line of the record |distance|
// bytes past the one it reads. The distances were measured per format
// (docs/plugins/cpu.md); the K-quants' is kKquantPrefetchBytes.
constexpr size_t kKquantPrefetchBytes = 2048;
inline void prefetch_record(const uint8_t *rec, size_t record_bytes, size_t distance = kKquantPrefetchBytes) {
  for (size_t o = 0; o < record_bytes; o += 64)
    _mm_prefetch(reinterpret_cast<const char *>(rec + distance + o), _MM_HINT_T0);
}

// Q6_K's 32-value step j (< 8) of a super-block: the ql chunk that holds
// its low 4 bits (in the high nibbles when q6k_high_nibble), the qh chunk
// that holds its top 2, and how far those move (left; negative: right) to
// land on bits 4-5 (repack.hpp's chunks of 32 bytes per row pair).
constexpr int q6k_ql_chunk(int j) { return 2 * (j / 4) + (j % 4) % 2; }
constexpr int q6k_qh_chunk(int j) { return 4 + j / 4; }
constexpr bool q6k_high_nibble(int j) { return j % 4 >= 2; }
constexpr int q6k_top_shift(int j) { return 4 - 2 * (j % 4); }

#endif  // BP_PLUGIN_CPU_REPACK_SIMD_HPP_
