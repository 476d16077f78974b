// block32.cpp: the 32-value block types Q8_0, Q4_0 and Q5_0 (docs/types.md).
//
// Each block is one f16 scale d and 32 small integers q with value q * d
// (Q8_0) or (q - 8) * d and (q - 16) * d (Q4_0, Q5_0, stored unsigned).
// Q4_0 and Q5_0 take d from the value of largest magnitude, keeping its
// sign, so that value maps exactly onto the end of the range (-8 or -16)
// that has no positive twin.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr int k_block = 32;

// The value of largest magnitude in x[0..31], with its sign; the first one
// on ties.
float signed_absmax(const float *x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < k_block; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// The low byte of the float truncated toward zero, as the x86 conversion
// the reference compiles to gives it; a NaN (from an infinite input, whose
// block scale is infinite) gives 0 there, and here without undefined
// behaviour. Finite inputs never leave -128..127 on the way in.
int8_t truncate_to_int8(float v) {
  if (!(v > -129.0f && v < 128.0f)) return 0;
  return static_cast<int8_t>(static_cast<int>(v));
}

// Offset-binary code of x * id in 0..top: truncation of x * id + bias + 0.5
// is round-half-up for the non-negative sums that occur, clamped at |top|
// because the value of largest magnitude can land one past it.
int offset_code(float x, float id, float bias, int top) {
  const float shifted = x * id + (bias + 0.5f);
  return std::min(top, static_cast<int>(truncate_to_int8(shifted)));
}

}  // namespace

void quantize_q8_0(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_block; ++b, src += k_block, out += 34) {
    float amax = 0.0f;
    for (int j = 0; j < k_block; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = bp_fp32_to_fp16(d);
    std::memcpy(out, &dh, 2);
    for (int j = 0; j < k_block; ++j) out[2 + j] = static_cast<uint8_t>(truncate_to_int8(std::round(src[j] * id)));
  }
}

void quantize_q4_0(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_block; ++b, src += k_block, out += 18) {
    const float d = signed_absmax(src) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = bp_fp32_to_fp16(d);
    std::memcpy(out, &dh, 2);
    // Byte j: element j in the low nibble, element j + 16 in the high one.
    for (int j = 0; j < k_block / 2; ++j) {
      const int lo = offset_code(src[j], id, 8.0f, 15);
      const int hi = offset_code(src[j + 16], id, 8.0f, 15);
      out[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q5_0(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_block; ++b, src += k_block, out += 22) {
    const float d = signed_absmax(src) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = bp_fp32_to_fp16(d);
    std::memcpy(out, &dh, 2);
    // Low four bits as Q4_0; bit 4 of element j is bit j of the
    // little-endian 32-bit word qh.
    uint32_t qh = 0;
    for (int j = 0; j < k_block / 2; ++j) {
      const int lo = offset_code(src[j], id, 16.0f, 31);
      const int hi = offset_code(src[j + 16], id, 16.0f, 31);
      out[6 + j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
    }
    const uint8_t qh_bytes[4] = {static_cast<uint8_t>(qh), static_cast<uint8_t>(qh >> 8),
                                 static_cast<uint8_t>(qh >> 16), static_cast<uint8_t>(qh >> 24)};
    std::memcpy(out + 2, qh_bytes, 4);
  }
}

void dequantize_q8_0(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_block; ++b, in += 34, dst += k_block) {
    uint16_t dh;
    std::memcpy(&dh, in, 2);
    const float d = bp_fp16_to_fp32(dh);
    for (int j = 0; j < k_block; ++j) dst[j] = static_cast<float>(static_cast<int8_t>(in[2 + j])) * d;
  }
}

void dequantize_q4_0(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_block; ++b, in += 18, dst += k_block) {
    uint16_t dh;
    std::memcpy(&dh, in, 2);
    const float d = bp_fp16_to_fp32(dh);
    for (int j = 0; j < k_block / 2; ++j) {
      dst[j] = static_cast<float>((in[2 + j] & 0x0f) - 8) * d;
      dst[j + 16] = static_cast<float>((in[2 + j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q5_0(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_block; ++b, in += 22, dst += k_block) {
    uint16_t dh;
    std::memcpy(&dh, in, 2);
    const float d = bp_fp16_to_fp32(dh);
    const uint32_t qh = in[2] | (uint32_t)in[3] << 8 | (uint32_t)in[4] << 16 | (uint32_t)in[5] << 24;
    for (int j = 0; j < k_block / 2; ++j) {
      const int lo = (in[6 + j] & 0x0f) | (int)((qh >> j) & 1) << 4;
      const int hi = (in[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
      dst[j] = static_cast<float>(lo - 16) * d;
      dst[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

}  // namespace bp::core::quant
