// unary.comp: SCALE, CLAMP and the unary ops on any layout, f32 or f16 (T,
// the same type in and out). OP (specialization constant) = bp_op - SCALE:
// 0 scale 1 clamp 2 neg 3 abs 4 sqr 5 sqrt 6 exp 7 relu 8 gelu 9 silu
// 10 tanh 11 sigmoid. p.x, p.y: scale or min/max.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "../common/gelu.h"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;

layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 2) writeonly buffer D { T d[]; };

float apply(float x) {
  if (OP == 0) return x * param_f(0);
  // NaN stays NaN (docs/ops.md): GLSL's min and max may drop it.
  if (OP == 1) return isnan(x) ? x : min(max(x, param_f(0)), param_f(1));
  if (OP == 2) return -x;
  if (OP == 3) return abs(x);
  if (OP == 4) return x * x;
  if (OP == 5) return sqrt(x);
  if (OP == 6) return exp(x);
  if (OP == 7) return max(x, 0.0);
  if (OP == 8) return bp_gelu(x);  // shaders/common/gelu.h
  if (OP == 9) return silu(x);
  if (OP == 10) return stable_tanh(x);
  return 1.0 / (1.0 + exp(-x));
}

void main() {
  uvec4 c;
  uint len;
  if (!run_of(flat_invocation(), pc.d_ne, c, len)) return;
  const uint ao = pc.a_off + offset_of(c, pc.a_nb), dof = pc.d_off + offset_of(c, pc.d_nb);
  for (uint k = 0; k < len; ++k) d[dof + k * pc.d_nb.x] = T(apply(float(a[ao + k * pc.a_nb.x])));
}
