// quant.h: the one decoder of each quantized block type for the device
// kernels, written in the common subset of GLSL 4.50 and OpenCL C 1.2.
// shaders/vulkan/quant.glsl includes it (glslang's #include) and
// shaders/opencl/quant.cl too (embed_sources.cmake pastes it in). The block
// layouts are docs/ops.md's (the GGUF ones); the core's bp_dequantize is the
// reference the tests compare against.
//
// One type per compilation: BP_QTYPE is its bp_type number (3 Q8_0, 4 Q4_0,
// 5 Q5_0, 6 Q4_K, 7 Q6_K, 8 Q5_K, 9 BF16; also 0 F32 and 1 F16, so a kernel
// written against these decoders serves every weight type). The including
// language defines first:
//   BP_QPTR         where a block starts: a byte offset (GLSL) or a
//                   __global const uchar * (OpenCL); "+ n" moves n bytes
//   BP_Q_WORD(p)    the 4 bytes at p as a little-endian uint, any alignment
//   BP_Q_BYTE(p)    the byte at p as a uint
//   BP_Q_HALF(p)    the f16 at p (2-byte aligned) as a float
//   BP_Q_FLOAT4     its 4-float vector type (vec4, float4)
//   BP_Q_BYTES4(q)  the 4 bytes of uint q as a BP_Q_FLOAT4 of 0..255
//   BP_Q_BITS4(x, y, z, w)  4 uints' bits as a BP_Q_FLOAT4
//   BP_Q_FLOATS4(x, y, z, w)  4 floats as a BP_Q_FLOAT4
//
// Every decoder works on 4 consecutive elements j..j+3 of a block (j a
// multiple of 4), which always share one scale:
//   value(j + i) = bp_q_scale(blk, j) * (q_i - BP_Q_BIAS) - bp_q_min(blk, j)
// where q_i = (bp_q_bits4(blk, j) >> 8 i) & 0xFF is the element's unsigned
// quant. BP_Q_GROUP elements (a multiple of 4) share a scale, so a loop over
// a group reads the scale once. bp_q_values4 (at the end) gives the 4
// values; the kernels decode through it, so BF16, F32 and F16, whose values
// are not byte quants, run through the same kernels: their "blocks" are 4
// values with scale 1, and a row must hold whole ones (K % 4 == 0).

// Q4_K and Q5_K: sub-block s's 6-bit scale (which = 0) or min (which = 4):
// s < 4 keep them in the low 6 bits of bytes s and s + 4 of scales[12]
// (byte 4 of the block); s >= 4 in a nibble of byte s + 4 plus the top 2
// bits of byte s - 4 (scale) or s (min).
#if BP_QTYPE == 6 || BP_QTYPE == 8
uint bp_qk_six_bits(BP_QPTR blk, uint s, uint which) {
  if (s < 4u) return BP_Q_BYTE(blk + 4u + s + which) & 63u;
  const uint low = (BP_Q_BYTE(blk + 4u + s + 4u) >> which) & 15u;
  return low | ((BP_Q_BYTE(blk + 4u + s - 4u + which) >> 6) << 4);
}
float bp_q_scale(BP_QPTR blk, uint j) {
  const float sc = bp_qk_six_bits(blk, j >> 5, 0u);
  return BP_Q_HALF(blk) * sc;
}
float bp_q_min(BP_QPTR blk, uint j) {
  const float m = bp_qk_six_bits(blk, j >> 5, 4u);
  return BP_Q_HALF(blk + 2u) * m;
}
#endif

#if BP_QTYPE == 3  // Q8_0: f16 d, int8 qs[32]; value = d * qs[j]
#define BP_QK 32u
#define BP_Q_BYTES 34u
#define BP_Q_GROUP 32u
#define BP_Q_BIAS 128.0f
// The signed bytes flipped to unsigned (+128): one bias for every type.
uint bp_q_bits4(BP_QPTR blk, uint j) { return BP_Q_WORD(blk + 2u + j) ^ 0x80808080u; }
float bp_q_scale(BP_QPTR blk, uint j) { return BP_Q_HALF(blk); }
float bp_q_min(BP_QPTR blk, uint j) { return 0.0f; }

#elif BP_QTYPE == 4  // Q4_0: f16 d, uint8 qs[16]; element j < 16 in the low nibble of qs[j], j + 16 the high
#define BP_QK 32u
#define BP_Q_BYTES 18u
#define BP_Q_GROUP 32u
#define BP_Q_BIAS 8.0f
uint bp_q_bits4(BP_QPTR blk, uint j) {
  return (BP_Q_WORD(blk + 2u + (j & 15u)) >> ((j >> 4) * 4u)) & 0x0F0F0F0Fu;
}
float bp_q_scale(BP_QPTR blk, uint j) { return BP_Q_HALF(blk); }
float bp_q_min(BP_QPTR blk, uint j) { return 0.0f; }

#elif BP_QTYPE == 5  // Q5_0: f16 d, uint8 qh[4] (bit j: bit 4 of element j), uint8 qs[16] as Q4_0's
#define BP_QK 32u
#define BP_Q_BYTES 22u
#define BP_Q_GROUP 32u
#define BP_Q_BIAS 16.0f
uint bp_q_bits4(BP_QPTR blk, uint j) {
  const uint lo = (BP_Q_WORD(blk + 6u + (j & 15u)) >> ((j >> 4) * 4u)) & 0x0F0F0F0Fu;
  const uint h = (BP_Q_WORD(blk + 2u) >> j) & 15u;  // the fifth bits of elements j..j+3
  return lo | ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
}
float bp_q_scale(BP_QPTR blk, uint j) { return BP_Q_HALF(blk); }
float bp_q_min(BP_QPTR blk, uint j) { return 0.0f; }

#elif BP_QTYPE == 6  // Q4_K: f16 d, f16 dmin, uint8 scales[12], uint8 qs[128]
// 8 sub-blocks of 32 with 6-bit scales and mins (bp_qk_six_bits); qs byte
// c * 32 + l holds element 64 c + l in its low nibble and 64 c + 32 + l in
// its high one.
#define BP_QK 256u
#define BP_Q_BYTES 144u
#define BP_Q_GROUP 32u
#define BP_Q_BIAS 0.0f
uint bp_q_bits4(BP_QPTR blk, uint j) {
  return (BP_Q_WORD(blk + 16u + (j >> 6) * 32u + (j & 31u)) >> (((j >> 5) & 1u) * 4u)) & 0x0F0F0F0Fu;
}

#elif BP_QTYPE == 7  // Q6_K: uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d
// Two halves of 128 elements; in half h, element 128 h + 32 g + l (g < 4,
// l < 32) has its low 4 bits in ql[64 h + 32 (g & 1) + l] (low nibble for
// g < 2, high for g >= 2) and its top 2 bits at bit 2 g of qh[32 h + l].
// Sub-blocks of 16 elements each have a signed 8-bit scale.
#define BP_QK 256u
#define BP_Q_BYTES 210u
#define BP_Q_GROUP 16u
#define BP_Q_BIAS 32.0f
uint bp_q_bits4(BP_QPTR blk, uint j) {
  const uint h = j >> 7, g = (j >> 5) & 3u, l = j & 31u;
  const uint lo = (BP_Q_WORD(blk + h * 64u + (g & 1u) * 32u + l) >> ((g >> 1) * 4u)) & 0x0F0F0F0Fu;
  const uint hi = (BP_Q_WORD(blk + 128u + h * 32u + l) >> (g * 2u)) & 0x03030303u;
  return lo | (hi << 4);
}
float bp_q_scale(BP_QPTR blk, uint j) {
  const uint s = BP_Q_BYTE(blk + 192u + (j >> 4));
  const float low = s & 127u, sign = s & 128u;  // two's complement: s - 256 when bit 7 is set
  return BP_Q_HALF(blk + 208u) * (low - sign);
}
float bp_q_min(BP_QPTR blk, uint j) { return 0.0f; }

#elif BP_QTYPE == 8  // Q5_K: f16 d, f16 dmin, uint8 scales[12], uint8 qh[32], uint8 qs[128]
// Q4_K's scales, mins and low nibbles (qs at byte 48); the fifth bit of
// element j is bit j / 32 of qh[j % 32].
#define BP_QK 256u
#define BP_Q_BYTES 176u
#define BP_Q_GROUP 32u
#define BP_Q_BIAS 0.0f
uint bp_q_bits4(BP_QPTR blk, uint j) {
  const uint lo = (BP_Q_WORD(blk + 48u + (j >> 6) * 32u + (j & 31u)) >> (((j >> 5) & 1u) * 4u)) & 0x0F0F0F0Fu;
  const uint hi = (BP_Q_WORD(blk + 16u + (j & 31u)) >> (j >> 5)) & 0x01010101u;
  return lo | (hi << 4);
}

#elif BP_QTYPE == 9 || BP_QTYPE == 0 || BP_QTYPE == 1  // BF16, F32, F16: "blocks" of 4 values
#define BP_QK 4u
#define BP_Q_BYTES (BP_QTYPE == 0 ? 16u : 8u)
#define BP_Q_GROUP 4u
#define BP_Q_BIAS 0.0f
float bp_q_scale(BP_QPTR blk, uint j) { return 1.0f; }
float bp_q_min(BP_QPTR blk, uint j) { return 0.0f; }

#else
#error "quant.h: BP_QTYPE must be a weight bp_type (0, 1, 3..9)"
#endif

// Elements j..j+3 of the block at |blk| whose group has scale |sc| and min
// |mn| (bp_q_scale, bp_q_min of j's group).
#if BP_QTYPE == 9
BP_Q_FLOAT4 bp_q_values4(BP_QPTR blk, uint j, float sc, float mn) {
  const uint lo = BP_Q_WORD(blk + 2u * j), hi = BP_Q_WORD(blk + 2u * j + 4u);
  return BP_Q_BITS4(lo << 16, lo & 0xFFFF0000u, hi << 16, hi & 0xFFFF0000u);
}
#elif BP_QTYPE == 0
BP_Q_FLOAT4 bp_q_values4(BP_QPTR blk, uint j, float sc, float mn) {
  return BP_Q_BITS4(BP_Q_WORD(blk + 4u * j), BP_Q_WORD(blk + 4u * j + 4u), BP_Q_WORD(blk + 4u * j + 8u),
                    BP_Q_WORD(blk + 4u * j + 12u));
}
#elif BP_QTYPE == 1
BP_Q_FLOAT4 bp_q_values4(BP_QPTR blk, uint j, float sc, float mn) {
  return BP_Q_FLOATS4(BP_Q_HALF(blk + 2u * j), BP_Q_HALF(blk + 2u * j + 2u), BP_Q_HALF(blk + 2u * j + 4u),
                      BP_Q_HALF(blk + 2u * j + 6u));
}
#else
BP_Q_FLOAT4 bp_q_values4(BP_QPTR blk, uint j, float sc, float mn) {
  return sc * (BP_Q_BYTES4(bp_q_bits4(blk, j)) - BP_Q_BIAS) - mn;
}
#endif
