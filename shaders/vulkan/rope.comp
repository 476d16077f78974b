// rope.comp: ROPE of f32 a [D, H, T, B] by i32 positions, any layout of a.
// Work item = one rotated pair (n_dims/2 per row) or one element past
// n_dims that passes through. p = (n_dims, mode, freq_base, freq_scale).
// The angle is reduced to [-pi, pi] before sin/cos: positions times
// frequencies reach tens of radians, where the driver's sin/cos lose digits.
// FREQ_FACTORS=1 (variant rope_ff_f32): f32 frequency factors at binding 3
// divide pair j's angle by ff[j]. Their element offset rides in b_nb.y: the
// push-constant block is the 128 bytes every device guarantees, p is full,
// and pos (b) is 1-D so only b_nb.x is its own.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#ifndef FREQ_FACTORS
#define FREQ_FACTORS 0
#endif

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer P { int pos[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
#if FREQ_FACTORS
layout(std430, binding = 3) readonly buffer F { float ff[]; };
#endif

void main() {
  const uint i = flat_invocation();
  if (i >= pc.n) return;
  const uint n_dims = pc.p.x, half_dims = n_dims / 2;
  const uint per_row = half_dims + (pc.a_ne.x - n_dims);
  const uint row = i / per_row, j = i % per_row;
  const uvec4 c = coords_of(row * pc.a_ne.x, pc.a_ne);
  const uint ab = pc.a_off + offset_of(c, pc.a_nb), db = pc.d_off + offset_of(c, pc.d_nb);
  const uint sa = pc.a_nb.x, sd = pc.d_nb.x;
  if (j >= half_dims) {
    const uint e = n_dims + (j - half_dims);
    d[db + e * sd] = a[ab + e * sa];
    return;
  }
  const bool neox = pc.p.y == 2u;
  const uint j0 = neox ? j : 2 * j, j1 = neox ? j + half_dims : 2 * j + 1;
  const float p = float(pos[pc.b_off + c.z * pc.b_nb.x]);
  const float inv_freq = exp2(-2.0 * float(j) / float(n_dims) * log2(param_f(2)));
  float theta = p * param_f(3) * inv_freq;
#if FREQ_FACTORS
  theta /= ff[pc.b_nb.y + j];
#endif
  // Cody-Waite reduction by 2 pi in two parts.
  const float turns = round(theta * 0.15915494309189535);
  theta = (theta - turns * 6.28125) - turns * 0.0019353071795864769;
  const float cs = cos(theta), sn = sin(theta);
  const float x0 = a[ab + j0 * sa], x1 = a[ab + j1 * sa];
  d[db + j0 * sd] = x0 * cs - x1 * sn;
  d[db + j1 * sd] = x0 * sn + x1 * cs;
}
