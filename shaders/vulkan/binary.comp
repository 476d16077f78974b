// binary.comp: ADD SUB MUL DIV on any layout: out[i] = a[i] op b[i mod b.ne].
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
  const uint i = flat_invocation();
  if (i >= pc.n) return;
  const uvec4 c = coords_of(i, pc.d_ne);
  const float x = float(a[pc.a_off + offset_of(c, pc.a_nb)]);
  const float y = float(b[pc.b_off + offset_of(c % pc.b_ne, pc.b_nb)]);
  float r;
  if (OP == 0) r = x + y;
  else if (OP == 1) r = x - y;
  else if (OP == 2) r = x * y;
  else r = x / y;
  d[pc.d_off + offset_of(c, pc.d_nb)] = A_T(r);
}
