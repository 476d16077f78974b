// rows.comp: the ops that reduce rows along dim 0. Two variants (CMake):
//
// - general: SUM_ROWS, MEAN, ARGMAX, NORM and RMS_NORM over any layout of the
//   f32 input, one workgroup per row. OP (constant_id 2): the op's
//   BP_VK_ROWS_* code (op_codes.h). p.x: eps. The output is written as raw
//   32-bit words (f32 bits, or the i32 index of ARGMAX) so one binding
//   serves both types. MUL_AFTER (constant_id 3, NORM and RMS_NORM; GPUs):
//   the MUL that follows the norm in the graph in the same dispatch, as in
//   the VEC4 variant: binding 1 the dense multiplier (b_off, p.z elements,
//   repeated), binding 3 the dense product at float offset p.y.
//
// - VEC4: the fast path of NORM, RMS_NORM and SOFT_MAX for f32 rows that are
//   contiguous with a multiple of 4 elements (and a 16-byte aligned start):
//   one invocation per row, reading RGBA32F uniform texel buffers and writing
//   an RGBA32F storage texel buffer. On lavapipe a workgroup per row pays a
//   task per row and the scalar SSBO loop; here 64 rows share a workgroup
//   and the sampler gathers 128 bits per lane (docs/plugins/vulkan.md, "On lavapipe"). OP
//   (constant_id 0): BP_VK_ROWS_NORM, _RMS_NORM or _SOFT_MAX. p.x: eps or scale; p.y:
//   1 when SOFT_MAX has a mask (f32, rows contiguous, strides b_nb in
//   texels). Offsets in texels; n = rows.
//
//   MUL_AFTER (constant_id 1, NORM and RMS_NORM only): the MUL that follows
//   the norm in the graph runs in the same dispatch, saving one (on lavapipe
//   a dispatch costs about 100 us of thread hand-offs, more than these
//   rows). Binding 1 is then the multiplier (p.z texels, repeated: one row
//   or the whole shape), binding 3 receives the product at float offset p.y.
//   The norm's own output is still written, so a later reader of it is
//   served.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "op_codes.h"

// NORM and RMS_NORM's factor: 1 / sqrt(mean square + eps), the mean square
// of x - mean (NORM) or of x (RMS_NORM) over a row of n0 elements.
float norm_factor(float sum_of_squares, float n0, float eps) { return 1.0 / sqrt(sum_of_squares / n0 + eps); }

#ifdef VEC4
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint OP = BP_VK_ROWS_RMS_NORM;
layout(constant_id = 1) const uint MUL_AFTER = 0;

layout(binding = 0) uniform samplerBuffer a;
layout(binding = 1) uniform samplerBuffer mask;
layout(binding = 2, rgba32f) uniform writeonly imageBuffer d;
layout(std430, binding = 3) writeonly buffer P { float prod[]; };

// Runs BODY(i) for i in [0, n), four at a time then the tail: llvmpipe runs
// a loop body as written, so four independent texels per iteration give its
// SIMD code the loads to overlap (docs/plugins/vulkan.md, "On lavapipe").
#define FOR_TEXELS(n, BODY)                            \
  {                                                    \
    const int n_ = int(n), n4_ = n_ & ~3;              \
    for (int i4_ = 0; i4_ < n4_; i4_ += 4) {           \
      [[unroll]] for (int j_ = 0; j_ < 4; ++j_) {      \
        const int i = i4_ + j_;                        \
        BODY;                                          \
      }                                                \
    }                                                  \
    for (int i = n4_; i < n_; ++i) {                   \
      BODY;                                            \
    }                                                  \
  }

// SOFT_MAX's input: a scaled texel plus the mask's.
vec4 scaled(int at, int mask_at, float scale, bool has_mask) {
  const vec4 v = texelFetch(a, at) * scale;
  return has_mask ? v + texelFetch(mask, mask_at) : v;
}

void main() {
  const uint row = flat_invocation();
  if (row >= pc.n) return;
  const uint n4 = pc.a_ne.x / 4;
  const int base = int(pc.a_off + row * n4), out_base = int(pc.d_off + row * n4);
  if (OP == BP_VK_ROWS_SOFT_MAX) {
    const uvec4 c = coords_of(row, uvec4(pc.a_ne.y, pc.a_ne.z, pc.a_ne.w, 1));
    const int mbase = int(pc.b_off + c.x * pc.b_nb.y + (c.y % pc.b_ne.z) * pc.b_nb.z + (c.z % pc.b_ne.w) * pc.b_nb.w);
    const bool has_mask = pc.p.y != 0u;
    const float scale = param_f(0);
    // One pass for the maximum and the sum: per lane of the vec4, a running
    // maximum and a sum of exponentials relative to it, rescaled once per
    // block of four texels (1.25 exponentials per element instead of 1, and
    // one read of the row fewer: the texel reads cost more on lavapipe).
    // -FLT_MAX, not -inf, starts the maximum so a masked (-inf) block adds
    // exp(-inf) = 0 and never computes -inf - -inf.
    const float lowest = -3.402823466e38;
    vec4 m4 = vec4(lowest), s4 = vec4(0.0);
    const int n_ = int(n4), n4_ = n_ & ~3;
    for (int i = 0; i < n4_; i += 4) {
      const vec4 v0 = scaled(base + i, mbase + i, scale, has_mask);
      const vec4 v1 = scaled(base + i + 1, mbase + i + 1, scale, has_mask);
      const vec4 v2 = scaled(base + i + 2, mbase + i + 2, scale, has_mask);
      const vec4 v3 = scaled(base + i + 3, mbase + i + 3, scale, has_mask);
      const vec4 mn = max(m4, max(max(v0, v1), max(v2, v3)));
      s4 = s4 * exp(m4 - mn) + ((exp(v0 - mn) + exp(v1 - mn)) + (exp(v2 - mn) + exp(v3 - mn)));
      m4 = mn;
    }
    for (int i = n4_; i < n_; ++i) {
      const vec4 v = scaled(base + i, mbase + i, scale, has_mask);
      const vec4 mn = max(m4, v);
      s4 = s4 * exp(m4 - mn) + exp(v - mn);
      m4 = mn;
    }
    const float m = max(max(m4.x, m4.y), max(m4.z, m4.w));
    s4 *= exp(m4 - m);
    const float sum = (s4.x + s4.y) + (s4.z + s4.w);
    if (sum == 0.0) {  // every element -inf
      for (int i = 0; i < n_; ++i) imageStore(d, out_base + i, vec4(0.0));
      return;
    }
    const float inv = 1.0 / sum;
    FOR_TEXELS(n4, imageStore(d, out_base + i, exp(scaled(base + i, mbase + i, scale, has_mask) - m) * inv));
    return;
  }
  const float n0 = float(pc.a_ne.x), eps = param_f(0);
  vec4 s4 = vec4(0.0);
  FOR_TEXELS(n4, const vec4 x = texelFetch(a, base + i); s4 += OP == BP_VK_ROWS_RMS_NORM ? x * x : x);
  const float sum = (s4.x + s4.y) + (s4.z + s4.w);
  float mean = 0.0, inv;
  if (OP == BP_VK_ROWS_NORM) {
    mean = sum / n0;
    vec4 v4 = vec4(0.0);
    for (int i = 0; i < int(n4); ++i) {
      const vec4 x = texelFetch(a, base + i) - mean;
      v4 += x * x;
    }
    inv = norm_factor((v4.x + v4.y) + (v4.z + v4.w), n0, eps);
  } else {
    inv = norm_factor(sum, n0, eps);
  }
  if (MUL_AFTER == 0) {
    FOR_TEXELS(n4, imageStore(d, out_base + i, (texelFetch(a, base + i) - mean) * inv));
    return;
  }
  // Row-local and index by index, so the product may reuse the norm's or
  // the input's memory (the allocator's in-place reuse).
  const uint prod_base = pc.p.y + row * pc.a_ne.x, period = pc.p.z;
  for (uint i = 0; i < n4; ++i) {
    const vec4 y = (texelFetch(a, base + int(i)) - mean) * inv;
    imageStore(d, out_base + int(i), y);
    const vec4 z = y * texelFetch(mask, int(pc.b_off + (row * n4 + i) % period));
    prod[prod_base + 4 * i] = z.x;
    prod[prod_base + 4 * i + 1] = z.y;
    prod[prod_base + 4 * i + 2] = z.z;
    prod[prod_base + 4 * i + 3] = z.w;
  }
}
#else
#include "reduce.glsl"

layout(constant_id = 2) const uint OP = BP_VK_ROWS_SUM_ROWS;
layout(constant_id = 3) const bool MUL_AFTER = false;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer M { float mul_by[]; };
layout(std430, binding = 2) writeonly buffer D { uint d[]; };
layout(std430, binding = 3) writeonly buffer P { float prod[]; };

void main() {
  const uint row = flat_workgroup();
  if (row >= pc.n) return;
  const uint lane = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
  const uint n0 = pc.a_ne.x;
  const uvec4 c = coords_of(row * n0, pc.a_ne);
  const uint base = pc.a_off + offset_of(c, pc.a_nb), s0 = pc.a_nb.x;

  if (OP == BP_VK_ROWS_ARGMAX) {
    float best = -1.0 / 0.0;
    uint where = 0xffffffffu;
    for (uint i = lane; i < n0; i += step) {
      const float x = a[base + i * s0];
      if (where == 0xffffffffu || x > best) {
        best = x;
        where = i;
      }
    }
    const float m = wg_max(where == 0xffffffffu ? -1.0 / 0.0 : best);
    const uint first = wg_min_u(where != 0xffffffffu && best == m ? where : 0xffffffffu);
    if (lane == 0) d[pc.d_off + row] = first == 0xffffffffu ? 0u : first;
    return;
  }

  float sum = 0.0;
  for (uint i = lane; i < n0; i += step) {
    const float x = a[base + i * s0];
    sum += OP == BP_VK_ROWS_RMS_NORM ? x * x : x;
  }
  sum = wg_sum(sum);
  if (OP == BP_VK_ROWS_SUM_ROWS || OP == BP_VK_ROWS_MEAN) {
    if (lane == 0) d[pc.d_off + row] = floatBitsToUint(OP == BP_VK_ROWS_MEAN ? sum / float(n0) : sum);
    return;
  }
  const uint out_base = pc.d_off + offset_of(c, pc.d_nb), o0 = pc.d_nb.x;
  const float eps = param_f(0);
  float mean = 0.0, inv;
  if (OP == BP_VK_ROWS_NORM) {
    mean = sum / float(n0);
    float var = 0.0;
    for (uint i = lane; i < n0; i += step) {
      const float x = a[base + i * s0] - mean;
      var += x * x;
    }
    inv = norm_factor(wg_sum(var), float(n0), eps);
  } else {
    inv = norm_factor(sum, float(n0), eps);
  }
  for (uint i = lane; i < n0; i += step) {
    const float y = (a[base + i * s0] - mean) * inv;
    d[out_base + i * o0] = floatBitsToUint(y);
    // Element by element in one invocation: the product may take the
    // norm's or the input's memory (the allocator's in-place reuse).
    if (MUL_AFTER) prod[pc.p.y + row * n0 + i] = y * mul_by[pc.b_off + (row * n0 + i) % pc.p.z];
  }
}
#endif
