// rows.cl: reductions and normalisations over dim 0: SUM_ROWS, MEAN, ARGMAX,
// NORM, RMS_NORM, SOFT_MAX (optional mask of -DMASK_TYPE, 0 f32 / 1 f16).
// One work-item per row; dense rows are walked with float16 vectors (the
// driver does not vectorize a kernel with an inner loop by itself), other
// rows element by element through the strides. Outputs are dense.

#ifndef MASK_TYPE
#define MASK_TYPE T_F32
#endif

#define ROW_PROLOGUE(a)                                 \
  const long r = get_global_id(0);                      \
  if (r >= a##_ne.y * a##_ne.z * a##_ne.w) return;      \
  ROW_INDEX(a##_ne, r, i1, i2, i3);                     \
  const long n = a##_ne.x;                              \
  __global const char *pa = ELEM_PTR(a, 0, i1, i2, i3); \
  const long sa = a##_nb.x;                             \
  const bool dense = sa == 4

inline float row_sum(__global const char *pa, long n, long sa, bool dense) {
  float s = 0.0f;
  long k = 0;
  if (dense) {
    __global const float *x = (__global const float *)pa;
    float16 acc = 0.0f;
    for (; k + 16 <= n; k += 16) acc += vload16(0, x + k);
    s = hsum16(acc);
  }
  for (; k < n; ++k) s += *(__global const float *)(pa + k * sa);
  return s;
}

// Sum of (x - c)^2.
inline float row_sum_sq(__global const char *pa, long n, long sa, bool dense, float c) {
  float s = 0.0f;
  long k = 0;
  if (dense) {
    __global const float *x = (__global const float *)pa;
    float16 acc = 0.0f;
    for (; k + 16 <= n; k += 16) {
      float16 v = vload16(0, x + k) - c;
      acc = fma(v, v, acc);
    }
    s = hsum16(acc);
  }
  for (; k < n; ++k) {
    float v = *(__global const float *)(pa + k * sa) - c;
    s += v * v;
  }
  return s;
}

// mode 0: SUM_ROWS, 1: MEAN. Output element r (the node is dense).
__kernel void sum_rows(TENSOR(a), TENSOR(d), int mode) {
  ROW_PROLOGUE(a);
  float s = row_sum(pa, n, sa, dense);
  if (mode == 1) s /= (float)n;
  *(__global float *)(d_p + d_off + r * 4) = s;
}

__kernel void argmax(TENSOR(a), TENSOR(d)) {
  ROW_PROLOGUE(a);
  (void)dense;
  float best = *(__global const float *)pa;
  int at = 0;
  for (long k = 1; k < n; ++k) {
    float v = *(__global const float *)(pa + k * sa);
    if (v > best) {
      best = v;
      at = (int)k;
    }
  }
  *(__global int *)(d_p + d_off + r * 4) = at;
}

// mode 0: NORM, 1: RMS_NORM. d has a's shape, dense.
// A row's mean (0 for RMS_NORM, mode 1) and the factor that normalises it;
// norm and norm_mul share it, so their results are the same bits.
inline float2 norm_stats(__global const char *pa, long n, long sa, bool dense, int mode, float eps) {
  if (mode == 0) {
    const float mean = row_sum(pa, n, sa, dense) / (float)n;
    return (float2)(mean, rsqrt(row_sum_sq(pa, n, sa, dense, mean) / (float)n + eps));
  }
  return (float2)(0.0f, 1.0f / sqrt(row_sum_sq(pa, n, sa, dense, 0.0f) / (float)n + eps));
}

__kernel void norm(TENSOR(a), TENSOR(d), int mode, float eps) {
  ROW_PROLOGUE(a);
  __global float *y = (__global float *)(d_p + d_off + r * n * 4);
  const float2 stats = norm_stats(pa, n, sa, dense, mode, eps);
  const float mean = stats.x, inv = stats.y;
  long k = 0;
  if (dense) {
    __global const float *x = (__global const float *)pa;
    for (; k + 16 <= n; k += 16) vstore16((vload16(0, x + k) - mean) * inv, 0, y + k);
  }
  for (; k < n; ++k) y[k] = (*(__global const float *)(pa + k * sa) - mean) * inv;
}

// vstore16 is assembled by PoCL 3.1 from four 16-byte stores and three
// extracts; a store through a float16 type aligned like a float is one
// (unaligned) vector store. OpenCL C allows lowering a typedef's alignment.
typedef float16 float16_a4 __attribute__((aligned(4)));
#define STORE16(v, p) (*(__global float16_a4 *)(p) = (v))

// Maximum without fmax's NaN handling, which costs PoCL three more vector
// instructions in the dependent chain of each step (one vmaxps here); a NaN
// in v is skipped, as fmax would, and comes back through the exponential.
inline float16 max_skip_nan16(float16 m, float16 v) { return v > m ? v : m; }

// 2^z for z < 128 (here z <= 0 up to rounding), -inf and NaN included: z
// rounded to the nearest integer n by the 1.5 * 2^23 trick, 2^(z - n) from a
// degree-5 minimax polynomial on [-0.5, 0.5] (relative error 1.6e-7, below
// that of z itself), times 2^n built in the exponent bits. z is first clamped
// to -127, where that factor is exactly 0: -inf (a masked entry) gives 0, and
// so does everything below about 2^-126.5 (where exp gives denormals). PoCL's
// own exp also checks for overflow and scales in two steps: twice the
// instructions, and the SOFT_MAX loop is bound by them.
inline float16 exp2_nonpos16(float16 z) {
  z = z < -127.0f ? -127.0f : z;
  z = z > 0.0f ? 0.0f : z;  // the rounding of a contracted x * scale - max (NaN passes)
  const float16 t = z + 0x1.8p23f;  // the integer nearest z, in t's low bits
  const float16 f = z - (t - 0x1.8p23f);
  float16 p = 1.327647245e-03f;
  p = fma(p, f, 9.675540961e-03f);
  p = fma(p, f, 5.550713092e-02f);
  p = fma(p, f, 2.402212024e-01f);
  p = fma(p, f, 6.931469440e-01f);
  p = fma(p, f, 1.000000119e+00f);
  return p * as_float16((as_int16(t) - (0x4B400000 - 127)) << 23);
}

#if MASK_TYPE == T_F16
#define MASK16(pm, k) vload_half16(0, (__global const half *)(pm) + (k))
#else
#define MASK16(pm, k) vload16(0, (__global const float *)(pm) + (k))
#endif

// y = softmax(x * scale + mask) per row (has_mask: a compile-time constant in
// each kernel below); the mask row is (i1, i2, i3) modulo the mask's extents.
// A row that is all -inf gives zeros.
//
// Three passes: the maximum; the exponentials into y and their sum; y times
// 1 / sum. Where x and the mask are dense, the first pass stores nothing and
// the second recomputes x * scale + mask from x (still in L1): cheaper than
// writing y and reading it back. Elsewhere, and in the last n % 16 elements
// of a dense row, the first pass gathers x * scale + mask into y element by
// element, so that the second reads it in float16 steps. Exponentials of
// float16 go through exp2_nonpos16 ((x * scale + mask - max) times log2 e).
inline void soft_max_row(TENSOR(a), TENSOR(m), TENSOR(d), const bool has_mask, float scale) {
  ROW_PROLOGUE(a);
  __global float *y = (__global float *)(d_p + d_off + r * n * 4);
  __global const char *pm = has_mask ? ELEM_PTR(m, 0, i1 % m_ne.y, i2 % m_ne.z, i3 % m_ne.w) : pa;
  const long sm = has_mask ? m_nb.x : 0;
  const bool vec = dense && (!has_mask || sm == TYPE_SIZE(MASK_TYPE));
  __global const float *x = (__global const float *)pa;
  const long nv = vec ? n & ~15L : 0;  // [0, nv): recomputed from x and the mask
  const long n16 = n & ~15L;           // [nv, n16): float16 steps over y
  // Pass 1: the maximum of x * scale + mask. Two accumulators: a step does
  // not wait on the previous one.
  float mx = -INFINITY;
  if (nv > 0) {
    float16 m0 = -INFINITY, m1 = -INFINITY;
    long k = 0;
    if (has_mask) {
      for (; k + 32 <= nv; k += 32) {
        m0 = max_skip_nan16(m0, fma(vload16(0, x + k), scale, MASK16(pm, k)));
        m1 = max_skip_nan16(m1, fma(vload16(0, x + k + 16), scale, MASK16(pm, k + 16)));
      }
      if (k < nv) m0 = max_skip_nan16(m0, fma(vload16(0, x + k), scale, MASK16(pm, k)));
    } else {
      for (; k + 32 <= nv; k += 32) {
        m0 = max_skip_nan16(m0, vload16(0, x + k) * scale);
        m1 = max_skip_nan16(m1, vload16(0, x + k + 16) * scale);
      }
      if (k < nv) m0 = max_skip_nan16(m0, vload16(0, x + k) * scale);
    }
    mx = hmax16(max_skip_nan16(m0, m1));
  }
  for (long k = nv; k < n; ++k) {
    float v = *(__global const float *)(pa + k * sa) * scale;
    if (has_mask) v += LOAD_AS(MASK_TYPE, pm + k * sm);
    y[k] = v;
    mx = fmax(mx, v);
  }
  if (mx == -INFINITY) {
    for (long k = 0; k < n; ++k) y[k] = 0.0f;
    return;
  }
  // Pass 2: exponentials and their sum. The value is recomputed exactly as
  // pass 1 did and the maximum subtracted before the scaling by log2 e, so
  // z <= 0 exactly: folding the subtraction into one fma with mx * log2 e
  // left z up to half an ulp of that product above 0 (hundreds once |mx| is
  // 1e10, past exp2_nonpos16's range: NaN) and mx * log2 e overflowed to inf
  // for mx above 2.4e38 (every exponential 0, so 0 / 0).
  float16 vsum = 0.0f;
  if (has_mask) {
    for (long k = 0; k < nv; k += 16) {
      const float16 e = exp2_nonpos16((fma(vload16(0, x + k), scale, MASK16(pm, k)) - mx) * M_LOG2E_F);
      STORE16(e, y + k);
      vsum += e;
    }
  } else {
    for (long k = 0; k < nv; k += 16) {
      const float16 e = exp2_nonpos16((vload16(0, x + k) * scale - mx) * M_LOG2E_F);
      STORE16(e, y + k);
      vsum += e;
    }
  }
  for (long k = nv; k < n16; k += 16) {
    const float16 e = exp2_nonpos16((vload16(0, y + k) - mx) * M_LOG2E_F);
    STORE16(e, y + k);
    vsum += e;
  }
  float sum = hsum16(vsum);
  for (long k = n16; k < n; ++k) {
    const float e = exp(y[k] - mx);
    y[k] = e;
    sum += e;
  }
  // Pass 3: normalise.
  const float inv = 1.0f / sum;
  for (long k = 0; k < n16; k += 16) STORE16(vload16(0, y + k) * inv, y + k);
  for (long k = n16; k < n; ++k) y[k] *= inv;
}

// One kernel per case: with has_mask a run-time argument, the constants of
// both cases' loops compete for registers and the exponential loop reloads
// them from memory (8% slower measured).
__kernel void soft_max(TENSOR(a), TENSOR(d), float scale) {
  soft_max_row(TENSOR_ARGS(a), TENSOR_ARGS(a), TENSOR_ARGS(d), false, scale);
}

__kernel void soft_max_mask(TENSOR(a), TENSOR(m), TENSOR(d), float scale) {
  soft_max_row(TENSOR_ARGS(a), TENSOR_ARGS(m), TENSOR_ARGS(d), true, scale);
}

// NORM or RMS_NORM (mode 0 or 1) of row r of a into d, then that row times
// row r of w (w_row = n) or w's one row (w_row = 0) into z: the norm and the
// MUL that reads it in one launch (ops_fusion.cpp). d is still written: other
// nodes may read it. z may be d itself (the MUL in place on the norm).
__kernel void norm_mul(TENSOR(a), TENSOR(d), int mode, float eps, __global const char *w, ulong w_off, ulong w_row,
                       __global char *z, ulong z_off) {
  ROW_PROLOGUE(a);
  __global float *y = (__global float *)(d_p + d_off + r * n * 4);
  __global float *out = (__global float *)(z + z_off + r * n * 4);
  __global const float *m = (__global const float *)(w + w_off) + r * w_row;
  const float2 stats = norm_stats(pa, n, sa, dense, mode, eps);
  const float mean = stats.x, inv = stats.y;
  long k = 0;
  if (dense) {
    __global const float *x = (__global const float *)pa;
    for (; k + 16 <= n; k += 16) {
      const float16 v = (vload16(0, x + k) - mean) * inv;
      vstore16(v, 0, y + k);
      vstore16(v * vload16(0, m + k), 0, out + k);
    }
  }
  for (; k < n; ++k) {
    const float v = (*(__global const float *)(pa + k * sa) - mean) * inv;
    y[k] = v;
    out[k] = v * m[k];
  }
}
