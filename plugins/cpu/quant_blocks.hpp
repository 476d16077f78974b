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
//   Q6_K (210 B / 256): u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d;
//       value d * scales[i / 16] * (q - 32); in half h (128 values), value
//       32 t + l (t < 4) has its low 4 bits in ql[64 h + 32 (t & 1) + l]
//       (low nibble for t < 2, high for t >= 2) and its top 2 bits at bit
//       2 t of qh[32 h + l]
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
constexpr int kQ6KQhOff = 128, kQ6KScalesOff = 192, kQ6KDOff = 208;

}  // namespace bp::cpu::qblock

#endif  // BP_PLUGIN_CPU_QUANT_BLOCKS_HPP_
