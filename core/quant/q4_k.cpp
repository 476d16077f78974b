// q4_k.cpp: Q4_K, super-blocks of 256 values in 8 sub-blocks of 32
// (docs/types.md). Value = d * sc[j] * q - dmin * m[j], q in 0..15, with
// 6-bit sub-block scales sc and mins m packed into 12 bytes.
//
// The reference search, per sub-block: weights w = rms(x) + |x|; start from
// the min/max fit, then try 21 candidate inverse scales (nmax + rmin +
// delta * step) / (max - min) and keep the weighted least-squares scale and
// min of the one with the smallest weighted squared error. Then the eight
// scales and mins are themselves quantized to 6 bits against their maxima.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr int k_super = 256;
constexpr int k_sub = 32;
constexpr int k_bytes = 144;
constexpr int k_nmax = 15;
// Candidate inverse scales: (k_nmax + k_rmin + k_rdelta * s) / (max - min), s = 0..k_steps.
constexpr float k_rmin = -1.0f;
constexpr float k_rdelta = 0.1f;
constexpr int k_steps = 20;

// Fits x[i] ~ scale * L[i] - min_out (min_out >= 0) for one sub-block and
// returns scale. L gets the codes; aux is scratch.
float fit_scale_min(const float *x, const float *w, uint8_t *L, uint8_t *aux, float *min_out) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < k_sub; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;  // the min is subtracted, so it is never positive
  if (hi == lo) {
    std::memset(L, 0, k_sub);
    *min_out = -lo;
    return 0.0f;
  }
  float iscale = k_nmax / (hi - lo);
  float scale = 1 / iscale;
  float best_err = 0;
  for (int i = 0; i < k_sub; ++i) {
    const int l = round_nearest(iscale * (x[i] - lo));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(k_nmax, l)));
    const float diff = scale * L[i] + lo - x[i];
    best_err += w[i] * (diff * diff);
  }
  for (int s = 0; s <= k_steps; ++s) {
    iscale = (k_rmin + k_rdelta * s + k_nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < k_sub; ++i) {
      const int l = std::max(0, std::min(k_nmax, round_nearest(iscale * (x[i] - lo))));
      aux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float cand_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float cand_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (cand_min > 0) {
      cand_min = 0;
      cand_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < k_sub; ++i) {
      const float diff = cand_scale * aux[i] + cand_min - x[i];
      err += w[i] * (diff * diff);
    }
    if (err < best_err) {
      std::memcpy(L, aux, k_sub);
      best_err = err;
      scale = cand_scale;
      lo = cand_min;
    }
  }
  *min_out = -lo;
  return scale;
}

// Sub-block j's 6-bit scale and min from the 12 packed bytes: bytes 0..3
// hold scales 0..3 and bytes 4..7 mins 0..3 in their low 6 bits; bytes
// 8..11 hold the low nibbles of scale (low) and min (high) 4..7, whose top
// two bits are the top bits of bytes 0..3 (scales) and 4..7 (mins).
void unpack_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

void pack_scale_min(int j, uint8_t sc, uint8_t m, uint8_t *s) {
  if (j < 4) {
    s[j] = sc;
    s[j + 4] = m;
  } else {
    s[j + 4] = static_cast<uint8_t>((sc & 0x0f) | ((m & 0x0f) << 4));
    s[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    s[j] |= static_cast<uint8_t>((m >> 4) << 6);
  }
}

void quantize_super(const float *x, uint8_t *out) {
  uint8_t L[k_super], aux[k_sub];
  float w[k_sub], scales[k_super / k_sub], mins[k_super / k_sub];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < k_super / k_sub; ++j) {
    const float *xs = x + k_sub * j;
    float sum_x2 = 0;
    for (int l = 0; l < k_sub; ++l) sum_x2 += xs[l] * xs[l];
    const float rms = std::sqrt(sum_x2 / k_sub);
    for (int l = 0; l < k_sub; ++l) w[l] = rms + std::fabs(xs[l]);
    scales[j] = fit_scale_min(xs, w, L + k_sub * j, aux, &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t *packed = out + 4;
  std::memset(packed, 0, 12);
  for (int j = 0; j < k_super / k_sub; ++j) {
    // nearest_int of a non-negative value, kept in a byte as the reference does.
    const auto ls = static_cast<uint8_t>(round_nearest(inv_scale * scales[j]));
    const auto lm = static_cast<uint8_t>(round_nearest(inv_min * mins[j]));
    pack_scale_min(j, std::min<uint8_t>(63, ls), std::min<uint8_t>(63, lm), packed);
  }
  const uint16_t dh = bp_fp32_to_fp16(max_scale / 63.0f);
  const uint16_t mh = bp_fp32_to_fp16(max_min / 63.0f);
  std::memcpy(out, &dh, 2);
  std::memcpy(out + 2, &mh, 2);
  // Requantize against the scales as stored; a sub-block whose scale is 0
  // keeps the codes of its search.
  for (int j = 0; j < k_super / k_sub; ++j) {
    uint8_t sc, m;
    unpack_scale_min(j, packed, &sc, &m);
    const float d = bp_fp16_to_fp32(dh) * sc;
    if (d == 0.0f) continue;
    const float dm = bp_fp16_to_fp32(mh) * m;
    for (int i = 0; i < k_sub; ++i) {
      const int l = round_nearest((x[k_sub * j + i] + dm) / d);
      L[k_sub * j + i] = static_cast<uint8_t>(std::max(0, std::min(15, l)));
    }
  }
  // qs: each 32 bytes hold sub-block 2k in the low nibbles and 2k+1 in the high.
  uint8_t *q = out + 16;
  for (int j = 0; j < k_super; j += 64, q += 32) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

}  // namespace

void quantize_q4_k(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_super; ++b) quantize_super(src + b * k_super, out + b * k_bytes);
}

void dequantize_q4_k(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_super; ++b, in += k_bytes, dst += k_super) {
    uint16_t dh, mh;
    std::memcpy(&dh, in, 2);
    std::memcpy(&mh, in + 2, 2);
    const float d = bp_fp16_to_fp32(dh), dmin = bp_fp16_to_fp32(mh);
    const uint8_t *q = in + 16;
    for (int j = 0; j < k_super / 64; ++j, q += 32) {
      uint8_t sc0, m0, sc1, m1;
      unpack_scale_min(2 * j, in + 4, &sc0, &m0);
      unpack_scale_min(2 * j + 1, in + 4, &sc1, &m1);
      const float d0 = d * sc0, o0 = dmin * m0, d1 = d * sc1, o1 = dmin * m1;
      float *y = dst + 64 * j;
      for (int l = 0; l < 32; ++l) {
        y[l] = d0 * (q[l] & 0x0f) - o0;
        y[l + 32] = d1 * (q[l] >> 4) - o1;
      }
    }
  }
}

}  // namespace bp::core::quant
