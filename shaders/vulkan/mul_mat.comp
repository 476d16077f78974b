// mul_mat.comp: MUL_MAT on any operand layout with dense rows, the general
// path: one invocation per output element out[m, n, i2, i3] =
// sum_k a[k, m, i2 / (B2/A2), i3 / (B3/A3)] * b[k, n, i2, i3].
// A_T: float or float16_t; with A_BF16, a holds bfloat16 values read as
// 32-bit words (no 16-bit storage needed). The fast paths are mul_mat_nt,
// mul_mv and, for BF16 rows of whole 4-value blocks, mul_mv_q.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

#ifdef A_BF16
layout(std430, binding = 0) readonly buffer A { uint a_words[]; };
// A bfloat16 is the top half of an f32: element i is half i & 1 of word i / 2.
float load_a(uint i) { return uintBitsToFloat((a_words[i >> 1] >> ((i & 1u) * 16u)) << 16); }
#else
layout(std430, binding = 0) readonly buffer A { A_T a[]; };
float load_a(uint i) { return float(a[i]); }
#endif
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };

void main() {
  const uint i = flat_invocation();
  if (i >= pc.n) return;
  const uvec4 c = coords_of(i, pc.d_ne);  // (m, n, i2, i3)
  const uint k_len = pc.a_ne.x;
  const uint a2 = c.z / (pc.d_ne.z / pc.a_ne.z), a3 = c.w / (pc.d_ne.w / pc.a_ne.w);
  const uint ao = pc.a_off + offset_of(uvec4(0, c.x, a2, a3), pc.a_nb);
  const uint bo = pc.b_off + offset_of(uvec4(0, c.y, c.z, c.w), pc.b_nb);
  float sum = 0.0;
  for (uint k = 0; k < k_len; ++k) sum += load_a(ao + k) * b[bo + k];
  d[pc.d_off + offset_of(c, pc.d_nb)] = sum;
}
