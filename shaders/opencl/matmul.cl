// matmul.cl: MUL_MAT, out[m, n] = sum_k a[k, m] * b[k, n] per batch, a of
// -DA_TYPE (0 f32, 1 f16), b and out f32.
//
// Large products: both operands are first packed into panels of f32
// (pack_panels: P[batch][tile][k][rows of the tile], zero-padded), then gemm
// gives each work-item a TILE_N x 16 block of the output: one float16 of
// 16 m values per n row, A panel read by vload16, the TILE_N b values
// broadcast from scalars, no local memory (on CPU drivers local memory is
// plain memory and barriers split the work-item loop). Both panels are read
// sequentially, so the speed does not fall off with K.
// Small N (matrix x vector): matvec reads a and b in place with float16 loads.

#ifndef A_TYPE
#define A_TYPE T_F32
#endif
#ifndef TILE_N
#define TILE_N 16
#endif

#if A_TYPE == T_F16
#define LOAD_A16(p) vload_half16(0, (__global const half *)(p))
#else
#define LOAD_A16(p) vload16(0, (__global const float *)(p))
#endif

// Packs rows of x [K, R, x2, x3] (dense rows) into panels of |tile| rows:
// p[batch * batch_stride + (r / tile) * K * tile + k * tile + r % tile].
// Global (K, R padded to the tile, x2 * x3). |is_a|: x has A_TYPE, else f32.
__kernel void pack_panels(TENSOR(x), __global float *p, ulong batch_stride, int tile, int is_a) {
  const long k = get_global_id(0);
  if (k >= x_ne.x) return;
  const long r = get_global_id(1), batch = get_global_id(2);
  const long i2 = batch % x_ne.z, i3 = batch / x_ne.z;
  float v = 0.0f;
  if (r < x_ne.y) {
    __global const char *src = ELEM_PTR(x, k, r, i2, i3);
    v = is_a ? LOAD_AS(A_TYPE, src) : *(__global const float *)src;
  }
  p[batch * batch_stride + (r / tile) * x_ne.x * tile + k * tile + r % tile] = v;
}

#define ACC_DECL(i) float16 c##i = 0.0f;
#define ACC_FMA(i) c##i = fma((float16)(bk[i]), av, c##i);
#define ACC_STORE(i)                                                                 \
  if (i < TILE_N && n0 + i < N) {                                                    \
    __global float *o = (__global float *)(row0 + (i) * d_nb.y);                     \
    if (full)                                                                        \
      vstore16(c##i, 0, o);                                                          \
    else                                                                             \
      for (int j = 0; j < mleft; ++j) o[j] = ((float *)&c##i)[j];                    \
  }

#if TILE_N == 16
#define FOR_TILE(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#else
#define FOR_TILE(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#endif

// Global (M tiles of 16, N tiles of TILE_N, batches of d). r2, r3: how many
// batches of d share one matrix of a in dims 2 and 3.
__kernel void gemm(__global const float *ap, __global const float *bp, long K, ulong a_batch_stride,
                   ulong b_batch_stride, long a_ne2, long r2, long r3, TENSOR(d)) {
  const long mt = get_global_id(0), nt = get_global_id(1), batch = get_global_id(2);
  const long M = d_ne.x, N = d_ne.y;
  const long i2 = batch % d_ne.z, i3 = batch / d_ne.z;
  const long abatch = (i3 / r3) * a_ne2 + i2 / r2;
  __global const float *A = ap + abatch * a_batch_stride + mt * K * 16;
  __global const float *B = bp + batch * b_batch_stride + nt * K * TILE_N;
  FOR_TILE(ACC_DECL)
  for (long k = 0; k < K; ++k) {
    const float16 av = vload16(k, A);
    __global const float *bk = B + k * TILE_N;
    FOR_TILE(ACC_FMA)
  }
  const long m0 = mt * 16, n0 = nt * TILE_N;
  if (m0 >= M) return;
  const bool full = m0 + 16 <= M;
  const int mleft = (int)(M - m0);
  __global char *row0 = ELEM_PTR(d, m0, n0, i2, i3);
  FOR_TILE(ACC_STORE)
}

// Four rows of a against one column of b. Global (ceil(M / 4), N rounded up
// to the group, batches): groups span columns too, so a small product is a
// few groups (each group costs the driver a task).
__kernel void matvec(TENSOR(a), TENSOR(b), TENSOR(d), long r2, long r3) {
  const long M = d_ne.x, K = a_ne.x;
  const long m0 = get_global_id(0) * 4;
  if (m0 >= M) return;
  const long n = get_global_id(1), batch = get_global_id(2);
  if (n >= d_ne.y) return;
  const long i2 = batch % d_ne.z, i3 = batch / d_ne.z;
  const long a2 = i2 / r2, a3 = i3 / r3;
  __global const char *pa0 = ELEM_PTR(a, 0, m0, a2, a3);
  __global const char *pa1 = ELEM_PTR(a, 0, min(m0 + 1, M - 1), a2, a3);
  __global const char *pa2 = ELEM_PTR(a, 0, min(m0 + 2, M - 1), a2, a3);
  __global const char *pa3 = ELEM_PTR(a, 0, min(m0 + 3, M - 1), a2, a3);
  __global const float *pb = (__global const float *)ELEM_PTR(b, 0, n, i2, i3);
  float16 acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
  long k = 0;
  const int es = TYPE_SIZE(A_TYPE);
  for (; k + 16 <= K; k += 16) {
    const float16 bv = vload16(0, pb + k);
    acc0 = fma(LOAD_A16(pa0 + k * es), bv, acc0);
    acc1 = fma(LOAD_A16(pa1 + k * es), bv, acc1);
    acc2 = fma(LOAD_A16(pa2 + k * es), bv, acc2);
    acc3 = fma(LOAD_A16(pa3 + k * es), bv, acc3);
  }
  float s0 = hsum16(acc0), s1 = hsum16(acc1), s2 = hsum16(acc2), s3 = hsum16(acc3);
  for (; k < K; ++k) {
    const float bv = pb[k];
    s0 += LOAD_AS(A_TYPE, pa0 + k * es) * bv;
    s1 += LOAD_AS(A_TYPE, pa1 + k * es) * bv;
    s2 += LOAD_AS(A_TYPE, pa2 + k * es) * bv;
    s3 += LOAD_AS(A_TYPE, pa3 + k * es) * bv;
  }
  __global float *o = (__global float *)ELEM_PTR(d, m0, n, i2, i3);
  o[0] = s0;
  if (m0 + 1 < M) o[1] = s1;
  if (m0 + 2 < M) o[2] = s2;
  if (m0 + 3 < M) o[3] = s3;
}
