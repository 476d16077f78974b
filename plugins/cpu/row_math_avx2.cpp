// row_math_avx2.cpp: the AVX2 row loops (row_math_kernels.hpp), compiled for
// AVX2 + FMA + F16C through target attributes and called only when
// cpu_isa() is avx2 or more.
#include "row_math_kernels.hpp"

#ifdef BP_X86_SIMD

// glibc's libmvec: expf on 8 floats, AVX2 vector ABI (argument in ymm0).
extern "C" __attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256 x);

namespace bp::cpu {
namespace {

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
BP_AVX2 void unary_avx2_as(float *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, unary8<Op>(_mm256_loadu_ps(x + i)));
  unary_portable<Op>(y + i, x + i, n - i);
}

}  // namespace

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

BP_AVX2 void unary_avx2(row_unary_op op, float *y, const float *x, int64_t n) {
  switch (op) {
    case row_unary_op::exp:
      return unary_avx2_as<row_unary_op::exp>(y, x, n);
    case row_unary_op::sigmoid:
      return unary_avx2_as<row_unary_op::sigmoid>(y, x, n);
    case row_unary_op::silu:
      return unary_avx2_as<row_unary_op::silu>(y, x, n);
    default:
      return unary_avx2_as<row_unary_op::gelu>(y, x, n);
  }
}

BP_AVX2 int64_t stream_copy_avx2(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_load_ps(src + i));
  return i;
}

}  // namespace bp::cpu

#endif  // BP_X86_SIMD
