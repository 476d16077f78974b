// mul_mv_wg.comp: MUL_MAT with few columns (N < 8, a decoder's tokens) on
// GPUs, K % 4 == 0: a workgroup per row m of a. Its invocations stride
// along the row a texel (4 values of k) apart, so a warp's fetches of a are
// consecutive (coalesced), each fetched texel of a feeds all N columns (a,
// the weights, is read once), and the N partial sums are reduced across the
// workgroup (reduce.glsl). mul_mv.comp, one invocation per output reading
// its own row, suits CPU drivers instead (plan_matmul.cpp, plan_mul_mat).
//
// SG_ROWS (mul_mv=subgroup): each subgroup takes rows of its own instead
// (gl_NumSubgroups rows per workgroup), summed by one subgroupAdd per
// column, with no shared memory or barrier.
//
// Workgroups loop over rows (x may be capped below M); z is the batch.
// Push constants as mul_mv's: a_nb / b_nb in texels, d_nb in floats,
// d_ne = (M, N, B2, B3), a_ne.z/w a's batch counts, p.x = K / 4.
// Specialization: 0 workgroup size, 1 MULTI (reduce.glsl), 3 SG_ROWS,
// 4 EPILOGUE (epilogue.glsl: the graph's next node in the same dispatch).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "reduce.glsl"

layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(std430, binding = 3) buffer D { float d[]; };
#define EPILOGUE_ID 4
#include "epilogue.glsl"

layout(constant_id = 3) const bool SG_ROWS = false;

const uint MAX_N = 7;  // the plugin sends N >= 8 to mul_mat_nt or mul_mat_shared

void main() {
  const uint lid = SG_ROWS ? gl_SubgroupInvocationID : gl_LocalInvocationID.x;
  const uint stride = SG_ROWS ? gl_SubgroupSize : gl_WorkGroupSize.x;
  const uint rows_per_group = SG_ROWS ? gl_NumSubgroups : 1u, my_row = SG_ROWS ? gl_SubgroupID : 0u;
  const uint n_len = pc.d_ne.y, kt_len = pc.p.x;
  const uint i2 = gl_WorkGroupID.z % pc.d_ne.z, i3 = gl_WorkGroupID.z / pc.d_ne.z;
  const uint a2 = i2 / (pc.d_ne.z / pc.a_ne.z), a3 = i3 / (pc.d_ne.w / pc.a_ne.w);
  const uint abase = pc.a_off + a2 * pc.a_nb.z + a3 * pc.a_nb.w;
  const uint bbase = pc.b_off + i2 * pc.b_nb.z + i3 * pc.b_nb.w;
  const uint dbase = i2 * pc.d_nb.z + i3 * pc.d_nb.w;
  for (uint m = gl_WorkGroupID.x * rows_per_group + my_row; m < pc.d_ne.x; m += gl_NumWorkGroups.x * rows_per_group) {
    const uint arow = abase + m * pc.a_nb.y;
    float acc[MAX_N];
    [[unroll]] for (uint n = 0; n < MAX_N; ++n) acc[n] = 0.0;
    for (uint k = lid; k < kt_len; k += stride) {
      const vec4 av = texelFetch(a, int(arow + k));
      [[unroll]] for (uint n = 0; n < MAX_N; ++n) {
        if (n < n_len) acc[n] += dot(av, texelFetch(b, int(bbase + n * pc.b_nb.y + k)));
      }
    }
    // n_len is the same for the whole workgroup, so every invocation takes
    // part in each reduction.
    [[unroll]] for (uint n = 0; n < MAX_N; ++n) {
      if (n >= n_len) break;
      const float s = SG_ROWS ? subgroupAdd(acc[n]) : wg_sum(acc[n]);
      if (lid == 0) store_product(dbase + n * pc.d_nb.y + m * pc.d_nb.x, s);
    }
  }
}
