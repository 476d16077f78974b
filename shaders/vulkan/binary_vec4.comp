// binary_vec4.comp: the fast path of ADD SUB MUL DIV for f32 tensors that are
// contiguous with a multiple of 4 elements, b either a's shape or one row
// repeated (b.ne0 == a.ne0, a bias). Operands are read through RGBA32F
// uniform texel buffers and written through an RGBA32F storage texel buffer:
// on lavapipe texel fetches gather 128 bits without the per-lane bounds loop
// that SSBO access gets (docs/plugins/vulkan.md). Offsets are in texels; n = texels of
// a; p.x = texels of one b period (b's texel count when it has a's shape).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
// 1 where b is one row repeated: its index wraps every p.x texels. Same-shape
// operands skip the modulo, which llvmpipe computes lane by lane.
layout(constant_id = 1) const uint B_ROW = 1;

layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(binding = 2, rgba32f) uniform writeonly imageBuffer d;

vec4 apply(vec4 x, vec4 y) {
  if (OP == 0) return x + y;
  if (OP == 1) return x - y;
  if (OP == 2) return x * y;
  return x / y;
}

void main() {
  // Four texels per invocation: more work per loop iteration pays on llvmpipe.
  const uint base = flat_invocation() * 4;
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    const uint i = base + k;
    if (i >= pc.n) return;
    const vec4 x = texelFetch(a, int(pc.a_off + i));
    const vec4 y = texelFetch(b, int(pc.b_off + (B_ROW == 1 ? i % pc.p.x : i)));
    imageStore(d, int(pc.d_off + i), apply(x, y));
  }
}
