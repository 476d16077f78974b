// row_math.hpp: the inner loops of the row kernels (NORM, RMS_NORM,
// SOFT_MAX) over dense float rows, picked at run time: AVX2 when the CPU has
// it, portable C++ otherwise (the plugin is built for baseline x86-64).
//
// Sums accumulate in double in both versions, so long rows keep their
// accuracy; the AVX2 one keeps 8 partial sums, which changes the order of
// the additions, not their precision. exp comes from glibc: libmvec's 8-wide
// expf (`_ZGVdN8v_expf`, within 1 ulp) under AVX2, expf otherwise.
// BP_CPU_BASELINE=1 in the environment forces the portable loops.
#ifndef BP_PLUGIN_CPU_ROW_MATH_HPP_
#define BP_PLUGIN_CPU_ROW_MATH_HPP_

#include <cstdint>

namespace bp::cpu {

// Sum of x[0..n).
double row_sum(const float *x, int64_t n);
// Sum of (x[i] - center)^2 over [0, n).
double row_sum_sq(const float *x, int64_t n, double center);
// Largest of x[0..n) (-inf when n is 0; NaNs are skipped).
float row_max(const float *x, int64_t n);
// y[i] = exp(y[i] - shift) in place; returns the sum of the new y.
double row_exp_shift_sum(float *y, int64_t n, float shift);

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_ROW_MATH_HPP_
