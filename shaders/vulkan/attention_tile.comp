// attention_tile.comp: ATTENTION for prompts on GPUs (attention=tile, the
// default there for more than one query row): softmax(scale q k^T + mask) v
// for a tile of BQ query rows of one head (h, t0 .. t0 + BQ - 1, b) per
// workgroup, so each key and value is read once per tile instead of once
// per query row. The keys go by in blocks of BK, staged in shared memory
// with the tile's queries; each invocation scores BQ * BK / WG (query, key)
// pairs from there, one invocation per query row carries the online softmax
// (running maximum and sum, the block's weights written back over its
// scores), and each invocation folds the block's weights into the output
// channels it owns (lid + WG c) for every row of the tile, reading each
// value row of the block once, coalesced across the workgroup.
//
// Bindings and push constants: attention.comp's (plan_attention.cpp binds
// both the same way). KV_T: k's and v's type. HAS_MASK (constant_id 2).
// Limits (plan_attention.cpp, attention_tile_applies): D <= MAX_D, Dv <=
// WG * ACC_N. Rows of the tile past T are computed as fully masked and not
// stored.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 2) const bool HAS_MASK = false;

const uint WG = 128, BQ = 8, BK = 32, MAX_D = 128, ACC_N = 2;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { KV_T k[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(std430, binding = 3) readonly buffer V { KV_T v[]; };
layout(std430, binding = 4) readonly buffer M { float mask[]; };

shared float q_tile[BQ][MAX_D];
shared float k_block[BK][MAX_D + 1];  // +1: the score loop reads a column of keys
shared float score[BQ][BK];           // scores, then the block's weights
shared float keep[BQ], row_sum[BQ];

bool is_neg_inf(float x) { return isinf(x) && x < 0.0; }

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint D = pc.a_ne.x, T = pc.a_ne.y, H = pc.a_ne.z;
  const uint tiles = (T + BQ - 1) / BQ, group = flat_workgroup();
  if (group >= pc.n) return;
  const uint h = group % H, t0 = ((group / H) % tiles) * BQ, b = group / (H * tiles);
  const uint N = pc.b_ne.y, hk = h / (H / pc.b_ne.z), bk = b / (pc.a_ne.w / pc.b_ne.w);
  const uint Dv = pc.d_ne.x, v_row = pc.d_ne.y;
  const uint k_base = pc.b_off + hk * pc.b_nb.z + bk * pc.b_nb.w;
  const uint v_base = pc.p.y + hk * pc.d_ne.z + bk * pc.d_ne.w;
  const uint m_head = pc.d_nb.w + (h % pc.p.z) * pc.d_nb.y + (b % pc.p.w) * pc.d_nb.z;
  const float scale = param_f(0), neg_inf = -1.0 / 0.0;

  for (uint e = lid; e < BQ * D; e += WG) {
    const uint qi = e / D, i = e % D, t = t0 + qi;
    q_tile[qi][i] = t < T ? q[pc.a_off + t * pc.a_nb.y + h * pc.a_nb.z + b * pc.a_nb.w + i] : 0.0;
  }
  // The softmax state of row lid (lid < BQ): running maximum m, sum in row_sum.
  float m = neg_inf;
  if (lid < BQ) row_sum[lid] = 0.0;
  float acc[BQ][ACC_N];
  [[unroll]] for (uint qi = 0; qi < BQ; ++qi)[[unroll]] for (uint c = 0; c < ACC_N; ++c) acc[qi][c] = 0.0;

  for (uint j0 = 0; j0 < N; j0 += BK) {
    for (uint e = lid; e < BK * D; e += WG) {
      const uint jj = e / D, i = e % D;
      k_block[jj][i] = j0 + jj < N ? float(k[k_base + (j0 + jj) * pc.b_nb.y + i]) : 0.0;
    }
    barrier();  // the keys (and, first time, the queries) in shared memory
    for (uint e = lid; e < BQ * BK; e += WG) {
      const uint qi = e / BK, jj = e % BK, t = t0 + qi, j = j0 + jj;
      float s = neg_inf;
      if (t < T && j < N) {
        const float add = HAS_MASK ? mask[m_head + t * pc.d_nb.x + j] : 0.0;
        if (!is_neg_inf(add)) {
          float dot = 0.0;
          for (uint i = 0; i < D; ++i) dot += q_tile[qi][i] * k_block[jj][i];
          s = scale * dot + add;
        }
      }
      score[qi][jj] = s;
    }
    barrier();  // every score of the block
    if (lid < BQ) {
      float block_max = neg_inf;
      for (uint jj = 0; jj < BK; ++jj) block_max = max(block_max, score[lid][jj]);
      const float m_new = max(m, block_max);
      // A row masked so far keeps nothing and adds nothing (no -inf - -inf).
      const float kp = is_neg_inf(m) ? 0.0 : exp(m - m_new);
      float sum = 0.0;
      for (uint jj = 0; jj < BK; ++jj) {
        const float s = score[lid][jj];
        const float p = is_neg_inf(s) ? 0.0 : exp(s - m_new);
        score[lid][jj] = p;
        sum += p;
      }
      row_sum[lid] = row_sum[lid] * kp + sum;
      keep[lid] = kp;
      m = m_new;
    }
    barrier();  // the block's weights and each row's rescale
    const uint n = min(BK, N - j0);
    [[unroll]] for (uint c = 0; c < ACC_N; ++c) {
      const uint ch = lid + c * WG;
      if (ch < Dv) {
        [[unroll]] for (uint qi = 0; qi < BQ; ++qi) acc[qi][c] *= keep[qi];
        for (uint jj = 0; jj < n; ++jj) {
          const float vj = float(v[v_base + (j0 + jj) * v_row + ch]);
          [[unroll]] for (uint qi = 0; qi < BQ; ++qi) acc[qi][c] += score[qi][jj] * vj;
        }
      }
    }
    barrier();  // k_block and score are rewritten by the next block
  }
  barrier();  // row_sum written (also when there are no keys)
  [[unroll]] for (uint qi = 0; qi < BQ; ++qi) {
    const uint t = t0 + qi;
    if (t >= T) break;
    const float l = row_sum[qi];
    const uint out_base = pc.d_off + (h + H * (t + T * b)) * Dv;
    [[unroll]] for (uint c = 0; c < ACC_N; ++c) {
      const uint ch = lid + c * WG;
      if (ch < Dv) d[out_base + ch] = l > 0.0 ? acc[qi][c] / l : 0.0;  // fully masked: zeros
    }
  }
}
