// mul_mat_nt.comp: MUL_MAT for few to moderate columns (N), K % 4 == 0,
// straight from the operands' own layout: a's rows and b's rows are both
// K-contiguous, so no transposition pass runs first (for a decoder's
// 256x256 weights and N = 32 that pass cost four times the product itself
// on lavapipe). Each invocation computes a ROWS x COLS block of the output
// (ROWS values of m by COLS values of n), reading ROWS texels of a and COLS
// texels of b per 4 values of k and doing ROWS * COLS vec4 dot products:
// register blocking without shared memory, which lavapipe rewards
// (docs/plugins/vulkan.md). Invocations of a workgroup run along m, so they share b's
// texels. a is bound as RGBA32F or RGBA16F (the view widens f16), b as
// RGBA32F; the result goes through an SSBO, so any M and N work.
//
// Push constants: a_nb / b_nb in texels (a_nb.y = a's row stride), a_ne.z/w
// a's batch counts, d_nb in floats, d_ne = (M, N, B2, B3), p.x = K / 4.
//
// EPILOGUE (constant_id 0): the graph's next node applied to the product in
// the same dispatch (epilogue.glsl).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = LOCAL) in;

layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(std430, binding = 3) buffer D { float d[]; };
#define EPILOGUE_ID 0
#include "epilogue.glsl"

void main() {
  const uint m0 = gl_GlobalInvocationID.x * ROWS;
  const uint n0 = gl_WorkGroupID.y * COLS;
  const uint i2 = gl_WorkGroupID.z % pc.d_ne.z, i3 = gl_WorkGroupID.z / pc.d_ne.z;
  const uint m_len = pc.d_ne.x, n_len = pc.d_ne.y, kt_len = pc.p.x;
  const uint a2 = i2 / (pc.d_ne.z / pc.a_ne.z), a3 = i3 / (pc.d_ne.w / pc.a_ne.w);
  // Rows and columns past the edge read a clamped one (the loop stays
  // uniform) and are not stored.
  const uint abase = pc.a_off + a2 * pc.a_nb.z + a3 * pc.a_nb.w;
  const uint bbase = pc.b_off + i2 * pc.b_nb.z + i3 * pc.b_nb.w;
  uint arow[ROWS], brow[COLS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r) arow[r] = abase + min(m0 + r, m_len - 1) * pc.a_nb.y;
  [[unroll]] for (uint c = 0; c < COLS; ++c) brow[c] = bbase + min(n0 + c, n_len - 1) * pc.b_nb.y;

  // One float per output, not a vec4 of partial sums: ROWS x COLS vec4s
  // would be 4x the registers, and on lavapipe (one SIMD register per
  // component) the spills cost more than dot()'s dependent adds: 8 x 16
  // float accumulators run 4096 x 4096 x 32 at 30-36 GFLOP/s against
  // 13-18 for 4 x 8 vec4s.
  float acc[ROWS][COLS];
  [[unroll]] for (uint r = 0; r < ROWS; ++r)[[unroll]] for (uint c = 0; c < COLS; ++c) acc[r][c] = 0.0;
  for (uint k = 0; k < kt_len; ++k) {
    vec4 av[ROWS], bv[COLS];
    [[unroll]] for (uint r = 0; r < ROWS; ++r) av[r] = texelFetch(a, int(arow[r] + k));
    [[unroll]] for (uint c = 0; c < COLS; ++c) bv[c] = texelFetch(b, int(brow[c] + k));
    [[unroll]] for (uint r = 0; r < ROWS; ++r)[[unroll]] for (uint c = 0; c < COLS; ++c) acc[r][c] += dot(av[r], bv[c]);
  }
  const uint dbase = i2 * pc.d_nb.z + i3 * pc.d_nb.w;
  [[unroll]] for (uint c = 0; c < COLS; ++c) {
    if (n0 + c >= n_len) break;
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {
      if (m0 + r >= m_len) break;
      store_product(dbase + (n0 + c) * pc.d_nb.y + (m0 + r) * pc.d_nb.x, acc[r][c]);
    }
  }
}
