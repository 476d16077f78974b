// binary.comp: ADD SUB MUL DIV. OP (specialization constant 0): the op's
// BP_VK_BINARY_* code (op_codes.h).
//
// Variants (CMake):
// - A_T and B_T each float or float16_t: any layout, out[i] = a[i] op
//   b[i mod b.ne], a run of elements per invocation (common.glsl); the output
//   has a's type.
// - VEC4: the fast path for f32 tensors that are contiguous with a multiple
//   of 4 elements, b either a's shape or one row repeated (b.ne0 == a.ne0, a
//   bias). Operands are read through RGBA32F uniform texel buffers and
//   written through an RGBA32F storage texel buffer: on lavapipe texel
//   fetches gather 128 bits without the per-lane bounds loop that SSBO access
//   gets (docs/plugins/vulkan.md, "On lavapipe"). Offsets are in texels; n = texels of a; p.x = texels
//   of one b period (b's texel count when it has a's shape).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "op_codes.h"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = BP_VK_BINARY_ADD;

// x op y, for floats and vec4s alike.
#define APPLY(x, y)                                                        \
  (OP == BP_VK_BINARY_ADD   ? (x) + (y)                                    \
   : OP == BP_VK_BINARY_SUB ? (x) - (y)                                    \
   : OP == BP_VK_BINARY_MUL ? (x) * (y)                                    \
                            : full_range_div(x, y))

#ifdef VEC4
// 1 where b is one row repeated: its index wraps every p.x texels. Same-shape
// operands skip the modulo, which llvmpipe computes lane by lane.
layout(constant_id = 1) const uint B_ROW = 1;

layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(binding = 2, rgba32f) uniform writeonly imageBuffer d;

void main() {
  // Four texels per invocation: more work per loop iteration pays on llvmpipe.
  const uint base = flat_invocation() * 4;
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    const uint i = base + k;
    if (i >= pc.n) return;
    const vec4 x = texelFetch(a, int(pc.a_off + i));
    const vec4 y = texelFetch(b, int(pc.b_off + (B_ROW == 1 ? i % pc.p.x : i)));
    imageStore(d, int(pc.d_off + i), APPLY(x, y));
  }
}
#else
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
    d[dof + k * pc.d_nb.x] = A_T(APPLY(x, y));
  }
}
#endif
