// soft_max.comp: softmax(scale * a + mask) over dim 0, one workgroup per
// row, any layout. M_T: the mask's type (float or float16_t). p.x: scale,
// p.y: 1 when a mask is bound. Mask row = a's row i1, batch dims broadcast
// (i2 % m2, i3 % m3). A row that is all -inf gives zeros.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer M { M_T mask[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };

void main() {
  const uint row = flat_workgroup();
  if (row >= pc.n) return;
  const uint lane = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
  const uint n0 = pc.a_ne.x;
  const uvec4 c = coords_of(row * n0, pc.a_ne);
  const uint base = pc.a_off + offset_of(c, pc.a_nb), s0 = pc.a_nb.x;
  const bool has_mask = pc.p.y != 0u;
  const uint mbase = pc.b_off + offset_of(uvec4(0, c.y, c.z % pc.b_ne.z, c.w % pc.b_ne.w), pc.b_nb);
  const float scale = param_f(0);

  float m = -1.0 / 0.0;
  for (uint i = lane; i < n0; i += step) {
    float v = a[base + i * s0] * scale;
    if (has_mask) v += float(mask[mbase + i * pc.b_nb.x]);
    m = max(m, v);
  }
  m = wg_max(m);
  const uint out_base = pc.d_off + offset_of(c, pc.d_nb), o0 = pc.d_nb.x;
  if (isinf(m) && m < 0.0) {
    for (uint i = lane; i < n0; i += step) d[out_base + i * o0] = 0.0;
    return;
  }
  float sum = 0.0;
  for (uint i = lane; i < n0; i += step) {
    float v = a[base + i * s0] * scale;
    if (has_mask) v += float(mask[mbase + i * pc.b_nb.x]);
    sum += exp(v - m);
  }
  sum = wg_sum(sum);
  const float inv = 1.0 / sum;
  for (uint i = lane; i < n0; i += step) {
    float v = a[base + i * s0] * scale;
    if (has_mask) v += float(mask[mbase + i * pc.b_nb.x]);
    d[out_base + i * o0] = exp(v - m) * inv;
  }
}
