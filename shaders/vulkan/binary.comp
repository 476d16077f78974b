// binary.comp: ADD SUB MUL DIV on any layout: out[i] = a[i] op b[i mod b.ne],
// a run of elements per invocation (common.glsl).
// Variants (CMake): A_T and B_T each float or float16_t; the output has a's
// type. OP (specialization constant): 0 add, 1 sub, 2 mul, 3 div.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;

layout(std430, binding = 0) readonly buffer A { A_T a[]; };
layout(std430, binding = 1) readonly buffer B { B_T b[]; };
layout(std430, binding = 2) writeonly buffer D { A_T d[]; };

void main() {
  uvec4 c;
  uint len;
  if (!run_of(flat_invocation(), pc.d_ne, c, len)) return;
  const uint ao = pc.a_off + offset_of(c, pc.a_nb), dof = pc.d_off + offset_of(c, pc.d_nb);
  const uvec4 cb = c % pc.b_ne;
  const uint bo = pc.b_off + offset_of(uvec4(0, cb.yzw), pc.b_nb);
  uint bx = cb.x;  // b repeats along dim 0 every b.ne.x elements
  for (uint k = 0; k < len; ++k) {
    const float x = float(a[ao + k * pc.a_nb.x]);
    const float y = float(b[bo + bx * pc.b_nb.x]);
    bx = bx + 1 == pc.b_ne.x ? 0 : bx + 1;
    float r;
    if (OP == 0) r = x + y;
    else if (OP == 1) r = x - y;
    else if (OP == 2) r = x * y;
    else r = x / y;
    d[dof + k * pc.d_nb.x] = A_T(r);
  }
}
