// unary.comp: SCALE, CLAMP and the unary ops on any layout, f32 or f16 (T,
// the same type in and out). OP (specialization constant): the op's
// BP_VK_UNARY_* code (op_codes.h, bp_op - SCALE). p.x, p.y: scale or min/max.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "op_codes.h"
#include "../common/gelu.h"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = BP_VK_UNARY_SCALE;

layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 2) writeonly buffer D { T d[]; };

float apply(float x) {
  if (OP == BP_VK_UNARY_SCALE) return x * param_f(0);
  // NaN stays NaN (docs/ops.md): GLSL's min and max may drop it.
  if (OP == BP_VK_UNARY_CLAMP) return isnan(x) ? x : min(max(x, param_f(0)), param_f(1));
  if (OP == BP_VK_UNARY_NEG) return -x;
  if (OP == BP_VK_UNARY_ABS) return abs(x);
  if (OP == BP_VK_UNARY_SQR) return x * x;
  if (OP == BP_VK_UNARY_SQRT) return sqrt(x);
  if (OP == BP_VK_UNARY_EXP) return exp(x);
  if (OP == BP_VK_UNARY_RELU) return max(x, 0.0);
  if (OP == BP_VK_UNARY_GELU) return bp_gelu(x);  // shaders/common/gelu.h
  if (OP == BP_VK_UNARY_SILU) return silu(x);
  if (OP == BP_VK_UNARY_TANH) return stable_tanh(x);
  return 1.0 / (1.0 + exp(-x));  // BP_VK_UNARY_SIGMOID
}

void main() {
  uvec4 c;
  uint len;
  if (!run_of(flat_invocation(), pc.d_ne, c, len)) return;
  const uint ao = pc.a_off + offset_of(c, pc.a_nb), dof = pc.d_off + offset_of(c, pc.d_nb);
  for (uint k = 0; k < len; ++k) d[dof + k * pc.d_nb.x] = T(apply(float(a[ao + k * pc.a_nb.x])));
}
