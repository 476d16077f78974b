// quant_act_avx2.cpp: the AVX2 column quantizers of b (quantize_act_col,
// quantize_ract_col, quantize_rkact_col), bit-equal to the portable ones:
// the same largest magnitude (NaNs skipped), the same scalar scale and
// inverse, one float product per value, rounding half to even, the clamp to
// +-127 and NaN to -127. A prompt's products quantize every column of b in
// every thread, and the portable loops (a libm call per value) took a tenth
// of a 512-token prompt's time.
#include "isa.hpp"
#include "quant.hpp"
#include "repack.hpp"
#include "simd.hpp"

namespace bp::cpu {

#if defined(BP_X86_SIMD)
namespace {

// max(acc, |x[0..7]|) with a NaN value skipped: vmaxps returns its second
// operand when either is NaN.
BP_AVX2 inline __m256 abs_max8(__m256 acc, const float *x) {
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x));
  return _mm256_max_ps(magnitude, acc);
}

BP_AVX2 inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

BP_AVX2 inline float abs_max(const float *x, int n) {
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) acc = abs_max8(acc, x + i);
  return hmax8(acc);
}

// x[0..31] * id rounded half to even, clamped to +-127, NaN to -127: 32
// int8 in the values' order.
BP_AVX2 inline __m256i round32(const float *x, __m256 id) {
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  __m256i r[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 v =
        _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // vmaxps returns its second operand where either is NaN: NaN becomes -127.
    r[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
  }
  // The packs interleave the four vectors by 128-bit lane: dword i of the
  // result is 4 values of r[i % 4], low half for i < 4.
  const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
  return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Lane k: the sum of q[4k .. 4k + 3].
BP_AVX2 inline __m256i sums_of_4(__m256i q) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
}

BP_AVX2 inline int hsum4(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4E));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xB1));
  return _mm_cvtsi128_si32(v);
}

// One block of 32 with quantize_act_block's scale rule; returns d.
BP_AVX2 inline float act_block(const float *x, int8_t *q, __m256i *s4) {
  const float amax = abs_max(x, 32);
  const float d = amax / 127.0f, id = d != 0.0f ? 127.0f / amax : 0.0f;
  const __m256i v = round32(x, _mm256_set1_ps(id));
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(q), v);
  *s4 = sums_of_4(v);
  return d;
}

BP_AVX2 void act_col(const float *src, int64_t K, void *col) {
  const act_col_parts c = act_col_at(col, K);
  for (int64_t j = 0; j < c.blocks; ++j) {
    if (j >= c.full) {
      act_col_zero_block(c, j);
      continue;
    }
    __m256i s4;
    c.d[j] = act_block(src + 32 * j, c.qs + 32 * j, &s4);
    c.lo[j] = c.d[j] * static_cast<float>(hsum4(_mm256_castsi256_si128(s4)));
    c.hi[j] = c.d[j] * static_cast<float>(hsum4(_mm256_extracti128_si256(s4, 1)));
  }
}

BP_AVX2 void ract_col(const float *src, int64_t K, void *col) {
  const ract_col_parts c = ract_col_at(col, K);
  for (int64_t j = 0; j < c.blocks; ++j) {
    __m256i s4;
    c.d[j] = act_block(src + 32 * j, c.qs + 32 * j, &s4);
    // sums[l] pairs values 4l.. of the first half with 16 + 4l.. of the second.
    const __m128i pair = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(c.sums + 4 * j), pair);
    c.bsum[j] = c.d[j] * static_cast<float>(hsum4(pair));
  }
}

BP_AVX2 void rkact_col(const float *src, int64_t K, void *col) {
  const rkact_col_parts parts = rkact_col_at(col, K);
  for (int64_t s = 0; s < parts.supers; ++s) {
    const float *x = src + 256 * s;
    const float amax = abs_max(x, 256);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    parts.d[s] = amax / 127.0f;
    for (int c = 0; c < 8; ++c) {
      const __m256i v = round32(x + 32 * c, _mm256_set1_ps(id));
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(parts.qs + 256 * s + 32 * c), v);
      const __m256i s4 = sums_of_4(v);
      parts.sums[16 * s + 2 * c] = static_cast<int16_t>(hsum4(_mm256_castsi256_si128(s4)));
      parts.sums[16 * s + 2 * c + 1] = static_cast<int16_t>(hsum4(_mm256_extracti128_si256(s4, 1)));
    }
  }
}

}  // namespace

const act_quantizers *act_quantizers_avx2() {
  static const act_quantizers q = {act_col, ract_col, rkact_col};
  return plugins::cpu_isa() >= plugins::isa_level::avx2 ? &q : nullptr;
}

#else

const act_quantizers *act_quantizers_avx2() { return nullptr; }

#endif

}  // namespace bp::cpu
