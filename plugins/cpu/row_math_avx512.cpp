// row_math_avx512.cpp: the AVX-512 row loops (row_math_kernels.hpp),
// compiled for AVX-512 F/BW/DQ/VL through target attributes and called only
// when cpu_isa() is avx512.
#include "row_math_kernels.hpp"

#ifdef BP_X86_SIMD

namespace bp::cpu {
namespace {

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

template <row_binary_op Op>
BP_AVX512 void binary_avx512_as(float *y, const float *a, const float *b, int64_t n) {
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
BP_AVX512 void unary_avx512_as(float *y, const float *x, int64_t n) {
  each16(n, [&](__mmask16 m, int64_t i, bool t) BP_AVX512 { store16(y + i, unary16<Op>(load16(x + i, m, t)), m, t); });
}

}  // namespace

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

BP_AVX512 void binary_avx512(row_binary_op op, float *y, const float *a, const float *b, int64_t n) {
  switch (op) {
    case row_binary_op::add:
      return binary_avx512_as<row_binary_op::add>(y, a, b, n);
    case row_binary_op::sub:
      return binary_avx512_as<row_binary_op::sub>(y, a, b, n);
    case row_binary_op::mul:
      return binary_avx512_as<row_binary_op::mul>(y, a, b, n);
    default:
      return binary_avx512_as<row_binary_op::div>(y, a, b, n);
  }
}

BP_AVX512 void unary_avx512(row_unary_op op, float *y, const float *x, int64_t n) {
  switch (op) {
    case row_unary_op::neg:
      return unary_avx512_as<row_unary_op::neg>(y, x, n);
    case row_unary_op::abs:
      return unary_avx512_as<row_unary_op::abs>(y, x, n);
    case row_unary_op::sqr:
      return unary_avx512_as<row_unary_op::sqr>(y, x, n);
    case row_unary_op::sqrt:
      return unary_avx512_as<row_unary_op::sqrt>(y, x, n);
    case row_unary_op::exp:
      return unary_avx512_as<row_unary_op::exp>(y, x, n);
    case row_unary_op::relu:
      return unary_avx512_as<row_unary_op::relu>(y, x, n);
    case row_unary_op::gelu:
      return unary_avx512_as<row_unary_op::gelu>(y, x, n);
    case row_unary_op::silu:
      return unary_avx512_as<row_unary_op::silu>(y, x, n);
    default:  // sigmoid (TANH never comes here)
      return unary_avx512_as<row_unary_op::sigmoid>(y, x, n);
  }
}

BP_AVX512 int64_t stream_copy_avx512(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_load_ps(src + i));
  return i;
}

}  // namespace bp::cpu

#endif  // BP_X86_SIMD
