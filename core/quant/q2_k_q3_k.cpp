// q2_k_q3_k.cpp: Q2_K and Q3_K, super-blocks of 256 values in 16 sub-blocks
// of 16 (docs/types.md).
//
//   Q2_K (84 B): u8 scales[16]; u8 qs[64]; f16 d; f16 dmin. Sub-block j has
//     a 4-bit scale (low nibble of scales[j]) and 4-bit min (high nibble):
//     value = d * sc * q - dmin * m, q in 0..3.
//   Q3_K (110 B): u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d. Sub-block
//     j has a 6-bit scale s (stored + 32): value = d * (s - 32) * q, q in
//     -4..3 stored as 2 low bits plus a high bit that is set for q >= 0.
//
// Both keep 2-bit codes the same way: value 128 h + 32 t + l (t < 4, l < 32)
// at bits 2t of qs[32 h + l]. Q3_K's high bit of value v is bit v / 32 of
// hmask[v % 32].
//
// The reference searches: Q2_K fits each sub-block's scale and min with
// fit_scale_min (nmax 3, rmin -0.5, 16 candidates, weights |x|, absolute
// error); Q3_K fits each sub-block's signed scale by a greedy weighted
// least-squares refinement of the codes (weights x^2, up to 5 passes). Then
// the 16 scales (and mins) are coded against their largest and every value
// is coded again against the scales as stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr int k_super = 256;
constexpr int k_sub = 16;
constexpr int k_subs = k_super / k_sub;
constexpr int k_q2_bytes = 84;
constexpr int k_q3_bytes = 110;
// Byte offsets inside the blocks.
constexpr int k_q2_qs = 16, k_q2_d = 80, k_q2_dmin = 82;
constexpr int k_q3_qs = 32, k_q3_scales = 96, k_q3_d = 108;
// Below this magnitude a sub-block counts as all zeros.
constexpr float k_zero_eps = 1e-15f;
constexpr scale_min_search k_q2_search = {3, -0.5f, 15, true};

// Packs 256 2-bit codes (the low two bits of L) into qs[64].
void pack_2bit(const uint8_t *L, uint8_t *qs) {
  for (int h = 0; h < k_super / 128; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t *c = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>((c[0] & 3) | ((c[32] & 3) << 2) | ((c[64] & 3) << 4) | ((c[96] & 3) << 6));
    }
  }
}
int code_2bit(const uint8_t *qs, int v) { return (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3; }

// Q3_K's sub-block j scale (0..63, 32 meaning 0) from the 12 packed bytes:
// the low nibble in byte j (j < 8) or the high nibble of byte j - 8, the
// top two bits at bits 2 (j / 4) of byte 8 + j % 4.
int q3_scale(const uint8_t *s, int j) {
  const int low = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
  return low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

// Q3_K's per-sub-block fit: codes L in -nmax..nmax-1 (stored + nmax) and the
// scale, refined greedily: each code moves to its own least-squares value
// while that raises sum(w x l)^2 / sum(w l^2).
float fit_signed_scale(const float *x, int nmax, uint8_t *L) {
  float max = 0, amax = 0;
  for (int i = 0; i < k_sub; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < k_zero_eps) {
    std::memset(L, 0, k_sub);
    return 0.0f;
  }
  const float iscale = -nmax / max;
  int8_t code[k_sub];
  float sum_lx = 0, sum_l2 = 0;
  for (int i = 0; i < k_sub; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, round_nearest(iscale * x[i])));
    code[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * l;
    sum_l2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < k_sub; ++i) {
      const float w = x[i] * x[i];
      float slx = sum_lx - w * x[i] * code[i];
      if (!(slx > 0)) continue;
      float sl2 = sum_l2 - w * code[i] * code[i];
      const int l = std::max(-nmax, std::min(nmax - 1, round_nearest(x[i] * sl2 / slx)));
      if (l == code[i]) continue;
      slx += w * x[i] * l;
      sl2 += w * l * l;
      if (sl2 > 0 && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
        code[i] = static_cast<int8_t>(l);
        sum_lx = slx;
        sum_l2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < k_sub; ++i) L[i] = static_cast<uint8_t>(code[i] + nmax);
  return sum_lx / sum_l2;
}

void quantize_q2_super(const float *x, uint8_t *out) {
  uint8_t L[k_super], aux[k_sub];
  float w[k_sub], scales[k_subs], mins[k_subs];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < k_subs; ++j) {
    for (int l = 0; l < k_sub; ++l) w[l] = std::fabs(x[k_sub * j + l]);
    scales[j] = fit_scale_min(k_q2_search, k_sub, x + k_sub * j, w, L + k_sub * j, aux, &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  // The 4-bit scales and mins against their maxima; round_nearest of a
  // non-negative value, kept in a byte as the reference does.
  uint8_t *sc = out;
  if (max_scale > 0) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < k_subs; ++j) sc[j] = static_cast<uint8_t>(round_nearest(iscale * scales[j]));
    put_f16(out + k_q2_d, max_scale / 15.0f);
  } else {
    std::memset(sc, 0, k_subs);
    put_f16(out + k_q2_d, 0.0f);
  }
  if (max_min > 0) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < k_subs; ++j) sc[j] = static_cast<uint8_t>(sc[j] | (round_nearest(iscale * mins[j]) << 4));
    put_f16(out + k_q2_dmin, max_min / 15.0f);
  } else {
    put_f16(out + k_q2_dmin, 0.0f);
  }
  // Code again against the scales as stored; a sub-block whose scale is 0
  // keeps the codes of its search.
  for (int j = 0; j < k_subs; ++j) {
    const float d = f16_at(out + k_q2_d) * static_cast<float>(sc[j] & 0x0f);
    if (d == 0.0f) continue;
    const float dm = f16_at(out + k_q2_dmin) * static_cast<float>(sc[j] >> 4);
    for (int i = 0; i < k_sub; ++i) {
      const int l = round_nearest((x[k_sub * j + i] + dm) / d);
      L[k_sub * j + i] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
    }
  }
  pack_2bit(L, out + k_q2_qs);
}

void quantize_q3_super(const float *x, uint8_t *out) {
  uint8_t L[k_super];
  float scales[k_subs];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < k_subs; ++j) {
    scales[j] = fit_signed_scale(x + k_sub * j, 4, L + k_sub * j);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  uint8_t *s = out + k_q3_scales;
  std::memset(s, 0, 12);
  if (max_scale != 0.0f) {
    // The scale of largest magnitude maps to -32, as the 32-value formats do.
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < k_subs; ++j) {
      const int l = std::max(-32, std::min(31, round_nearest(iscale * scales[j]))) + 32;
      if (j < 8) {
        s[j] = static_cast<uint8_t>(l & 0x0f);
      } else {
        s[j - 8] = static_cast<uint8_t>(s[j - 8] | ((l & 0x0f) << 4));
      }
      s[8 + j % 4] = static_cast<uint8_t>(s[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
    }
    put_f16(out + k_q3_d, 1 / iscale);
  } else {
    put_f16(out + k_q3_d, 0.0f);
  }
  for (int j = 0; j < k_subs; ++j) {
    const float d = f16_at(out + k_q3_d) * static_cast<float>(q3_scale(s, j) - 32);
    if (d == 0.0f) continue;
    for (int i = 0; i < k_sub; ++i) {
      const int l = std::max(-4, std::min(3, round_nearest(x[k_sub * j + i] / d)));
      L[k_sub * j + i] = static_cast<uint8_t>(l + 4);
    }
  }
  uint8_t *hmask = out;
  std::memset(hmask, 0, 32);
  for (int v = 0; v < k_super; ++v) {
    if (L[v] > 3) {
      hmask[v % 32] = static_cast<uint8_t>(hmask[v % 32] | (1 << (v / 32)));
      L[v] = static_cast<uint8_t>(L[v] - 4);
    }
  }
  pack_2bit(L, out + k_q3_qs);
}

}  // namespace

void quantize_q2_k(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_super; ++b) quantize_q2_super(src + b * k_super, out + b * k_q2_bytes);
}

void quantize_q3_k(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_super; ++b) quantize_q3_super(src + b * k_super, out + b * k_q3_bytes);
}

void dequantize_q2_k(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_super; ++b, in += k_q2_bytes, dst += k_super) {
    const float d = f16_at(in + k_q2_d), dmin = f16_at(in + k_q2_dmin);
    for (int j = 0; j < k_subs; ++j) {
      const float dl = d * static_cast<float>(in[j] & 0x0f), ml = dmin * static_cast<float>(in[j] >> 4);
      for (int i = 0; i < k_sub; ++i) {
        const int v = k_sub * j + i;
        dst[v] = dl * static_cast<float>(code_2bit(in + k_q2_qs, v)) - ml;
      }
    }
  }
}

void dequantize_q3_k(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_super; ++b, in += k_q3_bytes, dst += k_super) {
    const float d = f16_at(in + k_q3_d);
    for (int j = 0; j < k_subs; ++j) {
      const float dl = d * static_cast<float>(q3_scale(in + k_q3_scales, j) - 32);
      for (int i = 0; i < k_sub; ++i) {
        const int v = k_sub * j + i;
        const int high = (in[v % 32] >> (v / 32)) & 1;
        dst[v] = dl * static_cast<float>(code_2bit(in + k_q3_qs, v) - (high ? 0 : 4));
      }
    }
  }
}

}  // namespace bp::core::quant
