// row_math.cpp: see row_math.hpp.
#include "row_math.hpp"

#include <cmath>
#include <cstdlib>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
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

#ifdef BP_ROW_MATH_AVX2
#define BP_AVX2 __attribute__((target("avx2,fma")))

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

// BP_CPU_BASELINE=1 forces the portable loops, so that the test suite checks
// them on a machine that has AVX2 (scripts/test.sh runs bp-test-ops so).
bool have_avx2() {
  static const bool use = [] {
    const char *env = std::getenv("BP_CPU_BASELINE");
    const bool baseline = env && env[0] == '1';
    return !baseline && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return use;
}
#endif

}  // namespace

double row_sum(const float *x, int64_t n) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx2()) return sum_avx2(x, n);
#endif
  return sum_portable(x, n);
}

double row_sum_sq(const float *x, int64_t n, double center) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx2()) return sum_sq_avx2(x, n, center);
#endif
  return sum_sq_portable(x, n, center);
}

float row_max(const float *x, int64_t n) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx2()) return max_avx2(x, n);
#endif
  return max_portable(x, n);
}

double row_exp_shift_sum(float *y, int64_t n, float shift) {
#ifdef BP_ROW_MATH_AVX2
  if (have_avx2()) return exp_shift_sum_avx2(y, n, shift);
#endif
  return exp_shift_sum_portable(y, n, shift);
}

}  // namespace bp::cpu
