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

// Byte offsets inside the blocks.
constexpr int kQ5QhOff = 2, kQ5QsOff = 6;
constexpr int kQ4KDminOff = 2, kQ4KScalesOff = 4, kQ4KQsOff = 16;
constexpr int kQ5KQhOff = 16, kQ5KQsOff = 48;  // d, dmin and scales as Q4_K
constexpr int kQ6KQhOff = 128, kQ6KScalesOff = 192, kQ6KDOff = 208;

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
