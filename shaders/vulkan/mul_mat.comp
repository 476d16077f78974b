// mul_mat.comp: MUL_MAT on any operand layout with dense rows, the general
// path: one invocation per output element out[m, n, i2, i3] =
// sum_k a[k, m, i2 / (B2/A2), i3 / (B3/A3)] * b[k, n, i2, i3].
// A_T: float or float16_t. The fast paths are mul_mat_nt and mul_mv.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer A { A_T a[]; };
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
  for (uint k = 0; k < k_len; ++k) sum += float(a[ao + k]) * b[bo + k];
  d[pc.d_off + offset_of(c, pc.d_nb)] = sum;
}
