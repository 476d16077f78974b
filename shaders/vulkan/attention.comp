// attention.comp: ATTENTION, softmax(scale q k^T + mask) v, one workgroup of
// BLK invocations per query row (h, t, b), h fastest. The keys go by in
// blocks of BLK: invocation i scores key j0 + i (skipping the dot product
// where the mask is -inf), the workgroup reduces the block's maximum and sum
// (reduce.glsl), and the running maximum m and sum l carry the online
// softmax across blocks. Output channel c is invocation c % BLK's, slot
// c / BLK (ACC_N slots: Dv <= BLK * ACC_N), so a block's weights, kept in
// shared memory, are folded into every channel without any score matrix.
//
// KV_T (define): k's and v's type, float or float16_t. The plugin sets the
// workgroup size (constant_id 0) to BLK and MULTI (1) on; HAS_MASK
// (constant_id 2) reads the mask at binding 4.
//
// SPLITS (constant_id 3, > 1 for a decode step over a long cache): SPLITS
// workgroups share a row, each taking a run of whole key blocks, so a few
// query rows still fill a GPU; each writes its unnormalised partial sums
// and its running maximum and sum, Dv + 2 floats, to partial
// (row * SPLITS + split) of binding 2 (the plugin's scratch buffer, d_off
// 0), and attention_merge.comp combines them into the output.
//
// Bindings and push constants (common.glsl's block holds three tensors; v,
// the mask and the dense output share the words the output's own shape and
// strides would take). Offsets and strides in elements; every row is dense.
//   q:    binding 0, a_ne = [D, T, H, B], a_nb, a_off
//   k:    binding 1, b_ne = [D, N, Hk, B'], b_nb, b_off
//   out:  binding 2, contiguous [Dv, H, T, B] from d_off; n = H * T * B rows
//   v:    binding 3, d_ne = (Dv, nb1, nb2, nb3), offset p.y
//   mask: binding 4, d_nb = (nb1, nb2, nb3, offset), p.z, p.w = its ne2, ne3
//   p.x:  scale
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "reduce.glsl"

layout(constant_id = 2) const bool HAS_MASK = false;
layout(constant_id = 3) const uint SPLITS = 1;

const uint BLK = 64;
const uint ACC_N = 4;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { KV_T k[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(std430, binding = 3) readonly buffer V { KV_T v[]; };
layout(std430, binding = 4) readonly buffer M { float mask[]; };

shared float weight[BLK];

bool is_neg_inf(float x) { return isinf(x) && x < 0.0; }

void main() {
  const uint group = flat_workgroup(), row = group / SPLITS, split = group % SPLITS;
  if (row >= pc.n) return;
  const uint lid = gl_LocalInvocationID.x;
  const uint D = pc.a_ne.x, T = pc.a_ne.y, H = pc.a_ne.z;
  const uint h = row % H, t = (row / H) % T, b = row / (H * T);
  const uint N = pc.b_ne.y, hk = h / (H / pc.b_ne.z), bk = b / (pc.a_ne.w / pc.b_ne.w);
  const uint Dv = pc.d_ne.x, v_row = pc.d_ne.y;
  const uint q_base = pc.a_off + t * pc.a_nb.y + h * pc.a_nb.z + b * pc.a_nb.w;
  const uint k_base = pc.b_off + hk * pc.b_nb.z + bk * pc.b_nb.w;
  const uint v_base = pc.p.y + hk * pc.d_ne.z + bk * pc.d_ne.w;
  const uint m_base = pc.d_nb.w + t * pc.d_nb.x + (h % pc.p.z) * pc.d_nb.y + (b % pc.p.w) * pc.d_nb.z;
  const float scale = param_f(0), neg_inf = -1.0 / 0.0;

  float m = neg_inf, l = 0.0;
  float acc[ACC_N];
  [[unroll]] for (uint c = 0; c < ACC_N; ++c) acc[c] = 0.0;

  // This workgroup's keys: all of them, or with SPLITS a run of whole blocks.
  const uint chunk = (N + SPLITS * BLK - 1) / (SPLITS * BLK) * BLK;
  const uint j_begin = min(N, split * chunk), j_end = min(N, j_begin + chunk);
  for (uint j0 = j_begin; j0 < j_end; j0 += BLK) {
    const uint j = j0 + lid;
    float s = neg_inf;
    if (j < j_end) {
      const float add = HAS_MASK ? mask[m_base + j] : 0.0;
      if (!is_neg_inf(add)) {
        const uint k_row = k_base + j * pc.b_nb.y;
        float dot = 0.0;
        for (uint i = 0; i < D; ++i) dot += q[q_base + i] * float(k[k_row + i]);
        s = scale * dot + add;
      }
    }
    const float block_max = wg_max(s);
    if (is_neg_inf(block_max)) continue;  // the whole block masked (the same in every invocation)
    const float m_new = max(m, block_max);
    const float keep = is_neg_inf(m) ? 0.0 : exp(m - m_new);
    const float p = is_neg_inf(s) ? 0.0 : exp(s - m_new);
    weight[lid] = p;
    l = l * keep + wg_sum(p);
    m = m_new;
    barrier();  // every weight of the block written
    const uint n = min(BLK, j_end - j0);
    [[unroll]] for (uint c = 0; c < ACC_N; ++c) {
      const uint ch = lid + c * BLK;
      if (ch < Dv) {
        float a = acc[c] * keep;
        for (uint jj = 0; jj < n; ++jj) a += weight[jj] * float(v[v_base + (j0 + jj) * v_row + ch]);
        acc[c] = a;
      }
    }
    barrier();  // weight[] is rewritten by the next block
  }
  if (SPLITS > 1) {
    const uint part = group * (Dv + 2);
    [[unroll]] for (uint c = 0; c < ACC_N; ++c) {
      const uint ch = lid + c * BLK;
      if (ch < Dv) d[part + ch] = acc[c];
    }
    if (lid == 0) {
      d[part + Dv] = m;  // -inf where every key of the run is masked
      d[part + Dv + 1] = l;
    }
    return;
  }
  const uint out_base = pc.d_off + row * Dv;
  [[unroll]] for (uint c = 0; c < ACC_N; ++c) {
    const uint ch = lid + c * BLK;
    if (ch < Dv) d[out_base + ch] = l > 0.0 ? acc[c] / l : 0.0;  // fully masked: zeros
  }
}
