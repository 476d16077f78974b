// get_rows_q.comp: GET_ROWS of a quantized table (BP_QTYPE, quant.glsl)
// into f32 rows, out[:, n, i2, i3] = a[:, ids[n, i2, i3], i2, i3]: one
// invocation per 4 values of an output row (rows hold whole blocks, so
// ne.x % 4 == 0). Ids outside [0, R) are recorded as get_rows.comp does.
// Push constants: a_off and a_nb in bytes, ids and d in elements, n = the
// invocations.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer QA { uint qa[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(std430, binding = 3) buffer S { uint status[]; };

#include "quant.glsl"

void main() {
  const uint i = flat_invocation();
  if (i >= pc.n) return;
  const uvec4 c = coords_of(i, uvec4(pc.d_ne.x / 4, pc.d_ne.y, pc.d_ne.z, pc.d_ne.w));
  const int id = ids[pc.b_off + offset_of(uvec4(c.y, c.z, c.w, 0), pc.b_nb)];
  const uint rows = pc.a_ne.y;
  if (id < 0 || uint(id) >= rows) {
    if (atomicCompSwap(status[0], 0u, 1u) == 0u) {
      status[1] = uint(id);
      status[2] = rows;
    }
    return;
  }
  const vec4 v = bp_q_fetch4(pc.a_off + offset_of(uvec4(0, uint(id), c.z, c.w), pc.a_nb), c.x * 4);
  const uint dof = pc.d_off + offset_of(uvec4(c.x * 4, c.y, c.z, c.w), pc.d_nb);
  [[unroll]] for (uint k = 0; k < 4; ++k) d[dof + k * pc.d_nb.x] = v[k];
}
