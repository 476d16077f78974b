// row_math_kernels.hpp: the row loops of each ISA behind row_math.hpp's
// functions (internal to the cpu plugin): the portable C++ loops, inline
// here because the vector loops finish their rows' tails with them; the
// AVX2 loops (row_math_avx2.cpp) and the AVX-512 ones (row_math_avx512.cpp),
// compiled through target attributes (plugins/common/simd.hpp). row_math.cpp
// picks one by cpu_isa(); call a vector loop only where that level is on.
#ifndef BP_PLUGIN_CPU_ROW_MATH_KERNELS_HPP_
#define BP_PLUGIN_CPU_ROW_MATH_KERNELS_HPP_

#include <cmath>
#include <cstdint>

#include "row_math.hpp"
#include "simd.hpp"

namespace bp::cpu {

// ---- portable ---------------------------------------------------------------

inline double sum_portable(const float *x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

inline double sum_sq_portable(const float *x, int64_t n, double center) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - center;
    s += d * d;
  }
  return s;
}

inline float max_portable(const float *x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

inline double exp_shift_sum_portable(float *y, int64_t n, float shift) {
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
inline void unary_portable(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = unary_one<Op>(x[i]);
}

// The element-wise loops, plain loops that GCC vectorizes for the baseline
// (SSE2).
inline void scale_add_portable(float *y, const float *x, int64_t n, float scale, const float *add) {
  if (add) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + add[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

inline void sub_scale_portable(float *y, const float *x, int64_t n, float center, float scale) {
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - center) * scale;
}

inline void binary_portable(row_binary_op op, float *y, const float *a, const float *b, int64_t n) {
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

#ifdef BP_X86_SIMD
// ---- row_math_avx2.cpp: AVX2 + FMA + F16C ----------------------------------

BP_AVX2 double sum_avx2(const float *x, int64_t n);
BP_AVX2 double sum_sq_avx2(const float *x, int64_t n, double center);
BP_AVX2 float max_avx2(const float *x, int64_t n);
BP_AVX2 double exp_shift_sum_avx2(float *y, int64_t n, float shift);
// The exp-based unary ops on 8 lanes, through libmvec's expf: EXP, SIGMOID,
// SILU and GELU only (the others run the portable loops, which GCC
// vectorizes).
BP_AVX2 void unary_avx2(row_unary_op op, float *y, const float *x, int64_t n);
// Non-temporal stores of src's whole 8-float vectors to dst (64-byte
// aligned); returns how many of the n floats it stored.
BP_AVX2 int64_t stream_copy_avx2(float *dst, const float *src, int64_t n);

// ---- row_math_avx512.cpp: AVX-512 F/BW/DQ/VL -------------------------------

BP_AVX512 double sum_avx512(const float *x, int64_t n);
BP_AVX512 double sum_sq_avx512(const float *x, int64_t n, double center);
BP_AVX512 float max_avx512(const float *x, int64_t n);
BP_AVX512 double exp_shift_sum_avx512(float *y, int64_t n, float shift);
BP_AVX512 void scale_add_avx512(float *y, const float *x, int64_t n, float scale, const float *add);
BP_AVX512 void sub_scale_avx512(float *y, const float *x, int64_t n, float center, float scale);
BP_AVX512 void binary_avx512(row_binary_op op, float *y, const float *a, const float *b, int64_t n);
// Every unary op but TANH (libm's tanhf on every path).
BP_AVX512 void unary_avx512(row_unary_op op, float *y, const float *x, int64_t n);
// As stream_copy_avx2, by 16-float vectors.
BP_AVX512 int64_t stream_copy_avx512(float *dst, const float *src, int64_t n);
#endif

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_ROW_MATH_KERNELS_HPP_
