// rows.cl: reductions and normalisations over dim 0: SUM_ROWS, MEAN, ARGMAX,
// NORM, RMS_NORM, SOFT_MAX (optional mask of -DMASK_TYPE, 0 f32 / 1 f16).
// One work-item per row; dense rows are walked with float16 vectors (the
// driver does not vectorize a kernel with an inner loop by itself), other
// rows element by element through the strides. Outputs are dense.

#ifndef MASK_TYPE
#define MASK_TYPE T_F32
#endif

#define ROW_PROLOGUE(a)                                      \
  const long r = get_global_id(0);                           \
  if (r >= a##_ne.y * a##_ne.z * a##_ne.w) return;           \
  ROW_INDEX(a##_ne, r, i1, i2, i3);                          \
  const long n = a##_ne.x;                                   \
  __global const char *pa = ELEM_PTR(a, 0, i1, i2, i3);      \
  const long sa = a##_nb.x;                                  \
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
__kernel void norm(TENSOR(a), TENSOR(d), int mode, float eps) {
  ROW_PROLOGUE(a);
  __global float *y = (__global float *)(d_p + d_off + r * n * 4);
  float mean = 0.0f, inv;
  if (mode == 0) {
    mean = row_sum(pa, n, sa, dense) / (float)n;
    inv = rsqrt(row_sum_sq(pa, n, sa, dense, mean) / (float)n + eps);
  } else {
    inv = 1.0f / sqrt(row_sum_sq(pa, n, sa, dense, 0.0f) / (float)n + eps);
  }
  long k = 0;
  if (dense) {
    __global const float *x = (__global const float *)pa;
    for (; k + 16 <= n; k += 16) vstore16((vload16(0, x + k) - mean) * inv, 0, y + k);
  }
  for (; k < n; ++k) y[k] = (*(__global const float *)(pa + k * sa) - mean) * inv;
}

// y = softmax(x * scale + mask) per row; the mask row is (i1, i2, i3) modulo
// the mask's extents. A row that is all -inf gives zeros.
__kernel void soft_max(TENSOR(a), TENSOR(m), TENSOR(d), int has_mask, float scale) {
  ROW_PROLOGUE(a);
  __global float *y = (__global float *)(d_p + d_off + r * n * 4);
  __global const char *pm = has_mask ? ELEM_PTR(m, 0, i1 % m_ne.y, i2 % m_ne.z, i3 % m_ne.w) : pa;
  const long sm = has_mask ? m_nb.x : 0;
  const bool vec = dense && (!has_mask || sm == TYPE_SIZE(MASK_TYPE));
  // Pass 1: scaled and masked values into y, and their maximum.
  float mx = -INFINITY;
  long k = 0;
  if (vec) {
    __global const float *x = (__global const float *)pa;
    float16 vmax = -INFINITY;
    for (; k + 16 <= n; k += 16) {
      float16 v = vload16(0, x + k) * scale;
      if (has_mask) {
#if MASK_TYPE == T_F16
        v += vload_half16(0, (__global const half *)pm + k);
#else
        v += vload16(0, (__global const float *)pm + k);
#endif
      }
      vstore16(v, 0, y + k);
      vmax = fmax(vmax, v);
    }
    mx = hmax16(vmax);
  }
  for (; k < n; ++k) {
    float v = *(__global const float *)(pa + k * sa) * scale;
    if (has_mask) v += LOAD_AS(MASK_TYPE, pm + k * sm);
    y[k] = v;
    mx = fmax(mx, v);
  }
  if (mx == -INFINITY) {
    for (k = 0; k < n; ++k) y[k] = 0.0f;
    return;
  }
  // Pass 2: exponentials and their sum; pass 3: normalise.
  float sum = 0.0f;
  k = 0;
  float16 vsum = 0.0f;
  for (; k + 16 <= n; k += 16) {
    float16 e = exp(vload16(0, y + k) - mx);
    vstore16(e, 0, y + k);
    vsum += e;
  }
  sum = hsum16(vsum);
  for (; k < n; ++k) {
    float e = exp(y[k] - mx);
    y[k] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
  k = 0;
  for (; k + 16 <= n; k += 16) vstore16(vload16(0, y + k) * inv, 0, y + k);
  for (; k < n; ++k) y[k] *= inv;
}
