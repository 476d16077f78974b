// attention_merge.comp: the second dispatch of a split ATTENTION
// (attention.comp with SPLITS > 1): for each query row, the SPLITS partials
// (unnormalised sums acc_s, maximum m_s, sum l_s; Dv + 2 floats each, at
// binding 0) rescaled to the largest maximum M and combined:
//   out[c] = sum_s exp(m_s - M) acc_s[c] / sum_s exp(m_s - M) l_s
// A partial whose keys were all masked (m_s = -inf) adds nothing; a row
// with no unmasked key at all writes zeros, as the one-pass shader does.
// Push constants: n = rows, p.x = SPLITS, d_ne.x = Dv, d_off the output's
// offset (dense rows of Dv at binding 2).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer P { float part[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };

bool is_neg_inf(float x) { return isinf(x) && x < 0.0; }

void main() {
  const uint row = flat_workgroup();
  if (row >= pc.n) return;
  const uint splits = pc.p.x, Dv = pc.d_ne.x, stride = Dv + 2, base = row * splits * stride;
  float M = -1.0 / 0.0;
  for (uint s = 0; s < splits; ++s) M = max(M, part[base + s * stride + Dv]);
  float L = 0.0;
  for (uint s = 0; s < splits; ++s) {
    const float ms = part[base + s * stride + Dv];
    if (!is_neg_inf(ms)) L += exp(ms - M) * part[base + s * stride + Dv + 1];
  }
  for (uint ch = gl_LocalInvocationID.x; ch < Dv; ch += gl_WorkGroupSize.x) {
    float a = 0.0;
    for (uint s = 0; s < splits; ++s) {
      const float ms = part[base + s * stride + Dv];
      if (!is_neg_inf(ms)) a += exp(ms - M) * part[base + s * stride + ch];
    }
    d[pc.d_off + row * Dv + ch] = L > 0.0 ? a / L : 0.0;
  }
}
