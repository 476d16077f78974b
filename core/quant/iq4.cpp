// iq4.cpp: IQ4_NL and IQ4_XS, 4-bit indices into a fixed non-linear
// codebook of 16 int8 values (docs/types.md).
//
//   IQ4_NL (18 B / 32): f16 d; u8 qs[16]. Value = d * book[q].
//   IQ4_XS (136 B / 256): f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128].
//     Block j of 32 has a 6-bit scale ls (low nibble j % 2 of scales_l[j / 2],
//     top bits 2j of scales_h): value = d * (ls - 32) * book[q].
// In both, byte i of a block's 16 qs bytes holds value i in its low nibble
// and value i + 16 in its high one.
//
// The reference search, per 32-value block (weights x^2): scale from the
// value of largest magnitude onto the codebook's end, then the weighted
// least-squares scale of that coding. IQ4_NL stops there (its reference
// tries no other scale and keeps that first coding). IQ4_XS tries 15
// further inverse scales (book[0] + t) / max, t = -7..7, keeping the one
// that explains the most (largest sum(w q x)^2 / sum(w q^2)), codes the 8
// block scales in 6 bits against their largest and codes every value again.
// llama.cpp's file quantizer (llama-quantize) runs IQ4_XS's search on
// IQ4_NL's blocks too and codes each block again against its best scale
// (quantize_iq4_nl_file, reached through bp_quantize_rows_for_file).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr int8_t k_book[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr int k_block = 32;
constexpr int k_super = 256;
constexpr int k_nl_bytes = 18;
constexpr int k_xs_bytes = 136;
constexpr int k_xs_tries = 7;
// Below this magnitude a block counts as all zeros.
constexpr float k_zero_eps = 1e-15f;

// The codebook entry nearest x (the lower on a tie), by bisection.
int nearest_entry(float x) {
  if (x <= k_book[0]) return 0;
  if (x >= k_book[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < k_book[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - k_book[hi - 1] < k_book[hi] - x ? hi - 1 : hi;
}

// The weighted fit of one coding: sum(w q x) and sum(w q^2).
void code_block(const float *x, const float *w, float inv_scale, uint8_t *L, float *sum_qx, float *sum_q2) {
  float sqx = 0, sq2 = 0;
  for (int j = 0; j < k_block; ++j) {
    const int l = nearest_entry(inv_scale * x[j]);
    if (L) L[j] = static_cast<uint8_t>(l);
    const float q = k_book[l];
    sqx += w[j] * q * x[j];
    sq2 += w[j] * q * q;
  }
  *sum_qx = sqx;
  *sum_q2 = sq2;
}

// One block's scale; L gets the codes of the first coding tried (left as
// it was for a block of zeros). With |tries| 0 (IQ4_NL's reference) the
// scale maps the largest magnitude onto book[0] and is only refined by
// least squares; otherwise onto -book[0], then 2 tries + 1 more.
float fit_block(const float *x, int tries, uint8_t *L) {
  float w[k_block];
  for (int j = 0; j < k_block; ++j) w[j] = x[j] * x[j];
  float amax = 0, max = 0;
  for (int j = 0; j < k_block; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < k_zero_eps) return 0.0f;
  float sum_qx, sum_q2;
  const float d0 = tries > 0 ? -max / k_book[0] : max / k_book[0];
  code_block(x, w, 1 / d0, L, &sum_qx, &sum_q2);
  float d = sum_qx / sum_q2;
  float best = d * sum_qx;
  for (int t = -tries; t <= tries; ++t) {
    code_block(x, w, (t + k_book[0]) / max, nullptr, &sum_qx, &sum_q2);
    if (sum_q2 > 0 && sum_qx * sum_qx > best * sum_q2) {
      d = sum_qx / sum_q2;
      best = d * sum_qx;
    }
  }
  return d;
}

// Codes of one block against scale d (0 gives the entry nearest 0).
void code_against(const float *x, float d, uint8_t *L) {
  const float id = d != 0.0f ? 1 / d : 0.0f;
  for (int j = 0; j < k_block; ++j) L[j] = static_cast<uint8_t>(nearest_entry(id * x[j]));
}

void pack_nibbles(const uint8_t *L, uint8_t *qs) {
  for (int j = 0; j < k_block / 2; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

void decode_block(const uint8_t *qs, float d, float *y) {
  for (int j = 0; j < k_block / 2; ++j) {
    y[j] = d * static_cast<float>(k_book[qs[j] & 0x0f]);
    y[j + 16] = d * static_cast<float>(k_book[qs[j] >> 4]);
  }
}

}  // namespace

void quantize_iq4_nl(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  // A block of zeros keeps the codes of the block before it (its scale is
  // 0, so they decode to zeros), as the reference's bytes do.
  uint8_t L[k_block] = {};
  for (int64_t b = 0; b < n / k_block; ++b, src += k_block, out += k_nl_bytes) {
    const float d = fit_block(src, 0, L);
    put_f16(out, d);
    pack_nibbles(L, out + 2);
  }
}

// What llama.cpp's file quantizer writes (ggml_quantize_chunk, no importance
// matrix): IQ4_XS's search of 15 further scales per block, then every value
// coded again against the best; a block of zeros gets the entry nearest 0.
void quantize_iq4_nl_file(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  uint8_t L[k_block];
  for (int64_t b = 0; b < n / k_block; ++b, src += k_block, out += k_nl_bytes) {
    const float d = fit_block(src, k_xs_tries, L);
    code_against(src, d, L);
    put_f16(out, d);
    pack_nibbles(L, out + 2);
  }
}

void quantize_iq4_xs(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  constexpr int k_blocks = k_super / k_block;
  for (int64_t b = 0; b < n / k_super; ++b, src += k_super, out += k_xs_bytes) {
    uint8_t L[k_super];
    float scales[k_blocks];
    float max_scale = 0, amax_scale = 0;
    for (int j = 0; j < k_blocks; ++j) {
      scales[j] = fit_block(src + k_block * j, k_xs_tries, L + k_block * j);
      if (std::fabs(scales[j]) > amax_scale) {
        amax_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    // The scale of largest magnitude maps to -32 * d.
    const float d = -max_scale / 32;
    put_f16(out, d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint16_t scales_h = 0;
    uint8_t *scales_l = out + 4;
    std::memset(scales_l, 0, 4);
    for (int j = 0; j < k_blocks; ++j) {
      const int l = std::max(-32, std::min(31, round_nearest(id * scales[j])));
      code_against(src + k_block * j, d * l, L + k_block * j);
      const int ls = l + 32;
      scales_l[j / 2] = static_cast<uint8_t>(scales_l[j / 2] | ((ls & 0x0f) << (4 * (j % 2))));
      scales_h = static_cast<uint16_t>(scales_h | ((ls >> 4) << (2 * j)));
    }
    std::memcpy(out + 2, &scales_h, 2);
    for (int j = 0; j < k_blocks; ++j) pack_nibbles(L + k_block * j, out + 8 + 16 * j);
  }
}

void dequantize_iq4_nl(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_block; ++b, in += k_nl_bytes, dst += k_block) decode_block(in + 2, f16_at(in), dst);
}

void dequantize_iq4_xs(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_super; ++b, in += k_xs_bytes) {
    const float d = f16_at(in);
    uint16_t scales_h;
    std::memcpy(&scales_h, in + 2, 2);
    for (int j = 0; j < k_super / k_block; ++j, dst += k_block) {
      const int ls = ((in[4 + j / 2] >> (4 * (j % 2))) & 0x0f) | (((scales_h >> (2 * j)) & 3) << 4);
      decode_block(in + 8 + 16 * j, d * static_cast<float>(ls - 32), dst);
    }
  }
}

}  // namespace bp::core::quant
