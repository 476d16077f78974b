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

// The 2-bit code of value |i| (Q2_K, Q3_K's low bits).
int code2(const uint8_t *qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3; }

// 32 values d * book[q] from 16 bytes of nibbles (value i low, i + 16 high).
void book_block(const uint8_t *qs, float d, const int8_t *book, float *y) {
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>(book[qs[i] & 0xF]);
    y[i + 16] = d * static_cast<float>(book[qs[i] >> 4]);
  }
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
    case qtype::q4_1: {
      const float d = f16(b), m = f16(b + kQ41MOff);
      for (int i = 0; i < 16; ++i) {
        y[i] = static_cast<float>(b[kQ41QsOff + i] & 0xF) * d + m;
        y[i + 16] = static_cast<float>(b[kQ41QsOff + i] >> 4) * d + m;
      }
      break;
    }
    case qtype::q5_1: {
      const float d = f16(b), m = f16(b + kQ41MOff);
      const uint32_t qh = u32_at(b + kQ51QhOff);
      const uint8_t *qs = b + kQ51QsOff;
      for (int i = 0; i < 16; ++i) {
        const int lo = (qs[i] & 0xF) | static_cast<int>(((qh >> i) & 1u) << 4);
        const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
        y[i] = static_cast<float>(lo) * d + m;
        y[i + 16] = static_cast<float>(hi) * d + m;
      }
      break;
    }
    case qtype::q2_k: {
      const float d = f16(b + kQ2KDOff), dmin = f16(b + kQ2KDminOff);
      for (int i = 0; i < 256; ++i) {
        const int g = i / 16;
        const float dl = d * static_cast<float>(b[g] & 0xF), ml = dmin * static_cast<float>(b[g] >> 4);
        y[i] = dl * static_cast<float>(code2(b + kQ2KQsOff, i)) - ml;
      }
      break;
    }
    case qtype::q3_k: {
      const float d = f16(b + kQ3KDOff);
      for (int i = 0; i < 256; ++i) {
        const float dl = d * static_cast<float>(q3k_scale(b + kQ3KScalesOff, i / 16) - 32);
        const int high = (b[i % 32] >> (i / 32)) & 1;
        y[i] = dl * static_cast<float>(code2(b + kQ3KQsOff, i) - (high ? 0 : 4));
      }
      break;
    }
    case qtype::iq4_nl:
      book_block(b + 2, f16(b), kIq4Book, y);
      break;
    case qtype::iq4_xs:
      for (int j = 0; j < 8; ++j)
        book_block(b + kIq4XsQsOff + 16 * j, f16(b) * static_cast<float>(iq4xs_scale(b, j) - 32), kIq4Book, y + 32 * j);
      break;
    case qtype::mxfp4:
      book_block(b + 1, e8m0_half(b[0]), kMxfp4Doubled, y);
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

// Q4_1 and Q5_1 as the reference fits them: the block's range in 2^bits - 1
// steps from its lowest value, codes rounded half up.
void quant_range(const float *x, uint8_t *b, int top, uint8_t *codes) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float d = (hi - lo) / static_cast<float>(top), id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  put_f16(b + kQ41MOff, lo);
  for (int i = 0; i < 32; ++i)
    codes[i] = static_cast<uint8_t>(std::min(top, static_cast<int>(trunc_i8((x[i] - lo) * id + 0.5f))));
}

void quant_q4_1(const float *x, uint8_t *b) {
  uint8_t c[32];
  quant_range(x, b, 15, c);
  for (int i = 0; i < 16; ++i) b[kQ41QsOff + i] = static_cast<uint8_t>(c[i] | (c[i + 16] << 4));
}

void quant_q5_1(const float *x, uint8_t *b) {
  uint8_t c[32];
  quant_range(x, b, 31, c);
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    b[kQ51QsOff + i] = static_cast<uint8_t>((c[i] & 0xF) | ((c[i + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>(c[i] >> 4) << i;
    qh |= static_cast<uint32_t>(c[i + 16] >> 4) << (i + 16);
  }
  std::memcpy(b + kQ51QhOff, &qh, sizeof qh);
}

// Packs 256 2-bit codes as Q2_K's and Q3_K's qs.
void pack_code2(const uint8_t *c, uint8_t *qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t *v = c + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>((v[0] & 3) | ((v[32] & 3) << 2) | ((v[64] & 3) << 4) | ((v[96] & 3) << 6));
    }
}

// Q2_K: each group's range [min(0, lowest), highest] in 3 steps; steps and
// minimums in 4 bits against the block's largest, the step rounded up.
void quant_q2_k(const float *x, uint8_t *b) {
  float step[16], low[16], max_step = 0.0f, max_low = 0.0f;
  for (int g = 0; g < 16; ++g) {
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < 16; ++i) {
      lo = std::min(lo, x[16 * g + i]);
      hi = std::max(hi, x[16 * g + i]);
    }
    step[g] = (hi - lo) / 3.0f;
    low[g] = -lo;
    max_step = std::max(max_step, step[g]);
    max_low = std::max(max_low, low[g]);
  }
  put_f16(b + kQ2KDOff, max_step / 15.0f);
  put_f16(b + kQ2KDminOff, max_low / 15.0f);
  const float d = f16(b + kQ2KDOff), dmin = f16(b + kQ2KDminOff);
  uint8_t codes[256];
  for (int g = 0; g < 16; ++g) {
    const int sc = d > 0.0f ? std::min(15, static_cast<int>(std::ceil(step[g] / d))) : 0;
    const int m = dmin > 0.0f ? clamp_round(low[g] / dmin, 0, 15) : 0;
    b[g] = static_cast<uint8_t>(sc | (m << 4));
    const float dg = d * static_cast<float>(sc), mg = dmin * static_cast<float>(m);
    const float inv = dg > 0.0f ? 1.0f / dg : 0.0f;
    for (int i = 0; i < 16; ++i)
      codes[16 * g + i] = static_cast<uint8_t>(clamp_round((x[16 * g + i] + mg) * inv, 0, 3));
  }
  pack_code2(codes, b + kQ2KQsOff);
}

// Q3_K: each group scaled so its largest magnitude maps to -4, the group
// scales in 6 bits against the largest, rounded away from zero.
void quant_q3_k(const float *x, uint8_t *b) {
  float gscale[16], max_abs = 0.0f;
  for (int g = 0; g < 16; ++g) {
    gscale[g] = signed_max(x + 16 * g, 16) / -4.0f;
    max_abs = std::max(max_abs, std::fabs(gscale[g]));
  }
  put_f16(b + kQ3KDOff, max_abs / 31.0f);
  const float d = f16(b + kQ3KDOff);
  uint8_t *s = b + kQ3KScalesOff;
  std::memset(s, 0, 12);
  uint8_t codes[256];
  std::memset(b, 0, 32);  // hmask
  for (int g = 0; g < 16; ++g) {
    const float r = d > 0.0f ? gscale[g] / d : 0.0f;
    const int sc = clamp_round(r < 0.0f ? std::floor(r) : std::ceil(r), -32, 31);
    const int l = sc + 32;
    if (g < 8) {
      s[g] = static_cast<uint8_t>(s[g] | (l & 0xF));
    } else {
      s[g - 8] = static_cast<uint8_t>(s[g - 8] | ((l & 0xF) << 4));
    }
    s[8 + g % 4] = static_cast<uint8_t>(s[8 + g % 4] | ((l >> 4) << (2 * (g / 4))));
    const float step = d * static_cast<float>(sc);
    for (int i = 0; i < 16; ++i) {
      const int v = 16 * g + i;
      const int q = (step != 0.0f ? clamp_round(x[v] / step, -4, 3) : 0) + 4;
      if (q > 3) b[v % 32] = static_cast<uint8_t>(b[v % 32] | (1 << (v / 32)));
      codes[v] = static_cast<uint8_t>(q & 3);
    }
  }
  pack_code2(codes, b + kQ3KQsOff);
}

// The codebook entry nearest v (the first on ties; the book is sorted).
int nearest_entry(const int8_t *book, float v) {
  int best = 0;
  float best_err = std::fabs(v - static_cast<float>(book[0]));
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(v - static_cast<float>(book[k]));
    if (err < best_err) {
      best = k;
      best_err = err;
    }
  }
  return best;
}

void book_codes(const float *x, float d, const int8_t *book, uint8_t *qs) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < 16; ++i)
    qs[i] = static_cast<uint8_t>(nearest_entry(book, x[i] * id) | (nearest_entry(book, x[i + 16] * id) << 4));
}

// IQ4_NL: the largest magnitude onto the book's end -127.
void quant_iq4_nl(const float *x, uint8_t *b) {
  put_f16(b, signed_max(x, 32) / -127.0f);
  book_codes(x, f16(b), kIq4Book, b + 2);
}

// IQ4_XS: each block's scale as IQ4_NL's, the 8 scales in 6 bits against
// the largest, rounded away from zero.
void quant_iq4_xs(const float *x, uint8_t *b) {
  float bscale[8], max_abs = 0.0f;
  for (int j = 0; j < 8; ++j) {
    bscale[j] = signed_max(x + 32 * j, 32) / -127.0f;
    max_abs = std::max(max_abs, std::fabs(bscale[j]));
  }
  put_f16(b, max_abs / 31.0f);
  const float d = f16(b);
  uint16_t scales_h = 0;
  std::memset(b + 4, 0, 4);
  for (int j = 0; j < 8; ++j) {
    const float r = d > 0.0f ? bscale[j] / d : 0.0f;
    const int sc = clamp_round(r < 0.0f ? std::floor(r) : std::ceil(r), -32, 31);
    const int l = sc + 32;
    b[4 + j / 2] = static_cast<uint8_t>(b[4 + j / 2] | ((l & 0xF) << (4 * (j % 2))));
    scales_h = static_cast<uint16_t>(scales_h | ((l >> 4) << (2 * j)));
    book_codes(x + 32 * j, d * static_cast<float>(sc), kIq4Book, b + kIq4XsQsOff + 16 * j);
  }
  std::memcpy(b + 2, &scales_h, sizeof scales_h);
}

// MXFP4 as the reference fits it: the power of two that puts the largest
// magnitude just under the top code, each value's nearest code.
void quant_mxfp4(const float *x, uint8_t *b) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
  b[0] = static_cast<uint8_t>(std::min(254.0f, std::max(0.0f, e)));
  const float d = e8m0_half(b[0]);
  auto nearest = [d](float v) {
    int best = 0;
    float best_err = std::fabs(static_cast<float>(kMxfp4Doubled[0]) * d - v);
    for (int k = 1; k < 16; ++k) {
      const float err = std::fabs(static_cast<float>(kMxfp4Doubled[k]) * d - v);
      if (err < best_err) {
        best = k;
        best_err = err;
      }
    }
    return best;
  };
  for (int i = 0; i < 16; ++i) b[1 + i] = static_cast<uint8_t>(nearest(x[i]) | (nearest(x[i + 16]) << 4));
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
      case qtype::q4_1:
        quant_q4_1(x, blk);
        break;
      case qtype::q5_1:
        quant_q5_1(x, blk);
        break;
      case qtype::q2_k:
        quant_q2_k(x, blk);
        break;
      case qtype::q3_k:
        quant_q3_k(x, blk);
        break;
      case qtype::iq4_nl:
        quant_iq4_nl(x, blk);
        break;
      case qtype::iq4_xs:
        quant_iq4_xs(x, blk);
        break;
      case qtype::mxfp4:
        quant_mxfp4(x, blk);
        break;
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
