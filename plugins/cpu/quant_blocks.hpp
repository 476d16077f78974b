// quant_blocks.hpp: byte-level access to the GGUF blocks (quant.hpp), shared
// by the row (de)quantizers and the kernels.
//
//   Q8_0 (34 B / 32): f16 d; int8 q[32];               value d * q
//   Q4_0 (18 B / 32): f16 d; u8 qs[16];                value d * (q - 8),
//       q of value i < 16 in the low nibble of qs[i], of i + 16 in the high
//   Q5_0 (22 B / 32): f16 d; u8 qh[4]; u8 qs[16];      value d * (q - 16),
//       nibbles as Q4_0, bit i of the little-endian qh is bit 4 of value i
//   Q4_K (144 B / 256): f16 d; f16 dmin; u8 scales[12]; u8 qs[128];
//       sub-block j (32 values) has a 6-bit scale sc and min m (scale_min
//       below); value d * sc * q - dmin * m; qs[32 c + i] holds value
//       64 c + i in its low nibble and 64 c + 32 + i in its high one
//   Q5_K (176 B / 256): f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128];
//       as Q4_K with 5-bit codes: the low 4 bits in qs as Q4_K's, the fifth
//       bit of sub-block j's value i (i < 32) at bit j of qh[i]
//   Q6_K (210 B / 256): u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d;
//       value d * scales[i / 16] * (q - 32); in half h (128 values), value
//       32 t + l (t < 4) has its low 4 bits in ql[64 h + 32 (t & 1) + l]
//       (low nibble for t < 2, high for t >= 2) and its top 2 bits at bit
//       2 t of qh[32 h + l]
//   BF16 (2 B / 1): the top 16 bits of the f32
//   Q4_1 (20 B / 32): f16 d; f16 m; u8 qs[16];          value d * q + m,
//       nibbles as Q4_0
//   Q5_1 (24 B / 32): f16 d; f16 m; u8 qh[4]; u8 qs[16]; value d * q + m,
//       bits as Q5_0
//   Q2_K (84 B / 256): u8 scales[16]; u8 qs[64]; f16 d; f16 dmin;
//       group g (16 values) value d * (scales[g] & 15) * q - dmin *
//       (scales[g] >> 4); 2-bit q of value 128 h + 32 t + l at bits 2 t of
//       qs[32 h + l]
//   Q3_K (110 B / 256): u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d;
//       group g value d * (s_g - 32) * (q - 4), q's low 2 bits as Q2_K's
//       and bit 2 of value v at bit v / 32 of hmask[v % 32]; s_g 6 bits
//       (q3k_scale below)
//   IQ4_NL (18 B / 32): f16 d; u8 qs[16];              value d * kIq4Book[q],
//       nibbles as Q4_0
//   IQ4_XS (136 B / 256): f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128];
//       block j (32 values, 16 qs bytes at 8 + 16 j, nibbles as Q4_0) value
//       d * (ls_j - 32) * kIq4Book[q], ls_j 6 bits (iq4xs_scale below)
//   MXFP4 (17 B / 32): u8 e; u8 qs[16];                 value e8m0_half(e) *
//       kMxfp4Doubled[q], nibbles as Q4_0
#ifndef BP_PLUGIN_CPU_QUANT_BLOCKS_HPP_
#define BP_PLUGIN_CPU_QUANT_BLOCKS_HPP_

#include <cstdint>
#include <cstring>

namespace bp::cpu::qblock {

inline uint16_t u16_at(const void *p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t u32_at(const void *p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Q4_K's sub-block |j| (0..7) 6-bit scale and min from its scales[12].
inline void scale_min(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K's group |g| (0..15) 6-bit scale (32 meaning 0) from its scales[12].
inline int q3k_scale(const uint8_t *s, int g) {
  const int low = g < 8 ? s[g] & 0xF : s[g - 8] >> 4;
  return low | (((s[8 + g % 4] >> (2 * (g / 4))) & 3) << 4);
}
// IQ4_XS's block |j| (0..7) 6-bit scale (32 meaning 0).
inline int iq4xs_scale(const uint8_t *b, int j) {
  const int high = (b[2 + j / 4] >> (2 * (j % 4))) & 3;  // scales_h, little-endian
  return ((b[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (high << 4);
}

// The non-linear codebook of IQ4_NL and IQ4_XS, and MXFP4's E2M1 values
// doubled (so they are integers; its scale is halved to match).
constexpr int8_t kIq4Book[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr int8_t kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// MXFP4's scale 2^(e - 127), halved: 2^(e - 128), subnormal for e < 2.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Byte offsets inside the blocks.
constexpr int kQ5QhOff = 2, kQ5QsOff = 6;
constexpr int kQ4KDminOff = 2, kQ4KScalesOff = 4, kQ4KQsOff = 16;
constexpr int kQ5KQhOff = 16, kQ5KQsOff = 48;  // d, dmin and scales as Q4_K
constexpr int kQ6KQhOff = 128, kQ6KScalesOff = 192, kQ6KDOff = 208;
constexpr int kQ41MOff = 2, kQ41QsOff = 4;
constexpr int kQ51QhOff = 4, kQ51QsOff = 8;
constexpr int kQ2KQsOff = 16, kQ2KDOff = 80, kQ2KDminOff = 82;
constexpr int kQ3KQsOff = 32, kQ3KScalesOff = 96, kQ3KDOff = 108;
constexpr int kIq4XsQsOff = 8;

// The f32 whose top half is |h|.
inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// Round to nearest even on the 16 bits dropped; NaN stays NaN, made quiet.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace bp::cpu::qblock

#endif  // BP_PLUGIN_CPU_QUANT_BLOCKS_HPP_
