// mul_mv.comp: MUL_MAT with few columns (matrix x vector), K % 4 == 0: one
// invocation per output element, a dot product of a row of a and a row of b,
// both read 4 values at a time through uniform texel buffers. The view
// format does the widening: a is bound as RGBA32F or RGBA16F, so f32 and
// f16 weights share this shader. The result goes through an SSBO (one float
// per invocation). Offsets and strides: a and b in texels, d in floats.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer b;
layout(std430, binding = 3) writeonly buffer D { float d[]; };

void main() {
  const uint i = flat_invocation();
  if (i >= pc.n) return;
  const uvec4 c = coords_of(i, pc.d_ne);  // (m, n, i2, i3)
  const uint kt_len = pc.a_ne.x / 4;
  const uint a2 = c.z / (pc.d_ne.z / pc.a_ne.z), a3 = c.w / (pc.d_ne.w / pc.a_ne.w);
  const uint ao = pc.a_off + offset_of(uvec4(0, c.x, a2, a3), pc.a_nb);
  const uint bo = pc.b_off + offset_of(uvec4(0, c.y, c.z, c.w), pc.b_nb);
  vec4 s0 = vec4(0.0), s1 = vec4(0.0);
  uint k = 0;
  for (; k + 2 <= kt_len; k += 2) {
    s0 += texelFetch(a, int(ao + k)) * texelFetch(b, int(bo + k));
    s1 += texelFetch(a, int(ao + k + 1)) * texelFetch(b, int(bo + k + 1));
  }
  if (k < kt_len) s0 += texelFetch(a, int(ao + k)) * texelFetch(b, int(bo + k));
  const vec4 s = s0 + s1;
  d[pc.d_off + offset_of(c, pc.d_nb)] = (s.x + s.y) + (s.z + s.w);
}
