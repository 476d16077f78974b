// copy.comp: CPY and CONT (element i of a, row-major, goes to element i of
// d, each with its own shape and strides, converting S_T -> D_T; p.w = 1
// when both have one shape: then runs along dim 0, common.glsl), and with
// -DCONCAT=1 CONCAT (p.x = dim; d element from a below a.ne[dim],
// else from b). Types: float, float16_t, int; with S_BF16 or D_BF16 (S_T or
// D_T uint16_t) one side holds bfloat16 bits: widened exactly by a shift,
// or rounded to nearest even as the core's bp_quantize_rows does.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

// Same-type copies store what they load: a same-width conversion is invalid
// SPIR-V for 16-bit types.
#if SAME_TYPE
#define CONVERT(x) (x)
#elif defined(S_BF16)
#define CONVERT(x) D_T(uintBitsToFloat(uint(x) << 16))
#elif defined(D_BF16)
// The bfloat16 nearest to |v| (ties to even); a NaN stays a quiet NaN.
uint bf16_bits(float v) {
  const uint u = floatBitsToUint(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
#define CONVERT(x) D_T(bf16_bits(float(x)))
#else
#define CONVERT(x) D_T(x)
#endif

layout(std430, binding = 0) readonly buffer A { S_T a[]; };
layout(std430, binding = 1) readonly buffer B { S_T b[]; };
layout(std430, binding = 2) writeonly buffer D { D_T d[]; };

void main() {
  const uint i = flat_invocation();
  if (i >= pc.n) return;
#if CONCAT
  const uvec4 c = coords_of(i, pc.d_ne);
  const uint dim = pc.p.x;
  const uint split = pc.a_ne[dim];
  // No local of type S_T: 16-bit storage allows f16 only in buffers.
  const uint at = pc.d_off + offset_of(c, pc.d_nb);
  if (c[dim] < split) {
    d[at] = a[pc.a_off + offset_of(c, pc.a_nb)];
  } else {
    uvec4 cb = c;
    cb[dim] -= split;
    d[at] = b[pc.b_off + offset_of(cb, pc.b_nb)];
  }
#else
  if (pc.p.w != 0) {  // a and d have one shape: a run per invocation (common.glsl)
    uvec4 c;
    uint len;
    if (!run_of(i, pc.d_ne, c, len)) return;
    const uint ao = pc.a_off + offset_of(c, pc.a_nb), dof = pc.d_off + offset_of(c, pc.d_nb);
    for (uint k = 0; k < len; ++k) d[dof + k * pc.d_nb.x] = CONVERT(a[ao + k * pc.a_nb.x]);
    return;
  }
  d[pc.d_off + offset_of(coords_of(i, pc.d_ne), pc.d_nb)] =
      CONVERT(a[pc.a_off + offset_of(coords_of(i, pc.a_ne), pc.a_nb)]);
#endif
}
