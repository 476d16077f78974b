// quant.glsl: quantized weights for the Vulkan shaders: the block decoders
// of shaders/common/quant.h over 32-bit words, so no 8- or 16-bit storage
// feature is needed and blocks need no alignment (Q8_0's 34 bytes put every
// other block off a word boundary). The including shader defines BP_QTYPE
// (the -D of its variant, CMakeLists.txt) and declares the words: with
// BP_Q_TEXEL, `usamplerBuffer qa4` (an R32UI view: a word a texel;
// lavapipe gathers texel fetches, where it loops over the lanes for a
// storage-buffer load), else `uint qa[]`. Block positions are byte offsets
// into that binding.

#ifdef BP_Q_TEXEL
uint bp_q_load(uint w) { return texelFetch(qa4, int(w)).x; }
#else
uint bp_q_load(uint w) { return qa[w]; }
#endif

// The 4 bytes at byte |o|: one word, or two shifted together when |o| is
// not a multiple of 4 (the second word is then inside the tensor).
uint bp_q_word(uint o) {
  const uint w = o >> 2, s = (o & 3u) * 8u;
  const uint lo = bp_q_load(w);
  return s == 0u ? lo : (lo >> s) | (bp_q_load(w + 1u) << (32u - s));
}

// The bytes of |q| as 4 floats 0..255 (a function, so q is computed once).
vec4 bp_q_bytes4(uint q) { return vec4(uvec4(q, q >> 8, q >> 16, q >> 24) & 255u); }

#define BP_QPTR uint
#define BP_Q_FLOAT4 vec4
#define BP_Q_BYTES4(q) bp_q_bytes4(q)
#define BP_Q_BITS4(x, y, z, w) uintBitsToFloat(uvec4(x, y, z, w))
#define BP_Q_FLOATS4(x, y, z, w) vec4(x, y, z, w)
#define BP_Q_WORD(o) bp_q_word(o)
#define BP_Q_BYTE(o) ((bp_q_load((o) >> 2) >> (((o) & 3u) * 8u)) & 255u)
#define BP_Q_HALF(o) unpackHalf2x16(bp_q_load((o) >> 2) >> (((o) & 2u) * 8u)).x
#include "../common/quant.h"

// Elements k..k+3 (k a multiple of 4) of the quantized row starting at byte
// |row|: the read a's texel fetch is to the f32 shaders.
vec4 bp_q_fetch4(uint row, uint k) {
  const uint blk = row + (k / BP_QK) * BP_Q_BYTES, j = k % BP_QK;
  return bp_q_values4(blk, j, bp_q_scale(blk, j), bp_q_min(blk, j));
}

// bp_q_fetch4 for a caller reading one row in rising k, a few values per
// call: the scale and min of the group it decoded last (|group|: that
// group's index along the row, ~0u before the first) are kept and reused
// while k stays in the group, so a K-quant's scale bytes (six-bit pairs
// for Q4_K and Q5_K) are decoded once per group, not once per 4 values.
vec4 bp_q_fetch4_keep(uint row, uint k, inout uint group, inout float sc, inout float mn) {
  const uint blk = row + (k / BP_QK) * BP_Q_BYTES, j = k % BP_QK;
  if (k / BP_Q_GROUP != group) {
    group = k / BP_Q_GROUP;
    sc = bp_q_scale(blk, j);
    mn = bp_q_min(blk, j);
  }
  return bp_q_values4(blk, j, sc, mn);
}
