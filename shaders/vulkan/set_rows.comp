// set_rows.comp: SET_ROWS, d[:, ids[i], i2, i3] = D_T(a[:, i, i2, i3]) for
// f32 a and D_T float or float16_t, one invocation per run of RUN elements
// of a row of a (common.glsl). d is the node itself (a view of the
// destination: d_ne.y = R rows), b the ids (b_ne.x of them).
//
// Nothing is written unless every id is in [0, R): before writing, each
// subgroup reads all the ids, a strided share per invocation, and takes the
// first bad index with subgroupMin, so every invocation of the dispatch
// reaches the same verdict without a second dispatch or a barrier. On a bad
// id invocation 0 records the first one in the status buffer (binding 3,
// words BP_VK_STATUS_SET_ROWS..: flag, id, index, R, and p.x, the plugin's
// label of the node) and the plugin fails the compute with it.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "op_codes.h"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer D { D_T d[]; };
layout(std430, binding = 3) buffer S { uint status[]; };

const uint NONE = 0xffffffffu;
const uint F = BP_VK_STATUS_SET_ROWS;

void main() {
  const uint rows = pc.d_ne.y;
  // Every invocation is still active here: a subgroup's lanes cover all ids.
  uint bad = NONE;
  for (uint i = gl_SubgroupInvocationID; i < pc.b_ne.x; i += gl_SubgroupSize) {
    const int id = ids[pc.b_off + i * pc.b_nb.x];
    if (id < 0 || uint(id) >= rows) bad = min(bad, i);
  }
  bad = subgroupMin(bad);
  if (bad != NONE) {
    if (flat_invocation() == 0u && atomicCompSwap(status[F], 0u, 1u) == 0u) {
      status[F + 1] = uint(ids[pc.b_off + bad * pc.b_nb.x]);
      status[F + 2] = bad;
      status[F + 3] = rows;
      status[F + 4] = pc.p.x;
    }
    return;
  }
  uvec4 c;
  uint len;
  if (!run_of(flat_invocation(), pc.a_ne, c, len)) return;
  const uint id = uint(ids[pc.b_off + c.y * pc.b_nb.x]);
  const uint ao = pc.a_off + offset_of(c, pc.a_nb);
  const uint dof = pc.d_off + offset_of(uvec4(c.x, id, c.z, c.w), pc.d_nb);
  for (uint k = 0; k < len; ++k) d[dof + k * pc.d_nb.x] = D_T(a[ao + k * pc.a_nb.x]);
}
