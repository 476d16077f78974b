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

#define BLK 64
#define ACC_N 4

#ifndef HAS_MASK
#define HAS_MASK 0
#endif
#if HAS_MASK
#define MASK_ARG TENSOR(mask),
#else
#define MASK_ARG
#endif

__kernel __attribute__((reqd_work_group_size(BLK, 1, 1))) void attention(TENSOR(q), TENSOR(k), TENSOR(v), MASK_ARG
                                                                          TENSOR(d), float scale) {
  __local float weight[BLK];
  __local float red[BLK];
  const int lid = get_local_id(0);
  const long H = q_ne.z, T = q_ne.y;
  const long row = get_group_id(0);
  const long h = row % H, t = (row / H) % T, b = row / (H * T);
  const long hk = h / (H / k_ne.z), bk = b / (q_ne.w / k_ne.w);
  const long D = q_ne.x, N = k_ne.y, Dv = v_ne.x;

  float m = -INFINITY, l = 0.0f;
  float acc[ACC_N];
  for (int c = 0; c < ACC_N; ++c) acc[c] = 0.0f;

  for (long j0 = 0; j0 < N; j0 += BLK) {
    const long j = j0 + lid;
    float s = -INFINITY;
    if (j < N) {
#if HAS_MASK
      const float add = *(__global const float *)ELEM_PTR(mask, j, t, h % mask_ne.z, b % mask_ne.w);
#else
      const float add = 0.0f;
#endif
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
    const long n = min((long)BLK, N - j0);
    for (int c = 0; c < ACC_N; ++c) {
      const long ch = lid + (long)c * BLK;
      if (ch >= Dv) break;
      float a = acc[c] * keep;
      for (long jj = 0; jj < n; ++jj) a += weight[jj] * LOAD_AS(KV_TYPE, ELEM_PTR(v, ch, j0 + jj, hk, bk));
      acc[c] = a;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // weight and red are rewritten by the next block
  }
  for (int c = 0; c < ACC_N; ++c) {
    const long ch = lid + (long)c * BLK;
    if (ch >= Dv) break;
    *(__global float *)ELEM_PTR(d, ch, h, t, b) = l > 0.0f ? acc[c] / l : 0.0f;  // fully masked: zeros
  }
}
