// row_math.cpp: see row_math.hpp.
#include "row_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "plugins/common/isa.hpp"

#include "plugins/common/simd.hpp"

#ifdef BP_X86_SIMD
#define BP_ROW_MATH_AVX2 1
// glibc's libmvec: expf on 8 floats, AVX2 vector ABI (argument in ymm0).
extern "C" __attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256 x);
#endif

namespace bp::cpu {
namespace {

double sum_portable(const float *x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

double sum_sq_portable(const float *x, int64_t n, double center) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - center;
    s += d * d;
  }
  return s;
}

float max_portable(const float *x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

double exp_shift_sum_portable(float *y, int64_t n, float shift) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(y[i] - shift);
    y[i] = e;
    s += e;
  }
  return s;
}

// The unary ops on one value: the portable loop, and the tails and TANH of
// the vector ones. SIGMOID, SILU and GELU are one form, num / (1 + exp(-t)):
// sigmoid(x) = 1 / (1 + exp(-x)), silu(x) = x * sigmoid(x) and gelu(x) =
// x * sigmoid(2u), u = kGeluK (x + kGeluC x^3). Where exp overflows to inf
// it gives -0 or 0, the functions' limits. GELU is docs/ops.md's one
// definition, the expression the Vulkan and OpenCL kernels share
// (shaders/common/gelu.h: 2 kGeluK = BP_GELU_TWO_K, kGeluC = BP_GELU_C).
constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

inline float over_one_plus_exp_neg(float num, float t) { return num / (1.0f + std::exp(-t)); }

template <row_unary_op Op>
inline float unary_one(float x) {
  if constexpr (Op == row_unary_op::neg) {
    return -x;
  } else if constexpr (Op == row_unary_op::abs) {
    return std::fabs(x);
  } else if constexpr (Op == row_unary_op::sqr) {
    return x * x;
  } else if constexpr (Op == row_unary_op::sqrt) {
    return std::sqrt(x);
  } else if constexpr (Op == row_unary_op::exp) {
    return std::exp(x);
  } else if constexpr (Op == row_unary_op::relu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (Op == row_unary_op::gelu) {
    return over_one_plus_exp_neg(x, 2.0f * kGeluK * (x + kGeluC * x * x * x));
  } else if constexpr (Op == row_unary_op::silu) {
    return over_one_plus_exp_neg(x, x);
  } else if constexpr (Op == row_unary_op::tanh) {
    return std::tanh(x);
  } else {
    return over_one_plus_exp_neg(1.0f, x);
  }
}

template <row_unary_op Op>
void unary_portable(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = unary_one<Op>(x[i]);
}

#ifdef BP_ROW_MATH_AVX2
BP_AVX2 double hsum(__m256d a, __m256d b) {
  const __m256d s = _mm256_add_pd(a, b);
  const __m128d lo = _mm256_castpd256_pd128(s), hi = _mm256_extractf128_pd(s, 1);
  const __m128d q = _mm_add_pd(lo, hi);
  return _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));
}

// The 8 floats at |p| as two vectors of 4 doubles.
BP_AVX2 inline void widen(__m256 v, __m256d *lo, __m256d *hi) {
  *lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  *hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

BP_AVX2 double sum_avx2(const float *x, int64_t n) {
  __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256d lo, hi;
    widen(_mm256_loadu_ps(x + i), &lo, &hi);
    a = _mm256_add_pd(a, lo);
    b = _mm256_add_pd(b, hi);
  }
  return hsum(a, b) + sum_portable(x + i, n - i);
}

BP_AVX2 double sum_sq_avx2(const float *x, int64_t n, double center) {
  const __m256d c = _mm256_set1_pd(center);
  __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256d lo, hi;
    widen(_mm256_loadu_ps(x + i), &lo, &hi);
    lo = _mm256_sub_pd(lo, c);
    hi = _mm256_sub_pd(hi, c);
    a = _mm256_fmadd_pd(lo, lo, a);
    b = _mm256_fmadd_pd(hi, hi, b);
  }
  return hsum(a, b) + sum_sq_portable(x + i, n - i, center);
}

BP_AVX2 float max_avx2(const float *x, int64_t n) {
  // Two accumulators hide the latency of vmaxps. _mm256_max_ps(v, m) returns
  // m where v is NaN, so NaNs are skipped as in the portable loop.
  __m256 a = _mm256_set1_ps(-INFINITY), b = a;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a = _mm256_max_ps(_mm256_loadu_ps(x + i), a);
    b = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), b);
  }
  for (; i + 8 <= n; i += 8) a = _mm256_max_ps(_mm256_loadu_ps(x + i), a);
  const __m256 m8 = _mm256_max_ps(a, b);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  const float head = _mm_cvtss_f32(m4), tail = max_portable(x + i, n - i);
  return tail > head ? tail : head;
}

BP_AVX2 double exp_shift_sum_avx2(float *y, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(y + i), s));
    _mm256_storeu_ps(y + i, e);
    __m256d lo, hi;
    widen(e, &lo, &hi);
    a = _mm256_add_pd(a, lo);
    b = _mm256_add_pd(b, hi);
  }
  return hsum(a, b) + exp_shift_sum_portable(y + i, n - i, shift);
}

// num / (1 + exp(-t)) on 8 lanes (unary_one).
BP_AVX2 inline __m256 over_one_plus_exp_neg8(__m256 num, __m256 t) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(num, _mm256_add_ps(one, _ZGVdN8v_expf(_mm256_sub_ps(_mm256_setzero_ps(), t))));
}

// The exp-based unary ops on 8 lanes, through libmvec's expf; the others
// are the portable loops, which GCC vectorizes.
template <row_unary_op Op>
BP_AVX2 inline __m256 unary8(__m256 x) {
  if constexpr (Op == row_unary_op::exp) {
    return _ZGVdN8v_expf(x);
  } else if constexpr (Op == row_unary_op::sigmoid) {
    return over_one_plus_exp_neg8(_mm256_set1_ps(1.0f), x);
  } else if constexpr (Op == row_unary_op::silu) {
    return over_one_plus_exp_neg8(x, x);
  } else {  // gelu
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    const __m256 u = _mm256_mul_ps(_mm256_set1_ps(2.0f * kGeluK), _mm256_fmadd_ps(_mm256_set1_ps(kGeluC), x3, x));
    return over_one_plus_exp_neg8(x, u);
  }
}

template <row_unary_op Op>
BP_AVX2 void unary_avx2(float *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, unary8<Op>(_mm256_loadu_ps(x + i)));
  unary_portable<Op>(y + i, x + i, n - i);
}

// Lanes [0, n) of a 16-lane mask (n in [0, 16]).
BP_AVX512 inline __mmask16 lanes16(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// The sum of 8 doubles, through memory (GCC 12's 512-bit extracts warn
// -Wuninitialized inside their own header); once per row.
BP_AVX512 double hsum8(__m512d v) {
  alignas(64) double d[8];
  _mm512_store_pd(d, v);
  return ((d[0] + d[4]) + (d[1] + d[5])) + ((d[2] + d[6]) + (d[3] + d[7]));
}

// 16 floats as two vectors of 8 doubles. The maskz forms with full masks
// are the plain instructions; GCC 12's unmasked intrinsics for these warn
// -Wmaybe-uninitialized inside their own header.
BP_AVX512 inline void widen16(__m512 v, __m512d *lo, __m512d *hi) {
  *lo = _mm512_maskz_cvtps_pd(0xff, _mm512_maskz_extractf32x8_ps(0xff, v, 0));
  *hi = _mm512_maskz_cvtps_pd(0xff, _mm512_maskz_extractf32x8_ps(0xff, v, 1));
}

// Four double accumulators (32 floats a step): enough independent adds to
// cover their latency, so the loop runs at load speed, not add latency.
BP_AVX512 double sum_avx512(const float *x, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512d l0, h0, l1, h1;
    widen16(_mm512_loadu_ps(x + i), &l0, &h0);
    widen16(_mm512_loadu_ps(x + i + 16), &l1, &h1);
    a0 = _mm512_add_pd(a0, l0);
    a1 = _mm512_add_pd(a1, h0);
    a2 = _mm512_add_pd(a2, l1);
    a3 = _mm512_add_pd(a3, h1);
  }
  for (; i < n; i += 16) {  // masked: zeros past n add nothing
    __m512d l, h;
    widen16(_mm512_maskz_loadu_ps(lanes16(n - i), x + i), &l, &h);
    a0 = _mm512_add_pd(a0, l);
    a1 = _mm512_add_pd(a1, h);
  }
  return hsum8(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}

BP_AVX512 double sum_sq_avx512(const float *x, int64_t n, double center) {
  const __m512d c = _mm512_set1_pd(center);
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512d l0, h0, l1, h1;
    widen16(_mm512_loadu_ps(x + i), &l0, &h0);
    widen16(_mm512_loadu_ps(x + i + 16), &l1, &h1);
    l0 = _mm512_sub_pd(l0, c), h0 = _mm512_sub_pd(h0, c), l1 = _mm512_sub_pd(l1, c), h1 = _mm512_sub_pd(h1, c);
    a0 = _mm512_fmadd_pd(l0, l0, a0);
    a1 = _mm512_fmadd_pd(h0, h0, a1);
    a2 = _mm512_fmadd_pd(l1, l1, a2);
    a3 = _mm512_fmadd_pd(h1, h1, a3);
  }
  for (; i < n; i += 16) {
    // Lanes past n are loaded as |center| so they add 0.
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(static_cast<float>(center)), lanes16(n - i), x + i);
    __m512d l, h;
    widen16(v, &l, &h);
    // float(center) need not equal center: zero those lanes explicitly.
    const __mmask16 m = lanes16(n - i);
    l = _mm512_maskz_sub_pd(static_cast<__mmask8>(m), l, c);
    h = _mm512_maskz_sub_pd(static_cast<__mmask8>(m >> 8), h, c);
    a0 = _mm512_fmadd_pd(l, l, a0);
    a1 = _mm512_fmadd_pd(h, h, a1);
  }
  return hsum8(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}

BP_AVX512 float max_avx512(const float *x, int64_t n) {
  // _mm512_max_ps(v, m) returns m where v is NaN: NaNs are skipped.
  __m512 a = _mm512_set1_ps(-INFINITY), b = a;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a = _mm512_max_ps(_mm512_loadu_ps(x + i), a);
    b = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), b);
  }
  for (; i < n; i += 16) a = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), lanes16(n - i), x + i), a);
  alignas(64) float f[16];
  _mm512_store_ps(f, _mm512_max_ps(a, b));
  float m = -INFINITY;
  for (float v : f) m = v > m ? v : m;
  return m;
}

// expf on 16 lanes, inline (a libmvec call per vector cost more than the
// rest of SOFT_MAX): x = n ln2 + r with |r| <= ln2/2, e^r by Cephes' expf
// polynomial (within 2 ulp), then 2^n by vscalefps, which gives inf past
// 88.7 and 0 below -103.9 without branches. The clamps to [-104, 89] keep
// the range reduction finite (for x = inf, x - n ln2 would be inf - inf), so
// -inf gives 0 and inf gives inf by overflow; they keep a NaN x (vmaxps and
// vminps return their second operand when either is NaN).
BP_AVX512 inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

BP_AVX512 double exp_shift_sum_avx512(float *y, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  int64_t i = 0;
  // Blocks of kBlock vectors are summed in float (kBlock values per lane,
  // each in [0, 1]: a relative error of at most kBlock x 2^-24 per block),
  // then in double, so the error still does not grow with the row's
  // length. Widening every vector to double cost SOFT_MAX 15-19% (2-core
  // Zen 4 VM, bp-bench SOFT_MAX at 8 and 64 MiB).
  constexpr int kBlock = 16;
  while (i + 16 <= n) {
    __m512 f = _mm512_setzero_ps();
    for (int v = 0; v < kBlock && i + 16 <= n; ++v, i += 16) {
      const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(y + i), s));
      _mm512_storeu_ps(y + i, e);
      f = _mm512_add_ps(f, e);
    }
    __m512d lo, hi;
    widen16(f, &lo, &hi);
    a = _mm512_add_pd(a, lo);
    b = _mm512_add_pd(b, hi);
  }
  if (i < n) {
    const __mmask16 m = lanes16(n - i);
    // Masked-off lanes: exp(-inf - shift) = 0, stored nowhere, summed as 0.
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, y + i);
    const __m512 e = exp16(_mm512_sub_ps(v, s));
    _mm512_mask_storeu_ps(y + i, m, e);
    __m512d lo, hi;
    widen16(e, &lo, &hi);
    a = _mm512_add_pd(a, lo);
    b = _mm512_add_pd(b, hi);
  }
  return hsum8(_mm512_add_pd(a, b));
}

// Divisor lanes past the tail are 0 (maskz loads): make them 1 so the
// discarded lanes raise no division-by-zero flag.
BP_AVX512 inline __m512 tail_safe_divisor(__m512 vb, __mmask16 m, bool tail) {
  return tail ? _mm512_mask_blend_ps(m, _mm512_set1_ps(1.0f), vb) : vb;
}

// The element-wise loops: plain 512-bit loads and stores in the body (a
// masked store every step measured 2x slower on the development VM), one
// masked step for the tail. f(m, i, tail) computes lanes |m| at element i.
template <class F>
BP_AVX512 inline void each16(int64_t n, F f) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    f(__mmask16(0xffff), i, false);
    f(__mmask16(0xffff), i + 16, false);
  }
  for (; i < n; i += 16) f(lanes16(n - i), i, n - i < 16);
}

BP_AVX512 inline __m512 load16(const float *p, __mmask16 m, bool tail) {
  return tail ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
}
BP_AVX512 inline void store16(float *p, __m512 v, __mmask16 m, bool tail) {
  if (tail) {
    _mm512_mask_storeu_ps(p, m, v);
  } else {
    _mm512_storeu_ps(p, v);
  }
}

BP_AVX512 void scale_add_avx512(float *y, const float *x, int64_t n, float scale, const float *add) {
  const __m512 s = _mm512_set1_ps(scale);
  if (add) {
    each16(n, [&](__mmask16 m, int64_t i, bool t) BP_AVX512 {
      store16(y + i, _mm512_add_ps(_mm512_mul_ps(load16(x + i, m, t), s), load16(add + i, m, t)), m, t);
    });
  } else {
    each16(n, [&](__mmask16 m, int64_t i, bool t)
                  BP_AVX512 { store16(y + i, _mm512_mul_ps(load16(x + i, m, t), s), m, t); });
  }
}

BP_AVX512 void sub_scale_avx512(float *y, const float *x, int64_t n, float center, float scale) {
  const __m512 c = _mm512_set1_ps(center), s = _mm512_set1_ps(scale);
  each16(n, [&](__mmask16 m, int64_t i, bool t)
                BP_AVX512 { store16(y + i, _mm512_mul_ps(_mm512_sub_ps(load16(x + i, m, t), c), s), m, t); });
}

template <row_binary_op Op>
BP_AVX512 void binary_avx512(float *y, const float *a, const float *b, int64_t n) {
  each16(n, [&](__mmask16 m, int64_t i, bool t) BP_AVX512 {
    const __m512 va = load16(a + i, m, t), vb = load16(b + i, m, t);
    __m512 v;
    if constexpr (Op == row_binary_op::add) {
      v = _mm512_add_ps(va, vb);
    } else if constexpr (Op == row_binary_op::sub) {
      v = _mm512_sub_ps(va, vb);
    } else if constexpr (Op == row_binary_op::mul) {
      v = _mm512_mul_ps(va, vb);
    } else {
      v = _mm512_div_ps(va, tail_safe_divisor(vb, m, t));
    }
    store16(y + i, v, m, t);
  });
}

// num / (1 + exp(-t)) on 16 lanes (unary_one).
BP_AVX512 inline __m512 over_one_plus_exp_neg16(__m512 num, __m512 t) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(num, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), t))));
}

template <row_unary_op Op>
BP_AVX512 inline __m512 unary16(__m512 x) {
  if constexpr (Op == row_unary_op::neg) {
    return _mm512_xor_ps(x, _mm512_set1_ps(-0.0f));
  } else if constexpr (Op == row_unary_op::abs) {
    return _mm512_abs_ps(x);
  } else if constexpr (Op == row_unary_op::sqr) {
    return _mm512_mul_ps(x, x);
  } else if constexpr (Op == row_unary_op::sqrt) {
    return _mm512_sqrt_ps(x);
  } else if constexpr (Op == row_unary_op::exp) {
    return exp16(x);
  } else if constexpr (Op == row_unary_op::relu) {
    return _mm512_max_ps(
        x, _mm512_setzero_ps());  // vmaxps gives its second operand for NaN and for -0: 0, as x > 0 ? x : 0
  } else if constexpr (Op == row_unary_op::gelu) {
    const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    const __m512 u = _mm512_mul_ps(_mm512_set1_ps(2.0f * kGeluK), _mm512_fmadd_ps(_mm512_set1_ps(kGeluC), x3, x));
    return over_one_plus_exp_neg16(x, u);
  } else if constexpr (Op == row_unary_op::silu) {
    return over_one_plus_exp_neg16(x, x);
  } else {  // sigmoid
    return over_one_plus_exp_neg16(_mm512_set1_ps(1.0f), x);
  }
}

template <row_unary_op Op>
BP_AVX512 void unary_avx512(float *y, const float *x, int64_t n) {
  each16(n, [&](__mmask16 m, int64_t i, bool t) BP_AVX512 { store16(y + i, unary16<Op>(load16(x + i, m, t)), m, t); });
}

// The level the row loops use: cpu_isa() (plugins/common/isa.hpp), which
// BP_CPU_ISA / BP_CPU_BASELINE cap so the tests can check every path.
plugins::isa_level level() {
  static const plugins::isa_level l = plugins::cpu_isa();
  return l;
}
bool have_avx2() { return level() >= plugins::isa_level::avx2; }
bool have_avx512() { return level() == plugins::isa_level::avx512; }
#endif

}  // namespace

double row_sum(const float *x, int64_t n) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx512()) return sum_avx512(x, n);
  if (have_avx2()) return sum_avx2(x, n);
#endif
  return sum_portable(x, n);
}

double row_sum_sq(const float *x, int64_t n, double center) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx512()) return sum_sq_avx512(x, n, center);
  if (have_avx2()) return sum_sq_avx2(x, n, center);
#endif
  return sum_sq_portable(x, n, center);
}

float row_max(const float *x, int64_t n) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx512()) return max_avx512(x, n);
  if (have_avx2()) return max_avx2(x, n);
#endif
  return max_portable(x, n);
}

double row_exp_shift_sum(float *y, int64_t n, float shift) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx512()) return exp_shift_sum_avx512(y, n, shift);
  if (have_avx2()) return exp_shift_sum_avx2(y, n, shift);
#endif
  return exp_shift_sum_portable(y, n, shift);
}

namespace {

// The element-wise loops: AVX-512 when chosen, else plain loops that GCC
// vectorizes for the baseline (SSE2): memory-bound at DRAM sizes either way,
// the wider path mostly frees the core for the other passes of a row.
void scale_add_cached(float *y, const float *x, int64_t n, float scale, const float *add) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx512()) return scale_add_avx512(y, x, n, scale, add);
#endif
  if (add) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + add[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void sub_scale_cached(float *y, const float *x, int64_t n, float center, float scale) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx512()) return sub_scale_avx512(y, x, n, center, scale);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - center) * scale;
}

void binary_cached(row_binary_op op, float *y, const float *a, const float *b, int64_t n) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx512()) {
    switch (op) {
      case row_binary_op::add:
        return binary_avx512<row_binary_op::add>(y, a, b, n);
      case row_binary_op::sub:
        return binary_avx512<row_binary_op::sub>(y, a, b, n);
      case row_binary_op::mul:
        return binary_avx512<row_binary_op::mul>(y, a, b, n);
      default:
        return binary_avx512<row_binary_op::div>(y, a, b, n);
    }
  }
#endif
  switch (op) {
    case row_binary_op::add:
      for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
      break;
    case row_binary_op::sub:
      for (int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i];
      break;
    case row_binary_op::mul:
      for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
      break;
    default:
      for (int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i];
      break;
  }
}

template <row_unary_op Op>
void unary_cached_as(float *y, const float *x, int64_t n) {
#ifdef BP_ROW_MATH_AVX2
  if constexpr (Op != row_unary_op::tanh) {
    if (have_avx512()) return unary_avx512<Op>(y, x, n);
  }
  if constexpr (Op == row_unary_op::exp || Op == row_unary_op::sigmoid || Op == row_unary_op::silu ||
                Op == row_unary_op::gelu) {
    if (have_avx2()) return unary_avx2<Op>(y, x, n);
  }
#endif
  unary_portable<Op>(y, x, n);
}

void unary_cached(row_unary_op op, float *y, const float *x, int64_t n) {
  switch (op) {
    case row_unary_op::neg:
      return unary_cached_as<row_unary_op::neg>(y, x, n);
    case row_unary_op::abs:
      return unary_cached_as<row_unary_op::abs>(y, x, n);
    case row_unary_op::sqr:
      return unary_cached_as<row_unary_op::sqr>(y, x, n);
    case row_unary_op::sqrt:
      return unary_cached_as<row_unary_op::sqrt>(y, x, n);
    case row_unary_op::exp:
      return unary_cached_as<row_unary_op::exp>(y, x, n);
    case row_unary_op::relu:
      return unary_cached_as<row_unary_op::relu>(y, x, n);
    case row_unary_op::gelu:
      return unary_cached_as<row_unary_op::gelu>(y, x, n);
    case row_unary_op::silu:
      return unary_cached_as<row_unary_op::silu>(y, x, n);
    case row_unary_op::tanh:
      return unary_cached_as<row_unary_op::tanh>(y, x, n);
    default:
      return unary_cached_as<row_unary_op::sigmoid>(y, x, n);
  }
}

// Streamed rows: the cached loop computes kStreamChunk floats at a time into
// an L1 buffer, which non-temporal stores of 32 (AVX2) or 64 (AVX-512) bytes
// then copy out. Small chunks keep the reads of the inputs and the writes of
// y interleaved: computing a whole row first and streaming it after was
// 10-13% slower. 16-byte (SSE2) non-temporal stores were slower than plain
// stores, so the baseline path does not stream (2-core Zen 4 VM, rows of
// 4096 and 65536 floats, 2 threads over 64 MiB). Elements before y's first
// 64-byte boundary, and after the last whole vector, get plain stores.
constexpr int64_t kStreamChunk = 256;

#ifdef BP_ROW_MATH_AVX2
// dst is 64-byte aligned; returns how many of the n floats it stored.
BP_AVX512 int64_t stream_copy_avx512(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_load_ps(src + i));
  return i;
}
BP_AVX2 int64_t stream_copy_avx2(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_load_ps(src + i));
  return i;
}
#endif

// f(out, i, len) computes elements [i, i + len) of the row into out[0, len).
template <class F>
void each_streamed_chunk(float *y, int64_t n, F f) {
#ifdef BP_ROW_MATH_AVX2
  const uintptr_t addr = reinterpret_cast<uintptr_t>(y);
  if (!have_avx2() || addr % alignof(float) != 0) return f(y, 0, n);
  int64_t i = std::min(n, static_cast<int64_t>((64 - addr % 64) % 64 / sizeof(float)));
  if (i > 0) f(y, 0, i);
  alignas(64) float chunk[kStreamChunk];
  int64_t (*const stream_copy)(float *, const float *, int64_t) = have_avx512() ? stream_copy_avx512 : stream_copy_avx2;
  while (i < n) {
    const int64_t len = std::min(n - i, kStreamChunk);
    f(chunk, i, len);
    const int64_t done = stream_copy(y + i, chunk, len);
    for (int64_t j = done; j < len; ++j) y[i + j] = chunk[j];
    i += len;
  }
#else
  f(y, 0, n);
#endif
}

}  // namespace

void row_store_fence(row_store store) {
#ifdef BP_ROW_MATH_AVX2
  if (store == row_store::streamed) _mm_sfence();  // non-temporal stores are not ordered by the pool's release
#else
  (void)store;
#endif
}

void row_scale_add(float *y, const float *x, int64_t n, float scale, const float *add, row_store store) {
  if (store == row_store::cached) return scale_add_cached(y, x, n, scale, add);
  each_streamed_chunk(y, n, [&](float *out, int64_t i, int64_t len) {
    scale_add_cached(out, x + i, len, scale, add ? add + i : nullptr);
  });
}

void row_sub_scale(float *y, const float *x, int64_t n, float center, float scale, row_store store) {
  if (store == row_store::cached) return sub_scale_cached(y, x, n, center, scale);
  each_streamed_chunk(y, n,
                      [&](float *out, int64_t i, int64_t len) { sub_scale_cached(out, x + i, len, center, scale); });
}

void row_binary(row_binary_op op, float *y, const float *a, const float *b, int64_t n, row_store store) {
  if (store == row_store::cached) return binary_cached(op, y, a, b, n);
  each_streamed_chunk(y, n, [&](float *out, int64_t i, int64_t len) { binary_cached(op, out, a + i, b + i, len); });
}

void row_unary(row_unary_op op, float *y, const float *x, int64_t n, row_store store) {
  if (store == row_store::cached) return unary_cached(op, y, x, n);
  each_streamed_chunk(y, n, [&](float *out, int64_t i, int64_t len) { unary_cached(op, out, x + i, len); });
}

}  // namespace bp::cpu
