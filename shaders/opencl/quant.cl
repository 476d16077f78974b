// quant.cl: quantized weights (-DBP_QTYPE, a bp_type number: 3 Q8_0, 4 Q4_0,
// 5 Q5_0, 6 Q4_K, 7 Q6_K, 8 Q5_K, 9 BF16; 0 F32 and 1 F16 for mul_mat_tiled): MUL_MAT by f32 columns and GET_ROWS into f32
// rows. The block decoders are shaders/common/quant.h's, shared with the
// Vulkan shaders; here a block position is a byte pointer, and f16 scales
// are read with vload_half (core OpenCL: no cl_khr_fp16 needed).

#define BP_QPTR __global const uchar *
#define BP_Q_WORD(p) as_uint(vload4(0, (p)))
#define BP_Q_BYTE(p) ((uint)*(p))
#define BP_Q_HALF(p) vload_half(0, (__global const half *)(p))
#define BP_Q_FLOAT4 float4
#define BP_Q_BYTES4(q) convert_float4(as_uchar4(q))
#define BP_Q_BITS4(x, y, z, w) as_float4((uint4)((x), (y), (z), (w)))
#define BP_Q_FLOATS4(x, y, z, w) ((float4)((x), (y), (z), (w)))
#include "../common/quant.h"
// -DEPILOGUE fuses the next node into the products' stores.
#include "epilogue.h"

#ifndef WG
#define WG 64
#endif
#ifndef NCOLS
#define NCOLS 1
#endif

// out[m, n] = sum_k a[k, m] * b[k, n] per batch: a work-group of WG items
// per row m of a and NCOLS columns of b (global (M * WG, ceil(N / NCOLS),
// batches of d)). Each item takes groups of BP_Q_GROUP values of k sharing a
// scale, decodes 4 at a time and uses them for all NCOLS columns; the
// partial sums meet in local memory. r2, r3: batches of d per matrix of a.
// Columns past N read the last one again and are not stored.
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void mul_mv_q(TENSOR(a), TENSOR(b), TENSOR(d), long r2,
                                                                         long r3 EPILOGUE_ARGS) {
  __local float red[NCOLS][WG];
  const int lid = get_local_id(0);
  const long m = get_group_id(0), N = d_ne.y, n0 = get_global_id(1) * NCOLS, batch = get_global_id(2);
  const long i2 = batch % d_ne.z, i3 = batch / d_ne.z;
  BP_QPTR row = (BP_QPTR)ELEM_PTR(a, 0, m, i2 / r2, i3 / r3);
  __global const float *pb[NCOLS];
  float acc[NCOLS];
#pragma unroll
  for (int c = 0; c < NCOLS; ++c) {
    pb[c] = (__global const float *)ELEM_PTR(b, 0, min(n0 + c, N - 1), i2, i3);
    acc[c] = 0.0f;
  }
  const uint groups = (uint)(a_ne.x / BP_Q_GROUP);
  for (uint g = lid; g < groups; g += WG) {
    const uint k0 = g * BP_Q_GROUP, j0 = k0 % BP_QK;
    BP_QPTR blk = row + (k0 / BP_QK) * BP_Q_BYTES;
    const float sc = bp_q_scale(blk, j0), mn = bp_q_min(blk, j0);
#pragma unroll
    for (uint i = 0; i < BP_Q_GROUP; i += 4) {
      const float4 v = bp_q_values4(blk, j0 + i, sc, mn);
#pragma unroll
      for (int c = 0; c < NCOLS; ++c) acc[c] += dot(v, vload4(0, pb[c] + k0 + i));
    }
  }
#pragma unroll
  for (int c = 0; c < NCOLS; ++c) red[c][lid] = acc[c];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (lid < s)
#pragma unroll
      for (int c = 0; c < NCOLS; ++c) red[c][lid] += red[c][lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0)
    for (int c = 0; c < NCOLS && n0 + c < N; ++c) STORE_PRODUCT(m, n0 + c, i2, i3, red[c][0]);
}

// out[:, n, i2, i3] = s[:, ids[n, i2, i3], i2, i3] as f32, 4 values per
// work-item (global (ne.x / 4, rows of d)); rows hold whole blocks. The host
// checked the ids (ops.cpp, check_row_ids); the clamp only keeps a racing
// change of them in bounds.
__kernel void get_rows_q(TENSOR(s), TENSOR(ids), TENSOR(d)) {
  const long k = get_global_id(0) * 4;
  if (k >= d_ne.x) return;
  const long r = get_global_id(1);
  ROW_INDEX(d_ne, r, n, i2, i3);
  int id = *(__global const int *)ELEM_PTR(ids, n, i2 % ids_ne.y, i3 % ids_ne.z, 0);
  id = clamp(id, 0, (int)s_ne.y - 1);
  BP_QPTR blk = (BP_QPTR)ELEM_PTR(s, 0, id, i2 % s_ne.z, i3 % s_ne.w) + (k / BP_QK) * BP_Q_BYTES;
  const uint j = (uint)(k % BP_QK);
  const float4 v = bp_q_values4(blk, j, bp_q_scale(blk, j), bp_q_min(blk, j));
  *(__global float *)ELEM_PTR(d, k, n, i2, i3) = v.x;
  *(__global float *)ELEM_PTR(d, k + 1, n, i2, i3) = v.y;
  *(__global float *)ELEM_PTR(d, k + 2, n, i2, i3) = v.z;
  *(__global float *)ELEM_PTR(d, k + 3, n, i2, i3) = v.w;
}

// out[m, n] = sum_k a[k, m] * b[k, n] per batch, staged through local memory:
// the GPU-shaped product of every weight type (F32 and F16 included) where
// K % 4 == 0. A work-group of 16 x 16 items computes a TILE x TILE block of
// the output (global (ceil(M / TILE) * 16, ceil(N / TILE) * 16, batches of
// d)); per step of TK values of k its 256 items decode 4 values of a each
// (one row, bp_q_values4) and load 4 of b into local memory, k-major, so a
// tile of a is decoded once per step and read TILE / 16 times from local
// memory by every item; each item keeps (TILE / 16)^2 sums, rows lx + 16 i
// and columns ly + 16 j, so neighbouring items read neighbouring local
// words. Rows and columns past the edge load a clamped one and are not
// stored; steps past K load zeros. r2, r3 as mul_mv_q's.
#define TILE 64
#define TK 16
#define PER (TILE / 16)
__kernel __attribute__((reqd_work_group_size(16, 16, 1))) void mul_mat_tiled(TENSOR(a), TENSOR(b), TENSOR(d), long r2,
                                                                           long r3 EPILOGUE_ARGS) {
  __local float as[TK][TILE + 1], bs[TK][TILE + 1];
  const int lx = get_local_id(0), ly = get_local_id(1), lid = ly * 16 + lx;
  const long M = d_ne.x, N = d_ne.y, K = a_ne.x, batch = get_global_id(2);
  const long m0 = get_group_id(0) * TILE, n0 = get_group_id(1) * TILE;
  const long i2 = batch % d_ne.z, i3 = batch / d_ne.z;
  // This item's loads: row (and column) lid / 4 of the tile, values
  // (lid % 4) * 4 .. + 3 of each step.
  const int lr = lid / 4, lk = (lid % 4) * 4;
  BP_QPTR arow = (BP_QPTR)ELEM_PTR(a, 0, min(m0 + lr, M - 1), i2 / r2, i3 / r3);
  __global const float *bcol = (__global const float *)ELEM_PTR(b, 0, min(n0 + lr, N - 1), i2, i3);
  float acc[PER][PER];
  for (int i = 0; i < PER; ++i)
    for (int j = 0; j < PER; ++j) acc[i][j] = 0.0f;
  for (long k0 = 0; k0 < K; k0 += TK) {
    const long k = k0 + lk;
    float4 av = (float4)(0.0f), bv = (float4)(0.0f);
    if (k < K) {  // K % 4 == 0: the 4 values are inside the row
      BP_QPTR blk = arow + ((uint)k / BP_QK) * BP_Q_BYTES;
      const uint j = (uint)k % BP_QK;
      av = bp_q_values4(blk, j, bp_q_scale(blk, j), bp_q_min(blk, j));
      bv = vload4(0, bcol + k);
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the previous step's reads are done
    as[lk][lr] = av.x;
    as[lk + 1][lr] = av.y;
    as[lk + 2][lr] = av.z;
    as[lk + 3][lr] = av.w;
    bs[lk][lr] = bv.x;
    bs[lk + 1][lr] = bv.y;
    bs[lk + 2][lr] = bv.z;
    bs[lk + 3][lr] = bv.w;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TK; ++kk) {
      float ar[PER], br[PER];
      for (int i = 0; i < PER; ++i) ar[i] = as[kk][lx + 16 * i];
      for (int j = 0; j < PER; ++j) br[j] = bs[kk][ly + 16 * j];
      for (int i = 0; i < PER; ++i)
        for (int j = 0; j < PER; ++j) acc[i][j] = fma(ar[i], br[j], acc[i][j]);
    }
  }
  for (int j = 0; j < PER; ++j) {
    const long n = n0 + ly + 16 * j;
    if (n >= N) break;
    for (int i = 0; i < PER; ++i) {
      const long m = m0 + lx + 16 * i;
      if (m < M) STORE_PRODUCT(m, n, i2, i3, acc[i][j]);
    }
  }
}
