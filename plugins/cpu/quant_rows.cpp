// quant_rows.cpp: rows of the GGUF block formats to floats and back
// (GET_ROWS, CPY), and the int8 columns of b for MUL_MAT's integer dots.
// Plain C++ for the baseline ISA: the dequantizer's formulas must round as
// the reference's do (no fused multiply-adds here), and GET_ROWS and CPY
// are not where the time goes.
#include <algorithm>
#include <cmath>

#include "backplane/tensor.h"
#include "quant.hpp"
#include "quant_blocks.hpp"

namespace bp::cpu {
namespace {

using namespace qblock;

float f16(const uint8_t *p) { return bp_fp16_to_fp32(u16_at(p)); }
void put_f16(uint8_t *p, float v) {
  const uint16_t h = bp_fp32_to_fp16(v);
  std::memcpy(p, &h, sizeof h);
}

void dequant_block(qtype q, const uint8_t *b, float *y) {
  switch (q) {
    case qtype::q8_0: {
      const float d = f16(b);
      for (int i = 0; i < 32; ++i) y[i] = static_cast<float>(static_cast<int8_t>(b[2 + i])) * d;
      break;
    }
    case qtype::q4_0: {
      const float d = f16(b);
      for (int i = 0; i < 16; ++i) {
        y[i] = static_cast<float>((b[2 + i] & 0xF) - 8) * d;
        y[i + 16] = static_cast<float>((b[2 + i] >> 4) - 8) * d;
      }
      break;
    }
    case qtype::q5_0: {
      const float d = f16(b);
      const uint32_t qh = u32_at(b + kQ5QhOff);
      const uint8_t *qs = b + kQ5QsOff;
      for (int i = 0; i < 16; ++i) {
        const int lo = (qs[i] & 0xF) | static_cast<int>(((qh >> i) & 1u) << 4);
        const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
        y[i] = static_cast<float>(lo - 16) * d;
        y[i + 16] = static_cast<float>(hi - 16) * d;
      }
      break;
    }
    case qtype::q4_k: {
      const float d = f16(b), dmin = f16(b + kQ4KDminOff);
      const uint8_t *sc = b + kQ4KScalesOff, *qs = b + kQ4KQsOff;
      for (int c = 0; c < 4; ++c) {
        int s0, m0, s1, m1;
        scale_min(sc, 2 * c, &s0, &m0);
        scale_min(sc, 2 * c + 1, &s1, &m1);
        const float d0 = d * static_cast<float>(s0), n0 = dmin * static_cast<float>(m0);
        const float d1 = d * static_cast<float>(s1), n1 = dmin * static_cast<float>(m1);
        for (int i = 0; i < 32; ++i) {
          y[64 * c + i] = d0 * static_cast<float>(qs[32 * c + i] & 0xF) - n0;
          y[64 * c + 32 + i] = d1 * static_cast<float>(qs[32 * c + i] >> 4) - n1;
        }
      }
      break;
    }
    case qtype::q5_k: {
      const float d = f16(b), dmin = f16(b + kQ4KDminOff);
      const uint8_t *sc = b + kQ4KScalesOff, *qh = b + kQ5KQhOff, *qs = b + kQ5KQsOff;
      for (int c = 0; c < 4; ++c) {
        int s0, m0, s1, m1;
        scale_min(sc, 2 * c, &s0, &m0);
        scale_min(sc, 2 * c + 1, &s1, &m1);
        const float d0 = d * static_cast<float>(s0), n0 = dmin * static_cast<float>(m0);
        const float d1 = d * static_cast<float>(s1), n1 = dmin * static_cast<float>(m1);
        for (int i = 0; i < 32; ++i) {
          const int lo = (qs[32 * c + i] & 0xF) | (((qh[i] >> (2 * c)) & 1) << 4);
          const int hi = (qs[32 * c + i] >> 4) | (((qh[i] >> (2 * c + 1)) & 1) << 4);
          y[64 * c + i] = d0 * static_cast<float>(lo) - n0;
          y[64 * c + 32 + i] = d1 * static_cast<float>(hi) - n1;
        }
      }
      break;
    }
    case qtype::bf16:
      y[0] = bf16_to_f32(u16_at(b));
      break;
    case qtype::q6_k: {
      const float d = f16(b + kQ6KDOff);
      const uint8_t *ql = b, *qh = b + kQ6KQhOff;
      const int8_t *sc = reinterpret_cast<const int8_t *>(b + kQ6KScalesOff);
      for (int i = 0; i < 256; ++i) {
        const int h = i / 128, t = (i % 128) / 32, l = i % 32;
        const uint8_t lo = ql[64 * h + 32 * (t & 1) + l];
        const int q = ((t < 2 ? lo & 0xF : lo >> 4) | (((qh[32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
        y[i] = d * static_cast<float>(sc[i / 16]) * static_cast<float>(q);
      }
      break;
    }
  }
}

// A float to int8 as the reference's cast does on x86 (truncated to int32,
// then its low byte), without the undefined conversion: NaN, infinities and
// values past int32 give 0.
int8_t trunc_i8(float v) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return 0;
  return static_cast<int8_t>(static_cast<int32_t>(v));
}

// The reference rounding of the 32-value formats.
void quant_q8_0(const float *x, uint8_t *b) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(trunc_i8(std::round(x[i] * id)));
}

// The value of largest magnitude (the first one on ties), with its sign.
float signed_max(const float *x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i)
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  return max;
}

void quant_q4_0(const float *x, uint8_t *b) {
  const float d = signed_max(x, 32) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (int i = 0; i < 16; ++i) {
    const int lo = std::min(15, static_cast<int>(trunc_i8(x[i] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(trunc_i8(x[i + 16] * id + 8.5f)));
    b[2 + i] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void quant_q5_0(const float *x, uint8_t *b) {
  const float d = signed_max(x, 32) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    const int lo = std::min(31, static_cast<int>(trunc_i8(x[i] * id + 16.5f)));
    const int hi = std::min(31, static_cast<int>(trunc_i8(x[i + 16] * id + 16.5f)));
    b[kQ5QsOff + i] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    qh |= static_cast<uint32_t>((lo >> 4) & 1) << i;
    qh |= static_cast<uint32_t>((hi >> 4) & 1) << (i + 16);
  }
  std::memcpy(b + kQ5QhOff, &qh, sizeof qh);
}

int clamp_round(float v, int lo, int hi) {
  if (!(v == v)) return lo;
  return static_cast<int>(std::min(static_cast<float>(hi), std::max(static_cast<float>(lo), std::nearbyint(v))));
}

// Q4_K and Q5_K: each sub-block's range [min(0, lowest), highest] in
// |nmax| steps; the steps and minimums in 6 bits against the block's
// largest (d, dmin). codes[i] gets value i's code (0..nmax).
void quant_kmin(const float *x, uint8_t *b, int nmax, uint8_t *codes) {
  float step[8], low[8];
  float max_step = 0.0f, max_low = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < 32; ++i) {
      lo = std::min(lo, x[32 * j + i]);
      hi = std::max(hi, x[32 * j + i]);
    }
    step[j] = (hi - lo) / static_cast<float>(nmax);
    low[j] = -lo;
    max_step = std::max(max_step, step[j]);
    max_low = std::max(max_low, low[j]);
  }
  put_f16(b, max_step / 63.0f);
  put_f16(b + kQ4KDminOff, max_low / 63.0f);
  const float d = f16(b), dmin = f16(b + kQ4KDminOff);
  uint8_t *s = b + kQ4KScalesOff;
  std::memset(s, 0, 12);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    // Round the step up so the sub-block's highest value stays within nmax steps.
    sc[j] = d > 0.0f ? std::min(63, static_cast<int>(std::ceil(step[j] / d))) : 0;
    m[j] = dmin > 0.0f ? clamp_round(low[j] / dmin, 0, 63) : 0;
    if (j < 4) {
      s[j] |= static_cast<uint8_t>(sc[j]);
      s[j + 4] |= static_cast<uint8_t>(m[j]);
    } else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
  for (int j = 0; j < 8; ++j) {
    const float dj = d * static_cast<float>(sc[j]), mj = dmin * static_cast<float>(m[j]);
    const float inv = dj > 0.0f ? 1.0f / dj : 0.0f;
    for (int i = 0; i < 32; ++i)
      codes[32 * j + i] = static_cast<uint8_t>(clamp_round((x[32 * j + i] + mj) * inv, 0, nmax));
  }
}

// Sub-blocks 2c and 2c + 1 share the 32 bytes of chunk c: low and high nibbles.
void quant_q4_k(const float *x, uint8_t *b) {
  uint8_t q[256];
  quant_kmin(x, b, 15, q);
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 32; ++i)
      b[kQ4KQsOff + 32 * c + i] = static_cast<uint8_t>(q[64 * c + i] | (q[64 * c + 32 + i] << 4));
}

// As Q4_K, the fifth bit of sub-block j's value i at bit j of qh[i].
void quant_q5_k(const float *x, uint8_t *b) {
  uint8_t q[256];
  quant_kmin(x, b, 31, q);
  uint8_t *qh = b + kQ5KQhOff;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 32; ++i) {
      const int lo = q[64 * c + i], hi = q[64 * c + 32 + i];
      b[kQ5KQsOff + 32 * c + i] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      qh[i] = static_cast<uint8_t>(qh[i] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
    }
}

// Q6_K: each group of 16 values scaled so its largest magnitude maps to
// -32 (as the 32-value formats do), the group scales in int8 against the
// largest, rounded up in magnitude: every value is within one step of the
// group's grid (half a step but for the largest magnitude's opposite).
void quant_q6_k(const float *x, uint8_t *b) {
  float gscale[16], max_abs = 0.0f;
  for (int g = 0; g < 16; ++g) {
    gscale[g] = signed_max(x + 16 * g, 16) / -32.0f;
    max_abs = std::max(max_abs, std::fabs(gscale[g]));
  }
  put_f16(b + kQ6KDOff, max_abs / 127.0f);
  const float d = f16(b + kQ6KDOff);
  int8_t *sc = reinterpret_cast<int8_t *>(b + kQ6KScalesOff);
  uint8_t *ql = b, *qh = b + kQ6KQhOff;
  std::memset(ql, 0, 128 + 64);
  // Each group's scale rounded away from zero, so its values stay on the grid.
  for (int g = 0; g < 16; ++g) {
    const float r = d > 0.0f ? gscale[g] / d : 0.0f;
    sc[g] = static_cast<int8_t>(clamp_round(r < 0.0f ? std::floor(r) : std::ceil(r), -127, 127));
  }
  for (int i = 0; i < 256; ++i) {
    const float step = d * static_cast<float>(sc[i / 16]);
    const int q = (step != 0.0f ? clamp_round(x[i] / step, -32, 31) : 0) + 32;
    const int h = i / 128, t = (i % 128) / 32, l = i % 32;
    uint8_t &lo = ql[64 * h + 32 * (t & 1) + l];
    lo = static_cast<uint8_t>(lo | (t < 2 ? (q & 0xF) : (q & 0xF) << 4));
    qh[32 * h + l] = static_cast<uint8_t>(qh[32 * h + l] | ((q >> 4) << (2 * t)));
  }
}

}  // namespace

void dequantize_row(qtype q, const void *src, float *dst, int64_t n) {
  const qformat f = format_of(q);
  const auto *b = static_cast<const uint8_t *>(src);
  if (q == qtype::bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(u16_at(b + 2 * i));
    return;
  }
  for (int64_t i = 0; i < n / f.block_values; ++i) dequant_block(q, b + i * f.block_bytes, dst + i * f.block_values);
}

void quantize_row(qtype q, const float *src, void *dst, int64_t n) {
  const qformat f = format_of(q);
  auto *b = static_cast<uint8_t *>(dst);
  for (int64_t i = 0; i < n / f.block_values; ++i) {
    const float *x = src + i * f.block_values;
    uint8_t *blk = b + i * f.block_bytes;
    switch (q) {
      case qtype::q8_0:
        quant_q8_0(x, blk);
        break;
      case qtype::q4_0:
        quant_q4_0(x, blk);
        break;
      case qtype::q5_0:
        quant_q5_0(x, blk);
        break;
      case qtype::q4_k:
        quant_q4_k(x, blk);
        break;
      case qtype::q6_k:
        quant_q6_k(x, blk);
        break;
      case qtype::q5_k:
        quant_q5_k(x, blk);
        break;
      case qtype::bf16: {
        const uint16_t h = f32_to_bf16(x[0]);
        std::memcpy(blk, &h, sizeof h);
        break;
      }
    }
  }
}

float quantize_act_block(const float *x, int8_t *q) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f, id = d != 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(clamp_round(x[i] * id, -127, 127));
  return d;
}

void quantize_act_col(const float *src, int64_t K, void *col) {
  static const act_quantizers *simd = act_quantizers_avx2();
  if (simd) return simd->act_col(src, K, col);
  const act_col_parts c = act_col_at(col, K);
  for (int64_t j = 0; j < c.blocks; ++j) {
    if (j >= c.full) {
      act_col_zero_block(c, j);
      continue;
    }
    int8_t *q = c.qs + 32 * j;
    const float dj = quantize_act_block(src + 32 * j, q);
    int s0 = 0, s1 = 0;
    for (int i = 0; i < 32; ++i) (i < 16 ? s0 : s1) += q[i];
    c.d[j] = dj;
    c.lo[j] = dj * static_cast<float>(s0);
    c.hi[j] = dj * static_cast<float>(s1);
  }
}

}  // namespace bp::cpu
