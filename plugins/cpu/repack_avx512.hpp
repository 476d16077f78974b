// repack_avx512.hpp: the AVX-512 steps both repacked tile files share
// (repack_gemm_avx512.cpp, the 32-value formats; repack_gemm_avx512_k.cpp,
// the K-quants). Include it inside the file's AVX-512 VNNI target region,
// within an anonymous namespace in bp::cpu, after repack_simd.hpp.
#ifndef BP_PLUGIN_CPU_REPACK_AVX512_HPP_
#define BP_PLUGIN_CPU_REPACK_AVX512_HPP_

// Two 256-bit loads as the low and high halves of one register.
inline __m512i load32x2(const uint8_t *lo, const uint8_t *hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(lo))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(hi)), 1);
}
inline __m512i bcast16(const void *p) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i *>(p)));
}

// [d0 x4, d1 x4, d2 x4, d3 x4]: a record's first 4 f16 (the 4 rows' d),
// row r's over lane r's 4 dwords.
inline __m512 row_scales(const uint8_t *rec) {
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  return _mm512_permutexvar_ps(
      spread, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(rec)))));
}
// vpermd indices that give lanes 4r to 4r + 3 dword 2r + i of the source
// (i < 2): row r's d (i 0) or dmin (i 1) of 8 values [d0 dmin0 d1 ...],
// or row r's pair i of words 4r-4r+3.
inline __m512i pick_2r_plus(int i) {
  return _mm512_add_epi32(_mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6), _mm512_set1_epi32(i));
}

// Row r's result from lanes 4r-4r+3, in a fixed order.
inline void store_rows(__m512 v, float *out) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  for (int r = 0; r < kPackRows; ++r) out[r] = (f[4 * r] + f[4 * r + 1]) + (f[4 * r + 2] + f[4 * r + 3]);
}

// Lane 4r + c of vpshufd's spread of quad k of a register holding 16 values
// of each row in 128-bit lane r.
inline void spread_quads(__m512i x, __m512i *w) {
  w[0] = _mm512_shuffle_epi32(x, _MM_PERM_AAAA);
  w[1] = _mm512_shuffle_epi32(x, _MM_PERM_BBBB);
  w[2] = _mm512_shuffle_epi32(x, _MM_PERM_CCCC);
  w[3] = _mm512_shuffle_epi32(x, _MM_PERM_DDDD);
}

// dot[q] += the |quads| quads of w by those of column group q of b (at
// |blk| + q * |group|, 16 bytes each). Quad by quad across the groups, so
// the instruction stream holds NG independent chains of vpdpbusd side by
// side rather than one chain after another: measured faster, the
// out-of-order window then need not reach across whole chains.
template <int NG>
inline void wide_dots(__m512i *dot, const __m512i *w, int quads, const char *blk, size_t group) {
#pragma GCC unroll 8
  for (int k = 0; k < quads; ++k)
#pragma GCC unroll 8
    for (int q = 0; q < NG; ++q) dot[q] = _mm512_dpbusd_epi32(dot[q], w[k], bcast16(blk + q * group + 16 * k));
}

// Stores the 16 outputs of each 4-column group (lane 4r + c) in place.
template <int NG>
inline void store_wide(const __m512 *acc, int rn, float *out, int64_t ldo) {
  for (int q = 0; q < NG; ++q) {
    alignas(64) float f[16];
    _mm512_store_ps(f, acc[q]);
    for (int c = 0; c < 4 && 4 * q + c < rn; ++c)
      for (int r = 0; r < kPackRows; ++r) out[(4 * q + c) * ldo + r] = f[4 * r + c];
  }
}

// The tile of a family for rn columns, 1 <= rn <= N: make(c) is the
// family's tile for decltype(c)::value columns (c an std::integral_constant),
// one instantiation per column count, so each keeps its accumulators in
// registers. One table per family (each |make| is its own lambda type),
// built on first use. The files including this one include <array> and
// <utility>.
template <int N, class Make>
rtile_fn tile_of(int rn, Make make) {
  static const auto tiles = [&]<int... C>(std::integer_sequence<int, C...>) {
    return std::array<rtile_fn, N>{make(std::integral_constant<int, C + 1>{})...};
  }
  (std::make_integer_sequence<int, N>{});
  return tiles[rn - 1];
}

#endif  // BP_PLUGIN_CPU_REPACK_AVX512_HPP_
