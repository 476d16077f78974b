// q6_k.cpp: Q6_K, super-blocks of 256 values in 16 sub-blocks of 16
// (docs/types.md). Value = d * scales[j] * (q - 32), q in 0..63, stored as
// the low 4 bits in ql and the high 2 in qh; scales are int8.
//
// The reference search, per sub-block: from the value of largest magnitude
// (sign kept) try 19 inverse scales -(32 + 0.1 s) / max, s = -9..9, and keep
// the one whose least-squares scale, weighted by x^2, explains the most of
// the data (largest sum(w x l)^2 / sum(w l^2)). The 16 scales are then
// quantized to int8 against the one of largest magnitude, mapped to -128.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr int k_super = 256;
constexpr int k_sub = 16;
constexpr int k_bytes = 210;
constexpr int k_nmax = 32;
// Below this magnitude a group counts as all zeros.
constexpr float k_zero_eps = 1e-15f;

int code_of(float iscale, float x) { return std::max(-k_nmax, std::min(k_nmax - 1, round_nearest(iscale * x))); }

// Codes L (offset by k_nmax, so 0..63) and the scale of one sub-block.
float fit_scale(const float *x, int8_t *L) {
  float amax = 0, max = 0;
  for (int i = 0; i < k_sub; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < k_zero_eps) {
    std::memset(L, 0, k_sub);
    return 0.0f;
  }
  float iscale = -k_nmax / max;
  float sum_lx = 0, sum_l2 = 0;
  for (int i = 0; i < k_sub; ++i) {
    const int l = code_of(iscale, x[i]);
    L[i] = static_cast<int8_t>(l + k_nmax);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * l;
    sum_l2 += w * l * l;
  }
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int s = -9; s <= 9; ++s) {
    if (s == 0) continue;
    iscale = -(k_nmax + 0.1f * s) / max;
    sum_lx = sum_l2 = 0;
    for (int i = 0; i < k_sub; ++i) {
      const int l = code_of(iscale, x[i]);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < k_sub; ++i) L[i] = static_cast<int8_t>(k_nmax + code_of(iscale, x[i]));
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

void quantize_super(const float *x, uint8_t *out) {
  int8_t L[k_super];
  float scales[k_super / k_sub];
  float max_scale = 0, max_abs = 0;
  for (int j = 0; j < k_super / k_sub; ++j) {
    scales[j] = fit_scale(x + k_sub * j, L + k_sub * j);
    if (std::fabs(scales[j]) > max_abs) {
      max_abs = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  std::memset(out, 0, k_bytes);
  uint8_t *ql = out, *qh = out + 128;
  auto *sc = reinterpret_cast<int8_t *>(out + 192);
  if (max_abs < k_zero_eps) return;  // all zeros: every byte 0, d = +0
  const float iscale = -128.0f / max_scale;
  const uint16_t dh = bp_fp32_to_fp16(1 / iscale);
  std::memcpy(out + 208, &dh, 2);
  for (int j = 0; j < k_super / k_sub; ++j) {
    sc[j] = static_cast<int8_t>(std::min(127, round_nearest(iscale * scales[j])));
  }
  // Requantize against the scales as stored; a sub-block whose scale is 0
  // keeps the codes of its search.
  for (int j = 0; j < k_super / k_sub; ++j) {
    const float d = bp_fp16_to_fp32(dh) * sc[j];
    if (d == 0.0f) continue;
    for (int i = 0; i < k_sub; ++i) {
      const int l = std::max(-32, std::min(31, round_nearest(x[k_sub * j + i] / d)));
      L[k_sub * j + i] = static_cast<int8_t>(l + 32);
    }
  }
  // Each half of 128 values: ql[l] holds values l (low nibble) and l + 64
  // (high), ql[l + 32] values l + 32 and l + 96; qh[l] the top two bits of
  // values l, l + 32, l + 64, l + 96 from its low bits up.
  for (int h = 0; h < 2; ++h, ql += 64, qh += 32) {
    const int8_t *v = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((v[l] & 0x0f) | ((v[l + 64] & 0x0f) << 4));
      ql[l + 32] = static_cast<uint8_t>((v[l + 32] & 0x0f) | ((v[l + 96] & 0x0f) << 4));
      qh[l] = static_cast<uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) |
                                   ((v[l + 96] >> 4) << 6));
    }
  }
}

}  // namespace

void quantize_q6_k(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_super; ++b) quantize_super(src + b * k_super, out + b * k_bytes);
}

void dequantize_q6_k(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_super; ++b, in += k_bytes) {
    uint16_t dh;
    std::memcpy(&dh, in + 208, 2);
    const float d = bp_fp16_to_fp32(dh);
    const auto *sc = reinterpret_cast<const int8_t *>(in + 192);
    for (int h = 0; h < 2; ++h, dst += 128) {
      const uint8_t *ql = in + 64 * h, *qh = in + 128 + 32 * h;
      const int8_t *s = sc + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * s[is] * q0;
        dst[l + 32] = d * s[is + 2] * q1;
        dst[l + 64] = d * s[is + 4] * q2;
        dst[l + 96] = d * s[is + 6] * q3;
      }
    }
  }
}

}  // namespace bp::core::quant
