// transpose.comp: a [B3][B2][M][K] matrix (rows K-contiguous, f32 or f16
// through the texel view) into [B3][B2][K][M] f32 (m fastest), the layout
// mul_mat_tex.comp reads. Each invocation moves one 4 x 4 block: four texels
// of four rows in, four texels of four k rows out; M % 4 == K % 4 == 0.
// The general copy shader did this element by element at a quarter of the
// cost of the product it fed.
//
// Push constants, in texels: a_nb.y/z/w a's row and batch strides, a_ne =
// (K/4, M/4, B2, B3); d_nb.x = M/4 (one k row of the output), d_nb.z/w the
// output's batch strides; n = invocations.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(binding = 0) uniform samplerBuffer a;
layout(binding = 2, rgba32f) uniform writeonly imageBuffer d;

void main() {
  const uint i = flat_invocation();
  if (i >= pc.n) return;
  const uvec4 c = coords_of(i, uvec4(pc.a_ne.y, pc.a_ne.x, pc.a_ne.z, pc.a_ne.w));  // (m4, kt, i2, i3)
  const uint src = pc.a_off + c.x * 4 * pc.a_nb.y + c.y + c.z * pc.a_nb.z + c.w * pc.a_nb.w;
  const vec4 r0 = texelFetch(a, int(src));
  const vec4 r1 = texelFetch(a, int(src + pc.a_nb.y));
  const vec4 r2 = texelFetch(a, int(src + 2 * pc.a_nb.y));
  const vec4 r3 = texelFetch(a, int(src + 3 * pc.a_nb.y));
  const uint dst = pc.d_off + c.y * 4 * pc.d_nb.x + c.x + c.z * pc.d_nb.z + c.w * pc.d_nb.w;
  imageStore(d, int(dst), vec4(r0.x, r1.x, r2.x, r3.x));
  imageStore(d, int(dst + pc.d_nb.x), vec4(r0.y, r1.y, r2.y, r3.y));
  imageStore(d, int(dst + 2 * pc.d_nb.x), vec4(r0.z, r1.z, r2.z, r3.z));
  imageStore(d, int(dst + 3 * pc.d_nb.x), vec4(r0.w, r1.w, r2.w, r3.w));
}
