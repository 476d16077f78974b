// q4_k_q5_k.cpp: Q4_K and Q5_K, super-blocks of 256 values in 8 sub-blocks
// of 32 (docs/types.md). Value = d * sc[j] * q - dmin * m[j], q in 0..15
// (Q4_K) or 0..31 (Q5_K, its fifth bit kept apart in qh), with 6-bit
// sub-block scales sc and mins m packed into 12 bytes.
//
// The reference search, per sub-block: weights w = rms(x) + |x|, then
// fit_scale_min (Q4_K: nmax 15, rmin -1, 21 candidates; Q5_K: nmax 31,
// rmin -0.5, 16 candidates). Then the eight
// scales and mins are themselves quantized to 6 bits against their maxima,
// and every value is coded again against the scales as stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr int k_super = 256;
constexpr int k_sub = 32;
constexpr int k_q4_bytes = 144;
constexpr int k_q5_bytes = 176;

constexpr scale_min_search k_q4_search = {15, -1.0f, 20, false};
constexpr scale_min_search k_q5_search = {31, -0.5f, 15, false};

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

// The common part of both formats: d, dmin and the packed scales at
// out[0..15], the codes (0..sp.nmax) of the 256 values in L.
void quantize_super(const scale_min_search &sp, const float *x, uint8_t *out, uint8_t *L) {
  uint8_t aux[k_sub];
  float w[k_sub], scales[k_super / k_sub], mins[k_super / k_sub];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < k_super / k_sub; ++j) {
    const float *xs = x + k_sub * j;
    float sum_x2 = 0;
    for (int l = 0; l < k_sub; ++l) sum_x2 += xs[l] * xs[l];
    const float rms = std::sqrt(sum_x2 / k_sub);
    for (int l = 0; l < k_sub; ++l) w[l] = rms + std::fabs(xs[l]);
    scales[j] = fit_scale_min(sp, k_sub, xs, w, L + k_sub * j, aux, &mins[j]);
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
      L[k_sub * j + i] = static_cast<uint8_t>(std::max(0, std::min(sp.nmax, l)));
    }
  }
}

// Q4_K's qs: each 32 bytes hold sub-block 2k in the low nibbles and 2k+1 in
// the high.
void pack_q4(const uint8_t *L, uint8_t *out) {
  uint8_t *q = out + 16;
  for (int j = 0; j < k_super; j += 64, q += 32) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

// Q5_K: the low four bits as Q4_K's qs (at byte 48), the fifth bit of value
// 64 c + l in bit 2c of qh[l] and of value 64 c + 32 + l in bit 2c + 1.
void pack_q5(const uint8_t *L, uint8_t *out) {
  uint8_t *qh = out + 16, *q = out + 48;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c, q += 32) {
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
      q[l] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
      qh[l] = static_cast<uint8_t>(qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
    }
  }
}

// Sub-blocks 2c and 2c + 1's scale and offset: value = d * q - o.
void sub_pair(const uint8_t *in, int c, float d, float dmin, float s[2], float o[2]) {
  uint8_t sc0, m0, sc1, m1;
  unpack_scale_min(2 * c, in + 4, &sc0, &m0);
  unpack_scale_min(2 * c + 1, in + 4, &sc1, &m1);
  s[0] = d * sc0;
  o[0] = dmin * m0;
  s[1] = d * sc1;
  o[1] = dmin * m1;
}

}  // namespace

void quantize_q4_k(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  uint8_t L[k_super];
  for (int64_t b = 0; b < n / k_super; ++b, out += k_q4_bytes) {
    quantize_super(k_q4_search, src + b * k_super, out, L);
    pack_q4(L, out);
  }
}

void quantize_q5_k(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  uint8_t L[k_super];
  for (int64_t b = 0; b < n / k_super; ++b, out += k_q5_bytes) {
    quantize_super(k_q5_search, src + b * k_super, out, L);
    pack_q5(L, out);
  }
}

void dequantize_q4_k(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_super; ++b, in += k_q4_bytes, dst += k_super) {
    uint16_t dh, mh;
    std::memcpy(&dh, in, 2);
    std::memcpy(&mh, in + 2, 2);
    const float d = bp_fp16_to_fp32(dh), dmin = bp_fp16_to_fp32(mh);
    const uint8_t *q = in + 16;
    for (int c = 0; c < k_super / 64; ++c, q += 32) {
      float s[2], o[2];
      sub_pair(in, c, d, dmin, s, o);
      float *y = dst + 64 * c;
      for (int l = 0; l < 32; ++l) {
        y[l] = s[0] * (q[l] & 0x0f) - o[0];
        y[l + 32] = s[1] * (q[l] >> 4) - o[1];
      }
    }
  }
}

void dequantize_q5_k(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_super; ++b, in += k_q5_bytes, dst += k_super) {
    uint16_t dh, mh;
    std::memcpy(&dh, in, 2);
    std::memcpy(&mh, in + 2, 2);
    const float d = bp_fp16_to_fp32(dh), dmin = bp_fp16_to_fp32(mh);
    const uint8_t *qh = in + 16, *q = in + 48;
    for (int c = 0; c < k_super / 64; ++c, q += 32) {
      float s[2], o[2];
      sub_pair(in, c, d, dmin, s, o);
      float *y = dst + 64 * c;
      for (int l = 0; l < 32; ++l) {
        const int lo = (q[l] & 0x0f) | (((qh[l] >> (2 * c)) & 1) << 4);
        const int hi = (q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
        y[l] = s[0] * lo - o[0];
        y[l + 32] = s[1] * hi - o[1];
      }
    }
  }
}

}  // namespace bp::core::quant
