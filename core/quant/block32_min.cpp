// block32_min.cpp: Q4_1 and Q5_1, 32-value blocks with a scale and a
// minimum (docs/types.md). Value = d * q + m, q in 0..15 (Q4_1) or 0..31
// (Q5_1, bit 4 of value j at bit j of the little-endian word qh).
//
// The reference fit is the block's range: m = the lowest value, d = (highest
// - lowest) / (2^bits - 1), codes rounded half up from (x - m) / d.
#include <algorithm>
#include <cfloat>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr int k_block = 32;
constexpr int k_q4_1_bytes = 20;
constexpr int k_q5_1_bytes = 24;

struct block_range {
  float d, id, lo;
};

// The block's lowest value and step for |levels| - 1 steps; d and lo are
// written as f16 at out[0] and out[2].
block_range fit_range(const float *x, int levels, uint8_t *out) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < k_block; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  const float d = (hi - lo) / static_cast<float>(levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  put_f16(out + 2, lo);
  return {d, id, lo};
}

}  // namespace

void quantize_q4_1(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_block; ++b, src += k_block, out += k_q4_1_bytes) {
    const block_range r = fit_range(src, 16, out);
    // Byte j: element j in the low nibble, element j + 16 in the high one.
    for (int j = 0; j < k_block / 2; ++j) {
      // The reference keeps the code as int8 and caps it at 15 before the byte store.
      const int lo =
          std::min(15, static_cast<int>(static_cast<int8_t>(truncated_low_byte((src[j] - r.lo) * r.id + 0.5f))));
      const int hi =
          std::min(15, static_cast<int>(static_cast<int8_t>(truncated_low_byte((src[j + 16] - r.lo) * r.id + 0.5f))));
      out[4 + j] = static_cast<uint8_t>(static_cast<uint8_t>(lo) | (static_cast<uint8_t>(hi) << 4));
    }
  }
}

void quantize_q5_1(const float *src, void *dst, int64_t n) {
  auto *out = static_cast<uint8_t *>(dst);
  for (int64_t b = 0; b < n / k_block; ++b, src += k_block, out += k_q5_1_bytes) {
    const block_range r = fit_range(src, 32, out);
    uint32_t qh = 0;
    for (int j = 0; j < k_block / 2; ++j) {
      const uint8_t lo = truncated_low_byte((src[j] - r.lo) * r.id + 0.5f);
      const uint8_t hi = truncated_low_byte((src[j + 16] - r.lo) * r.id + 0.5f);
      out[8 + j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
    }
    const uint8_t qh_bytes[4] = {static_cast<uint8_t>(qh), static_cast<uint8_t>(qh >> 8),
                                 static_cast<uint8_t>(qh >> 16), static_cast<uint8_t>(qh >> 24)};
    std::memcpy(out + 4, qh_bytes, 4);
  }
}

void dequantize_q4_1(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_block; ++b, in += k_q4_1_bytes, dst += k_block) {
    const float d = f16_at(in), m = f16_at(in + 2);
    for (int j = 0; j < k_block / 2; ++j) {
      dst[j] = static_cast<float>(in[4 + j] & 0x0f) * d + m;
      dst[j + 16] = static_cast<float>(in[4 + j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_1(const void *src, float *dst, int64_t n) {
  const auto *in = static_cast<const uint8_t *>(src);
  for (int64_t b = 0; b < n / k_block; ++b, in += k_q5_1_bytes, dst += k_block) {
    const float d = f16_at(in), m = f16_at(in + 2);
    const uint32_t qh = in[4] | (uint32_t)in[5] << 8 | (uint32_t)in[6] << 16 | (uint32_t)in[7] << 24;
    for (int j = 0; j < k_block / 2; ++j) {
      const int lo = (in[8 + j] & 0x0f) | (int)((qh >> j) & 1) << 4;
      const int hi = (in[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

}  // namespace bp::core::quant
