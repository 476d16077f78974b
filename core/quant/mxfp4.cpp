// mxfp4.cpp: MXFP4 (OCP microscaling FP4), 32-value blocks (docs/types.md).
//
//   17 B / 32: u8 e; u8 qs[16]. e is an E8M0 exponent; each 4-bit code is an
//   E2M1 number (sign, 2-bit exponent, 1-bit mantissa: 0, 0.5, 1, 1.5, 2, 3,
//   4, 6). Value = 2^(e - 127) * e2m1(q). Byte i holds value i in its low
//   nibble and value i + 16 in its high one.
//
// Kept as in GGUF: the codes as doubled E2M1 values (integers -12..12) and
// the scale halved, 2^(e - 128). The reference picks e = floor(log2(max
// |x|)) - 2 + 127, so the largest magnitude lands near the top code, and
// each value takes the code of smallest error (the first on ties).
#include <cmath>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr int8_t k_doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
constexpr int k_block = 32;
constexpr int k_bytes = 17;

// 2^(e - 128) as an f32: a subnormal for e < 2.
float half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

int nearest_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(k_doubled_e2m1[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(k_doubled_e2m1[i] * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

void quantize_mxfp4(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_block; ++b, src += k_block, out += k_bytes) {
    float amax = 0.0f;
    for (int j = 0; j < k_block; ++j) {
      if (amax < std::fabs(src[j])) amax = std::fabs(src[j]);
    }
    const uint8_t e = amax > 0.0f ? truncated_low_byte(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = half_scale(e);
    out[0] = e;
    for (int j = 0; j < k_block / 2; ++j) {
      out[1 + j] = static_cast<uint8_t>(nearest_code(src[j], d) | (nearest_code(src[j + 16], d) << 4));
    }
  }
}

void dequantize_mxfp4(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_block; ++b, in += k_bytes, dst += k_block) {
    const float d = half_scale(in[0]);
    for (int j = 0; j < k_block / 2; ++j) {
      dst[j] = k_doubled_e2m1[in[1 + j] & 0x0f] * d;
      dst[j + 16] = k_doubled_e2m1[in[1 + j] >> 4] * d;
    }
  }
}

}  // namespace bp::core::quant
