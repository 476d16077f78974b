// mul_mv_q.comp: MUL_MAT of quantized weights a (BP_QTYPE, quant.glsl) by
// f32 columns of b: a workgroup per row m of a, NCOLS columns of b per
// workgroup (y: column blocks; z: batches). Its invocations take a group of
// BP_Q_GROUP values of k that share one scale in each of two neighbouring
// blocks, read the scale once per group, decode 4 values at a time and use
// each decoded value for all NCOLS columns, so a is read and decoded once
// per column block. The partial sums are reduced across the workgroup
// (reduce.glsl: one subgroup on CPU-type devices, several through shared
// memory on GPUs).
//
// Why pairs of blocks: every block type has an even size, so a pair starts
// on a word when the row does (BP_Q_ROW_ALIGNED, which the plugin defines
// only then): each block's offset modulo 4 is then a constant the compiler
// sees, and a 4-byte read that is word-aligned costs one load instead of
// two (quant.glsl, bp_q_word).
//
// SG_ROWS (GPUs, mul_mv=subgroup): each subgroup takes rows of its own
// (gl_NumSubgroups rows per workgroup), its lanes stride along the row and
// one subgroupAdd per column sums them: no shared memory and no barrier on
// the way to the result. Without it the whole workgroup takes each row.
//
// Specialization: 0 workgroup size, 1 MULTI (reduce.glsl), 2 NCOLS (1..8),
// 3 SG_ROWS, 4 EPILOGUE (epilogue.glsl: the graph's next node in the same
// dispatch).
// Push constants: a_off and a_nb in bytes, b and d in floats, d_ne = (M, N,
// B2, B3), a_ne.z/w a's batch counts. Columns of the last block past N
// read the last column again and are not stored.
//
// BP_Q_TEXEL (the mul_mv_q_tex_ variants, what the plugin binds where the
// views reach): a through an R32UI view, b through an RGBA32F view (its
// offset and row stride multiples of 4 floats); else both are storage
// buffers (any float offset).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "reduce.glsl"

#ifdef BP_Q_TEXEL
layout(binding = 0) uniform usamplerBuffer qa4;
layout(binding = 1) uniform samplerBuffer b;
#define B4(o) texelFetch(b, int((o) >> 2))
#else
layout(std430, binding = 0) readonly buffer QA { uint qa[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
#define B4(o) vec4(b[o], b[(o) + 1], b[(o) + 2], b[(o) + 3])
#endif
layout(std430, binding = 3) buffer D { float d[]; };
#define EPILOGUE_ID 4
#include "epilogue.glsl"

#include "quant.glsl"

layout(constant_id = 2) const uint NCOLS = 8;
layout(constant_id = 3) const bool SG_ROWS = false;
const uint MAX_COLS = 8;

void main() {
  const uint lid = SG_ROWS ? gl_SubgroupInvocationID : gl_LocalInvocationID.x;
  const uint stride = SG_ROWS ? gl_SubgroupSize : gl_WorkGroupSize.x;
  const uint rows_per_group = SG_ROWS ? gl_NumSubgroups : 1u, my_row = SG_ROWS ? gl_SubgroupID : 0u;
  const uint n_len = pc.d_ne.y, n0 = gl_WorkGroupID.y * NCOLS;
  const uint per_block = BP_QK / BP_Q_GROUP, blocks = pc.a_ne.x / BP_QK;
  const uint units = (blocks + 1) / 2 * per_block;  // (pair of blocks, group) per invocation step
  const uint i2 = gl_WorkGroupID.z % pc.d_ne.z, i3 = gl_WorkGroupID.z / pc.d_ne.z;
  const uint a2 = i2 / (pc.d_ne.z / pc.a_ne.z), a3 = i3 / (pc.d_ne.w / pc.a_ne.w);
  const uint abase = pc.a_off + a2 * pc.a_nb.z + a3 * pc.a_nb.w;
  const uint dbase = i2 * pc.d_nb.z + i3 * pc.d_nb.w;
  uint bcol[MAX_COLS];
  [[unroll]] for (uint n = 0; n < NCOLS; ++n)
    bcol[n] = pc.b_off + i2 * pc.b_nb.z + i3 * pc.b_nb.w + min(n0 + n, n_len - 1) * pc.b_nb.y;
  for (uint m = gl_WorkGroupID.x * rows_per_group + my_row; m < pc.d_ne.x; m += gl_NumWorkGroups.x * rows_per_group) {
#ifdef BP_Q_ROW_ALIGNED
    const uint arow = ((abase + m * pc.a_nb.y) >> 2) * 4u;  // a multiple of 4 the compiler can see
#else
    const uint arow = abase + m * pc.a_nb.y;
#endif
    float acc[MAX_COLS];
    [[unroll]] for (uint n = 0; n < NCOLS; ++n) acc[n] = 0.0;
    for (uint u = lid; u < units; u += stride) {
      const uint pair = u / per_block, j0 = (u % per_block) * BP_Q_GROUP;
      [[unroll]] for (uint h = 0; h < 2; ++h) {
        if (pair * 2u + h < blocks) {
          const uint blk = arow + pair * (2u * BP_Q_BYTES) + h * BP_Q_BYTES;
          const uint k0 = (pair * 2u + h) * BP_QK + j0;
          const float sc = bp_q_scale(blk, j0), mn = bp_q_min(blk, j0);
          [[unroll]] for (uint i = 0; i < BP_Q_GROUP; i += 4) {
            const vec4 v = bp_q_values4(blk, j0 + i, sc, mn);
            [[unroll]] for (uint n = 0; n < NCOLS; ++n) acc[n] += dot(v, B4(bcol[n] + k0 + i));
          }
        }
      }
    }
    // The column count is the same for the whole workgroup, so every
    // invocation takes part in each reduction.
    [[unroll]] for (uint n = 0; n < NCOLS; ++n) {
      const float s = SG_ROWS ? subgroupAdd(acc[n]) : wg_sum(acc[n]);
      if (lid == 0 && n0 + n < n_len) store_product(dbase + (n0 + n) * pc.d_nb.y + m * pc.d_nb.x, s);
    }
  }
}
