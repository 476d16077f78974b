// mul_mv_q.comp: MUL_MAT of quantized weights a (BP_QTYPE, quant.glsl) by
// f32 columns of b: a workgroup per row m of a, NCOLS columns of b per
// workgroup (y: column blocks; z: batches). Its invocations take groups of
// BP_Q_GROUP values of k that share one scale, read the scale once per
// group, decode 4 values at a time and use each decoded value for all
// NCOLS columns, so a is read and decoded once per column block. The
// partial sums are reduced across the workgroup (reduce.glsl: one subgroup
// on CPU-type devices, several through shared memory on GPUs).
//
// Specialization: 0 workgroup size, 1 MULTI (reduce.glsl), 2 NCOLS (1..8).
// Push constants: a_off and a_nb in bytes, b and d in floats, d_ne = (M, N,
// B2, B3), a_ne.z/w a's batch counts. Columns of the last block past N
// read the last column again and are not stored.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer QA { uint qa[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };

#include "quant.glsl"

layout(constant_id = 2) const uint NCOLS = 8;
const uint MAX_COLS = 8;

void main() {
  const uint lid = gl_LocalInvocationID.x, stride = gl_WorkGroupSize.x;
  const uint n_len = pc.d_ne.y, n0 = gl_WorkGroupID.y * NCOLS;
  const uint groups = pc.a_ne.x / BP_Q_GROUP;
  const uint i2 = gl_WorkGroupID.z % pc.d_ne.z, i3 = gl_WorkGroupID.z / pc.d_ne.z;
  const uint a2 = i2 / (pc.d_ne.z / pc.a_ne.z), a3 = i3 / (pc.d_ne.w / pc.a_ne.w);
  const uint abase = pc.a_off + a2 * pc.a_nb.z + a3 * pc.a_nb.w;
  const uint dbase = pc.d_off + i2 * pc.d_nb.z + i3 * pc.d_nb.w;
  uint bcol[MAX_COLS];
  [[unroll]] for (uint n = 0; n < NCOLS; ++n)
    bcol[n] = pc.b_off + i2 * pc.b_nb.z + i3 * pc.b_nb.w + min(n0 + n, n_len - 1) * pc.b_nb.y;
  for (uint m = gl_WorkGroupID.x; m < pc.d_ne.x; m += gl_NumWorkGroups.x) {
    const uint arow = abase + m * pc.a_nb.y;
    float acc[MAX_COLS];
    [[unroll]] for (uint n = 0; n < NCOLS; ++n) acc[n] = 0.0;
    for (uint g = lid; g < groups; g += stride) {
      const uint k0 = g * BP_Q_GROUP;
      const uint blk = arow + (k0 / BP_QK) * BP_Q_BYTES, j0 = k0 % BP_QK;
      const float sc = bp_q_scale(blk, j0), mn = bp_q_min(blk, j0);
      [[unroll]] for (uint i = 0; i < BP_Q_GROUP; i += 4) {
        const uint q = bp_q_bits4(blk, j0 + i);
        const vec4 v = sc * (vec4(uvec4(q, q >> 8, q >> 16, q >> 24) & 255u) - BP_Q_BIAS) - mn;
        [[unroll]] for (uint n = 0; n < NCOLS; ++n) {
          const uint o = bcol[n] + k0 + i;
          acc[n] += dot(v, vec4(b[o], b[o + 1], b[o + 2], b[o + 3]));
        }
      }
    }
    // The column count is the same for the whole workgroup, so every
    // invocation takes part in each reduction.
    [[unroll]] for (uint n = 0; n < NCOLS; ++n) {
      const float s = wg_sum(acc[n]);
      if (lid == 0 && n0 + n < n_len) d[dbase + (n0 + n) * pc.d_nb.y + m * pc.d_nb.x] = s;
    }
  }
}
