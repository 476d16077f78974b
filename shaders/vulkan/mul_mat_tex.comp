// mul_mat_tex.comp: the register-blocked MUL_MAT for f32 results with
// M % 4 == 0 and K % 4 == 0 (GPU-NOTES.md "the winner"): no shared memory,
// a 1-D workgroup along M, each invocation ROWS rows of the output (ROWS
// values of n) by one vec4 of m, K unrolled by 4. Both operands come through
// RGBA32F uniform texel buffers: |at| is a transposed into [M, K] order (m
// fastest, f16 widened) by the copy shader in the same command buffer, so
// one texel holds 4 values of m at one k; |b| is read as 4 values of k.
// ROWS (a define, so the loops unroll) is chosen per device by the plugin.
//
// Push constants, all in texels: a_nb.x = texels per k row of at (M/4),
// a_nb.z / a_nb.w = at's batch strides, a_ne.z / a_ne.w = a's batch counts;
// b_nb.y/z/w = b's strides; d_nb.y/z/w = the output's strides; d_ne = (M, N,
// B2, B3) in elements; p.x = K.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(binding = 0) uniform samplerBuffer at;
layout(binding = 1) uniform samplerBuffer b;
layout(binding = 2, rgba32f) uniform writeonly imageBuffer d;

void main() {
  const uint m4 = gl_GlobalInvocationID.x;
  const uint m4_count = pc.d_ne.x / 4;
  const uint n0 = gl_WorkGroupID.y * ROWS;
  const uint i2 = gl_WorkGroupID.z % pc.d_ne.z, i3 = gl_WorkGroupID.z / pc.d_ne.z;
  const uint n_len = pc.d_ne.y, k_len = pc.p.x;
  const uint a2 = i2 / (pc.d_ne.z / pc.a_ne.z), a3 = i3 / (pc.d_ne.w / pc.a_ne.w);
  // Invocations past the edge still run the loop on a clamped column (no
  // early return: keeps the loop uniform) and skip the store.
  const uint mc = min(m4, m4_count - 1);
  const uint abase = pc.a_off + a2 * pc.a_nb.z + a3 * pc.a_nb.w + mc;
  const uint astep = pc.a_nb.x;
  const uint bbase = pc.b_off + i2 * pc.b_nb.z + i3 * pc.b_nb.w;
  uint brow[ROWS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r) brow[r] = bbase + min(n0 + r, n_len - 1) * pc.b_nb.y;

  vec4 acc[ROWS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r) acc[r] = vec4(0.0);
  for (uint k = 0; k < k_len; k += 4) {
    const uint ak = abase + k * astep;
    const vec4 a0 = texelFetch(at, int(ak));
    const vec4 a1 = texelFetch(at, int(ak + astep));
    const vec4 a2v = texelFetch(at, int(ak + 2 * astep));
    const vec4 a3v = texelFetch(at, int(ak + 3 * astep));
    const uint kt = k / 4;
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {
      const vec4 bv = texelFetch(b, int(brow[r] + kt));
      acc[r] += a0 * bv.x + a1 * bv.y + a2v * bv.z + a3v * bv.w;
    }
  }
  if (m4 >= m4_count) return;
  const uint dbase = pc.d_off + i2 * pc.d_nb.z + i3 * pc.d_nb.w + m4;
  [[unroll]] for (uint r = 0; r < ROWS; ++r)
    if (n0 + r < n_len) imageStore(d, int(dbase + (n0 + r) * pc.d_nb.y), acc[r]);
}
