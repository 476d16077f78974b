// rows.comp: the reductions over dim 0, one workgroup per row, any layout of
// the f32 input. OP (constant_id 2): 0 SUM_ROWS 1 MEAN 2 ARGMAX 3 NORM
// 4 RMS_NORM. p.x: eps. The output is written as raw 32-bit words (f32 bits,
// or the i32 index of ARGMAX) so one binding serves both types.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "reduce.glsl"

layout(constant_id = 2) const uint OP = 0;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 2) writeonly buffer D { uint d[]; };

void main() {
  const uint row = flat_workgroup();
  if (row >= pc.n) return;
  const uint lane = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
  const uint n0 = pc.a_ne.x;
  const uvec4 c = coords_of(row * n0, pc.a_ne);
  const uint base = pc.a_off + offset_of(c, pc.a_nb), s0 = pc.a_nb.x;

  if (OP == 2) {
    float best = -1.0 / 0.0;
    uint where = 0xffffffffu;
    for (uint i = lane; i < n0; i += step) {
      const float x = a[base + i * s0];
      if (where == 0xffffffffu || x > best) {
        best = x;
        where = i;
      }
    }
    const float m = wg_max(where == 0xffffffffu ? -1.0 / 0.0 : best);
    const uint first = wg_min_u(where != 0xffffffffu && best == m ? where : 0xffffffffu);
    if (lane == 0) d[pc.d_off + row] = first == 0xffffffffu ? 0u : first;
    return;
  }

  float sum = 0.0;
  for (uint i = lane; i < n0; i += step) {
    const float x = a[base + i * s0];
    sum += OP == 4 ? x * x : x;
  }
  sum = wg_sum(sum);
  if (OP == 0 || OP == 1) {
    if (lane == 0) d[pc.d_off + row] = floatBitsToUint(OP == 1 ? sum / float(n0) : sum);
    return;
  }
  const uint out_base = pc.d_off + offset_of(c, pc.d_nb), o0 = pc.d_nb.x;
  const float eps = param_f(0);
  float mean = 0.0, inv;
  if (OP == 3) {
    mean = sum / float(n0);
    float var = 0.0;
    for (uint i = lane; i < n0; i += step) {
      const float x = a[base + i * s0] - mean;
      var += x * x;
    }
    var = wg_sum(var);
    inv = 1.0 / sqrt(var / float(n0) + eps);
  } else {
    inv = 1.0 / sqrt(sum / float(n0) + eps);
  }
  for (uint i = lane; i < n0; i += step) d[out_base + i * o0] = floatBitsToUint((a[base + i * s0] - mean) * inv);
}
