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
// Small N (matrix x vector): matvec and matvec4 read a and b in place with
// float16 loads.

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

// Four rows of a against NC columns of b (matvec: 1, for a decoder's few
// columns; matvec4: 4, so each float16 of a loaded feeds four FMAs where
// there are columns enough). Global (ceil(M / 4), ceil(N / NC) rounded up to
// the group, batches): groups span columns too, so a small product is a few
// groups (each group costs the driver a task). Columns past N repeat the
// last one and are not stored.
#define MV_ACC(r, c) float16 acc##r##c = 0.0f;
#define MV_FMA(r, c) acc##r##c = fma(av##r, bv##c, acc##r##c);
#define MV_SUM(r, c) s[r][c] = hsum16(acc##r##c);
#define MV_COL(c, X) X(0, c) X(1, c) X(2, c) X(3, c)
#define MV_COLS1(X) MV_COL(0, X)
#define MV_COLS4(X) MV_COL(0, X) MV_COL(1, X) MV_COL(2, X) MV_COL(3, X)
#define MV_LOAD_B1 const float16 bv0 = vload16(0, pb[0] + k);
#define MV_LOAD_B4                                                         \
  const float16 bv0 = vload16(0, pb[0] + k), bv1 = vload16(0, pb[1] + k); \
  const float16 bv2 = vload16(0, pb[2] + k), bv3 = vload16(0, pb[3] + k);
#define MATVEC(NAME, NC)                                                                                     \
  __kernel void NAME(TENSOR(a), TENSOR(b), TENSOR(d), long r2, long r3) {                                    \
    const long M = d_ne.x, K = a_ne.x, N = d_ne.y;                                                           \
    const long m0 = get_global_id(0) * 4;                                                                    \
    if (m0 >= M) return;                                                                                     \
    const long n0 = get_global_id(1) * NC, batch = get_global_id(2);                                         \
    if (n0 >= N) return;                                                                                     \
    const long i2 = batch % d_ne.z, i3 = batch / d_ne.z;                                                     \
    const long a2 = i2 / r2, a3 = i3 / r3;                                                                   \
    __global const char *pa[4];                                                                              \
    for (int r = 0; r < 4; ++r) pa[r] = ELEM_PTR(a, 0, min(m0 + r, M - 1), a2, a3);                         \
    __global const float *pb[NC];                                                                            \
    for (int c = 0; c < NC; ++c) pb[c] = (__global const float *)ELEM_PTR(b, 0, min(n0 + c, N - 1), i2, i3); \
    MV_COLS##NC(MV_ACC)                                                                                      \
    long k = 0;                                                                                              \
    const int es = TYPE_SIZE(A_TYPE);                                                                        \
    for (; k + 16 <= K; k += 16) {                                                                           \
      const float16 av0 = LOAD_A16(pa[0] + k * es), av1 = LOAD_A16(pa[1] + k * es);                          \
      const float16 av2 = LOAD_A16(pa[2] + k * es), av3 = LOAD_A16(pa[3] + k * es);                          \
      MV_LOAD_B##NC                                                                                          \
      MV_COLS##NC(MV_FMA)                                                                                    \
    }                                                                                                        \
    float s[4][NC];                                                                                          \
    MV_COLS##NC(MV_SUM)                                                                                      \
    for (; k < K; ++k)                                                                                       \
      for (int r = 0; r < 4; ++r) {                                                                          \
        const float av = LOAD_AS(A_TYPE, pa[r] + k * es);                                                    \
        for (int c = 0; c < NC; ++c) s[r][c] += av * pb[c][k];                                               \
      }                                                                                                      \
    for (int c = 0; c < NC && n0 + c < N; ++c) {                                                             \
      __global float *o = (__global float *)ELEM_PTR(d, m0, n0 + c, i2, i3);                                 \
      for (int r = 0; r < 4 && m0 + r < M; ++r) o[r] = s[r][c];                                              \
    }                                                                                                        \
  }
MATVEC(matvec, 1)
MATVEC(matvec4, 4)
