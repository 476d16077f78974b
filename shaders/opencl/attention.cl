// attention.cl: ATTENTION, softmax(scale q k^T + mask) v, one work-group of
// BLK work-items per query row (h, t, b), h fastest. The keys go by in
// blocks of BLK: work-item i scores key j0 + i (skipping the dot product
// where the mask is -inf), the group reduces the block's maximum and sum in
// local memory, and the running maximum m and sum l carry the online
// softmax across blocks. Output channel c is work-item c % BLK's, slot
// c / BLK (ACC_N slots: Dv <= BLK * ACC_N), so a block's weights, kept in
// local memory, are folded into every channel without any score matrix.
// KV_TYPE (T_F32 / T_F16) is k's and v's type; HAS_MASK=1 adds the mask
// argument after v.
//
// attention_split (attention=split; auto on GPUs for a decode step over a
// long cache) runs the same loop in |splits| work-groups per row, each over
// a run of whole key blocks, so a few query rows still fill a GPU; each
// writes its unnormalised sums, maximum and sum (Dv + 2 floats) to the
// backend's scratch buffer, and attention_merge combines them.

#define BLK 64
#define ACC_N 4

#ifndef HAS_MASK
#define HAS_MASK 0
#endif
#if HAS_MASK
#define MASK_ARG TENSOR(mask),
#define MASK_PASS TENSOR_ARGS(mask),
// The mask's value for key j of query row t of head h, batch b.
#define MASK_ADD(j, t, h, b) (*(__global const float *)ELEM_PTR(mask, j, t, (h) % mask_ne.z, (b) % mask_ne.w))
#else
#define MASK_ARG
#define MASK_PASS
#define MASK_ADD(j, t, h, b) 0.0f
#endif

// Keys j_begin .. j_end - 1 (a multiple of BLK apart from the last run) of
// query row |row| through the online softmax: *m_out and *l_out the running
// maximum (-inf where every key is masked) and sum, acc[c] the unnormalised
// sum of channel lid + c * BLK. Called by every work-item of the group
// (it holds barriers).
inline void attention_keys(TENSOR(q), TENSOR(k), TENSOR(v), MASK_ARG float scale, long row, long j_begin, long j_end,
                           __local float *weight, __local float *red, float *m_out, float *l_out, float *acc) {
  const int lid = get_local_id(0);
  const long H = q_ne.z, T = q_ne.y;
  const long h = row % H, t = (row / H) % T, b = row / (H * T);
  const long hk = h / (H / k_ne.z), bk = b / (q_ne.w / k_ne.w);
  const long D = q_ne.x, Dv = v_ne.x;

  float m = -INFINITY, l = 0.0f;
  for (int c = 0; c < ACC_N; ++c) acc[c] = 0.0f;

  for (long j0 = j_begin; j0 < j_end; j0 += BLK) {
    const long j = j0 + lid;
    float s = -INFINITY;
    if (j < j_end) {
      const float add = MASK_ADD(j, t, h, b);
      if (add != -INFINITY) {
        float dot = 0.0f;
        for (long i = 0; i < D; ++i)
          dot += *(__global const float *)ELEM_PTR(q, i, t, h, b) * LOAD_AS(KV_TYPE, ELEM_PTR(k, i, j, hk, bk));
        s = scale * dot + add;
      }
    }
    red[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = BLK / 2; w > 0; w >>= 1) {
      if (lid < w) red[lid] = fmax(red[lid], red[lid + w]);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float block_max = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (block_max == -INFINITY) continue;  // the whole block masked (the same in every work-item)
    const float m_new = fmax(m, block_max);
    const float keep = m == -INFINITY ? 0.0f : exp(m - m_new);
    const float p = s == -INFINITY ? 0.0f : exp(s - m_new);
    weight[lid] = p;
    red[lid] = p;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = BLK / 2; w > 0; w >>= 1) {
      if (lid < w) red[lid] += red[lid + w];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    l = l * keep + red[0];
    m = m_new;
    const long n = min((long)BLK, j_end - j0);
    for (int c = 0; c < ACC_N; ++c) {
      const long ch = lid + (long)c * BLK;
      if (ch >= Dv) break;
      float a = acc[c] * keep;
      for (long jj = 0; jj < n; ++jj) a += weight[jj] * LOAD_AS(KV_TYPE, ELEM_PTR(v, ch, j0 + jj, hk, bk));
      acc[c] = a;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // weight and red are rewritten by the next block
  }
  *m_out = m;
  *l_out = l;
}

__kernel __attribute__((reqd_work_group_size(BLK, 1, 1))) void attention(TENSOR(q), TENSOR(k), TENSOR(v), MASK_ARG
                                                                          TENSOR(d), float scale) {
  __local float weight[BLK];
  __local float red[BLK];
  const int lid = get_local_id(0);
  const long row = get_group_id(0), H = q_ne.z, T = q_ne.y;
  const long h = row % H, t = (row / H) % T, b = row / (H * T);
  float m, l, acc[ACC_N];
  attention_keys(TENSOR_ARGS(q), TENSOR_ARGS(k), TENSOR_ARGS(v), MASK_PASS scale, row, 0, k_ne.y, weight, red, &m, &l,
                 acc);
  for (int c = 0; c < ACC_N; ++c) {
    const long ch = lid + (long)c * BLK;
    if (ch >= v_ne.x) break;
    *(__global float *)ELEM_PTR(d, ch, h, t, b) = l > 0.0f ? acc[c] / l : 0.0f;  // fully masked: zeros
  }
}

// Global (rows * splits * BLK): work-group g takes row g / splits and the
// (g % splits)-th run of the keys, runs of whole blocks, the last ones
// possibly empty. Its partial, at part + g * (Dv + 2) floats: the
// unnormalised sums of the Dv channels, then the maximum (-inf where every
// key of the run is masked, or the run is empty) and the sum.
__kernel __attribute__((reqd_work_group_size(BLK, 1, 1))) void attention_split(TENSOR(q), TENSOR(k), TENSOR(v),
                                                                              MASK_ARG __global float *part,
                                                                              float scale, int splits) {
  __local float weight[BLK];
  __local float red[BLK];
  const int lid = get_local_id(0);
  const long group = get_group_id(0), row = group / splits, split = group % splits;
  const long N = k_ne.y, Dv = v_ne.x;
  const long chunk = (N + splits * BLK - 1) / (splits * BLK) * BLK;
  const long j_begin = min(N, split * chunk), j_end = min(N, j_begin + chunk);
  float m, l, acc[ACC_N];
  attention_keys(TENSOR_ARGS(q), TENSOR_ARGS(k), TENSOR_ARGS(v), MASK_PASS scale, row, j_begin, j_end, weight, red, &m,
                 &l, acc);
  __global float *out = part + group * (Dv + 2);
  for (int c = 0; c < ACC_N; ++c) {
    const long ch = lid + (long)c * BLK;
    if (ch >= Dv) break;
    out[ch] = acc[c];
  }
  if (lid == 0) {
    out[Dv] = m;
    out[Dv + 1] = l;
  }
}

// The second launch of a split ATTENTION: a work-group of BLK per query row
// (global rows * BLK) rescales the row's |splits| partials to their largest
// maximum M and combines them:
//   out[c] = sum_s exp(m_s - M) acc_s[c] / sum_s exp(m_s - M) l_s
// A partial whose keys were all masked (m_s = -inf) adds nothing; a row
// with no unmasked key at all gets zeros, as attention writes.
__kernel __attribute__((reqd_work_group_size(BLK, 1, 1))) void attention_merge(__global const float *part, TENSOR(d),
                                                                              int splits) {
  const long row = get_group_id(0), Dv = d_ne.x, stride = Dv + 2;
  const long H = d_ne.y, T = d_ne.z;  // d is [Dv, H, T, B]
  const long h = row % H, t = (row / H) % T, b = row / (H * T);
  __global const float *base = part + row * splits * stride;
  float M = -INFINITY;
  for (int s = 0; s < splits; ++s) M = fmax(M, base[s * stride + Dv]);
  float L = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float ms = base[s * stride + Dv];
    if (ms != -INFINITY) L += exp(ms - M) * base[s * stride + Dv + 1];
  }
  for (long ch = get_local_id(0); ch < Dv; ch += BLK) {
    float a = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float ms = base[s * stride + Dv];
      if (ms != -INFINITY) a += exp(ms - M) * base[s * stride + ch];
    }
    *(__global float *)ELEM_PTR(d, ch, h, t, b) = L > 0.0f ? a / L : 0.0f;
  }
}

// attention_tile: the same result for a prompt on GPUs (attention=tile;
// auto on GPU devices for more than one query row), TQ query rows of one
// head (h, t0 .. t0 + TQ - 1, b) per work-group of TWG, so each key and
// value row is read once per TQ query rows instead of once per row. The
// tile's queries and a block of TK keys sit in local memory; each
// work-item scores TQ * TK / TWG (query, key) pairs from there, one
// work-item per query row carries its online softmax (the block's weights
// written back over its scores), and each work-item folds the weights into
// its output channels (lid + TWG c, c < TACC) for every row of the tile.
// Limits (ops.cpp, attention_tile_applies): D <= TMAX_D, Dv <= TWG * TACC.
// Rows of the last tile past T are computed as fully masked, not stored.
#define TQ 8
#define TK 32
#define TMAX_D 128
#define TWG 128
#define TACC 2

__kernel __attribute__((reqd_work_group_size(TWG, 1, 1))) void attention_tile(TENSOR(q), TENSOR(k), TENSOR(v),
                                                                             MASK_ARG TENSOR(d), float scale) {
  __local float q_tile[TQ][TMAX_D];
  __local float k_block[TK][TMAX_D + 1];
  __local float score[TQ][TK];
  __local float keep[TQ], row_sum[TQ];
  const int lid = get_local_id(0);
  const long H = q_ne.z, T = q_ne.y, D = q_ne.x, N = k_ne.y, Dv = v_ne.x;
  const long tiles = (T + TQ - 1) / TQ, group = get_group_id(0);
  const long h = group % H, t0 = ((group / H) % tiles) * TQ, b = group / (H * tiles);
  const long hk = h / (H / k_ne.z), bk = b / (q_ne.w / k_ne.w);

  for (long e = lid; e < TQ * D; e += TWG) {
    const long qi = e / D, i = e % D, t = t0 + qi;
    q_tile[qi][i] = t < T ? *(__global const float *)ELEM_PTR(q, i, t, h, b) : 0.0f;
  }
  float m = -INFINITY;  // row lid's running maximum (lid < TQ)
  if (lid < TQ) row_sum[lid] = 0.0f;
  float acc[TQ][TACC];
  for (int qi = 0; qi < TQ; ++qi)
    for (int c = 0; c < TACC; ++c) acc[qi][c] = 0.0f;

  for (long j0 = 0; j0 < N; j0 += TK) {
    for (long e = lid; e < TK * D; e += TWG) {
      const long jj = e / D, i = e % D;
      k_block[jj][i] = j0 + jj < N ? LOAD_AS(KV_TYPE, ELEM_PTR(k, i, j0 + jj, hk, bk)) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the keys (and, first time, the queries)
    for (int e = lid; e < TQ * TK; e += TWG) {
      const int qi = e / TK, jj = e % TK;
      const long t = t0 + qi, j = j0 + jj;
      float s = -INFINITY;
      if (t < T && j < N) {
        const float add = MASK_ADD(j, t, h, b);
        if (add != -INFINITY) {
          float dot = 0.0f;
          for (long i = 0; i < D; ++i) dot += q_tile[qi][i] * k_block[jj][i];
          s = scale * dot + add;
        }
      }
      score[qi][jj] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // every score of the block
    if (lid < TQ) {
      float block_max = -INFINITY;
      for (int jj = 0; jj < TK; ++jj) block_max = fmax(block_max, score[lid][jj]);
      const float m_new = fmax(m, block_max);
      // A row masked so far keeps nothing and adds nothing (no -inf - -inf).
      const float kp = m == -INFINITY ? 0.0f : exp(m - m_new);
      float sum = 0.0f;
      for (int jj = 0; jj < TK; ++jj) {
        const float s = score[lid][jj];
        const float p = s == -INFINITY ? 0.0f : exp(s - m_new);
        score[lid][jj] = p;
        sum += p;
      }
      row_sum[lid] = row_sum[lid] * kp + sum;
      keep[lid] = kp;
      m = m_new;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the block's weights and each row's rescale
    const long n = min((long)TK, N - j0);
    for (int c = 0; c < TACC; ++c) {
      const long ch = lid + (long)c * TWG;
      if (ch >= Dv) break;
      for (int qi = 0; qi < TQ; ++qi) acc[qi][c] *= keep[qi];
      for (long jj = 0; jj < n; ++jj) {
        const float vj = LOAD_AS(KV_TYPE, ELEM_PTR(v, ch, j0 + jj, hk, bk));
        for (int qi = 0; qi < TQ; ++qi) acc[qi][c] += score[qi][jj] * vj;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // k_block and score are rewritten by the next block
  }
  barrier(CLK_LOCAL_MEM_FENCE);  // row_sum written (also when there are no keys)
  for (int qi = 0; qi < TQ; ++qi) {
    const long t = t0 + qi;
    if (t >= T) break;
    const float l = row_sum[qi];
    for (int c = 0; c < TACC; ++c) {
      const long ch = lid + (long)c * TWG;
      if (ch >= Dv) break;
      *(__global float *)ELEM_PTR(d, ch, h, t, b) = l > 0.0f ? acc[qi][c] / l : 0.0f;  // fully masked: zeros
    }
  }
}
