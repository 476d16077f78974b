// matmul.cl: MUL_MAT, out[m, n] = sum_k a[k, m] * b[k, n] per batch, a of
// -DA_TYPE (0 f32, 1 f16, 3 bf16), b and out f32.
//
// One kernel for every shape: each work-item takes DOT_ROWS rows of a and
// DOT_COLS columns of b where they are (rows of both are contiguous in k)
// and keeps DOT_ROWS x DOT_COLS vector accumulators of VW lanes along k, so
// each loaded vector of a feeds DOT_COLS FMAs and each vector of b feeds
// DOT_ROWS; the lanes are summed once at the end. No packing and no local
// memory: on CPU drivers local memory is plain memory and barriers split the
// work-item loop, and copying a into panels first cost more than the
// product itself for a decoder's few columns (docs/plugins/opencl.md).
// Work-groups span 64 rows and up to 32 columns (the host picks 16 items
// by 32 / DOT_COLS), so a group's rows of a stay in cache while its columns
// pass over them.
// VW and DOT_COLS come per device from the host (-D options); DOT_ROWS is 4.
// -DEPILOGUE fuses the next node into the store (epilogue.h).

#include "epilogue.h"

#ifndef A_TYPE
#define A_TYPE T_F32
#endif
#ifndef VW
#define VW 16
#endif
#ifndef DOT_COLS
#define DOT_COLS 4
#endif
#define DOT_ROWS 4

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define floatV CAT(float, VW)
#if A_TYPE == T_F16
#define LOAD_AV(p) CAT(vload_half, VW)(0, (__global const half *)(p))
#elif A_TYPE == T_BF16
// VW bfloat16s widened exactly: each one's bits moved to the top of an f32.
#define LOAD_AV(p) CAT(as_float, VW)(CAT(convert_uint, VW)(CAT(vload, VW)(0, (__global const ushort *)(p))) << 16)
#else
#define LOAD_AV(p) CAT(vload, VW)(0, (__global const float *)(p))
#endif

inline float hsumV(floatV v) {
#if VW == 16
  return hsum16(v);
#elif VW == 8
  float4 b = v.lo + v.hi;
  float2 c = b.lo + b.hi;
  return c.x + c.y;
#else
  float2 c = v.lo + v.hi;
  return c.x + c.y;
#endif
}

// Global (ceil(M / DOT_ROWS), ceil(N / DOT_COLS), batches of d). r2, r3: how
// many batches of d share one matrix of a in dims 2 and 3. Rows and columns
// past the edge repeat the last one and are not stored.
__kernel void mul_mat_dot(TENSOR(a), TENSOR(b), TENSOR(d), long r2, long r3 EPILOGUE_ARGS) {
  const long M = d_ne.x, K = a_ne.x, N = d_ne.y;
  const long m0 = get_global_id(0) * DOT_ROWS;
  const long n0 = get_global_id(1) * DOT_COLS, batch = get_global_id(2);
  if (m0 >= M || n0 >= N) return;
  const long i2 = batch % d_ne.z, i3 = batch / d_ne.z;
  const long a2 = i2 / r2, a3 = i3 / r3;
  __global const char *pa[DOT_ROWS];
  __global const float *pb[DOT_COLS];
#pragma unroll
  for (int r = 0; r < DOT_ROWS; ++r) pa[r] = ELEM_PTR(a, 0, min(m0 + r, M - 1), a2, a3);
#pragma unroll
  for (int c = 0; c < DOT_COLS; ++c) pb[c] = (__global const float *)ELEM_PTR(b, 0, min(n0 + c, N - 1), i2, i3);
  floatV acc[DOT_ROWS][DOT_COLS];
#pragma unroll
  for (int r = 0; r < DOT_ROWS; ++r)
#pragma unroll
    for (int c = 0; c < DOT_COLS; ++c) acc[r][c] = 0.0f;
  const int es = TYPE_SIZE(A_TYPE);
  long k = 0;
  for (; k + VW <= K; k += VW) {
    floatV av[DOT_ROWS], bv[DOT_COLS];
#pragma unroll
    for (int r = 0; r < DOT_ROWS; ++r) av[r] = LOAD_AV(pa[r] + k * es);
#pragma unroll
    for (int c = 0; c < DOT_COLS; ++c) bv[c] = CAT(vload, VW)(0, pb[c] + k);
#pragma unroll
    for (int r = 0; r < DOT_ROWS; ++r)
#pragma unroll
      for (int c = 0; c < DOT_COLS; ++c) acc[r][c] = fma(av[r], bv[c], acc[r][c]);
  }
  float s[DOT_ROWS][DOT_COLS];
#pragma unroll
  for (int r = 0; r < DOT_ROWS; ++r)
#pragma unroll
    for (int c = 0; c < DOT_COLS; ++c) s[r][c] = hsumV(acc[r][c]);
  for (; k < K; ++k)
#pragma unroll
    for (int r = 0; r < DOT_ROWS; ++r) {
      const float av = LOAD_AS(A_TYPE, pa[r] + k * es);
#pragma unroll
      for (int c = 0; c < DOT_COLS; ++c) s[r][c] = fma(av, pb[c][k], s[r][c]);
    }
  for (int c = 0; c < DOT_COLS && n0 + c < N; ++c)
    for (int r = 0; r < DOT_ROWS && m0 + r < M; ++r) STORE_PRODUCT(m0 + r, n0 + c, i2, i3, s[r][c]);
}
