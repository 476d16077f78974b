// row_math.hpp: the inner loops of the row kernels (NORM, RMS_NORM,
// SOFT_MAX, the unary ops, and the dense F32 rows of ADD SUB MUL DIV SCALE)
// over dense float rows, picked at run time by cpu_isa() (plugins/common/isa.hpp):
// AVX-512 or AVX2 when the CPU has them, portable C++ otherwise (the plugin
// is built for baseline x86-64). row_math.cpp picks; the loops are in
// row_math_avx512.cpp, row_math_avx2.cpp and row_math_kernels.hpp (portable).
//
// Sums accumulate in double in every version, so long rows keep their
// accuracy; the vector ones keep 8 to 32 partial sums, which changes the
// order of the additions, not their precision. (SOFT_MAX's sum of exps on
// AVX-512 adds blocks of 16 values per lane in float first: its error is
// bounded by the block, not the row.) exp comes from glibc:
// libmvec's 16-wide (`_ZGVeN16v_expf`) or 8-wide (`_ZGVdN8v_expf`) expf,
// within 1 ulp, else expf. BP_CPU_ISA=baseline|avx2|avx512 caps the choice
// (BP_CPU_BASELINE=1 = baseline), so tests can check each path.
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

// How the element-wise loops below store y. cached: plain stores, so y is in
// the cache for whoever reads it next. streamed: non-temporal stores, which
// write whole lines to memory without first reading them into the cache
// (a third less DRAM traffic for y = f(x)); for outputs too large to stay in
// the last-level cache anyway (row_store_for() in kernels.hpp decides). A
// thread calls row_store_fence(store) after its last row, before it reports
// its part done, so streamed stores are visible to the threads that read y
// next (nothing to do for cached ones).
enum class row_store { cached, streamed };
void row_store_fence(row_store store);

// y[i] = x[i] * scale (+ add[i] when |add| is not NULL). y may be x.
void row_scale_add(float *y, const float *x, int64_t n, float scale, const float *add,
                   row_store store = row_store::cached);
// y[i] = (x[i] - center) * scale. y may be x.
void row_sub_scale(float *y, const float *x, int64_t n, float center, float scale, row_store store = row_store::cached);
enum class row_binary_op { add, sub, mul, div };
// y[i] = a[i] op b[i]. y may be a or b.
void row_binary(row_binary_op op, float *y, const float *a, const float *b, int64_t n,
                row_store store = row_store::cached);

enum class row_unary_op { neg, abs, sqr, sqrt, exp, relu, gelu, silu, tanh, sigmoid };
// y[i] = op(x[i]). y may be x. GELU is the tanh form, computed as
// x * sigmoid(2u) (= 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)),
// which needs one exp and loses nothing to cancellation where tanh(u) is
// near -1. EXP, SIGMOID, SILU and GELU take the vector exp of the SOFT_MAX
// loops; TANH is libm's tanhf on every path.
void row_unary(row_unary_op op, float *y, const float *x, int64_t n, row_store store = row_store::cached);

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_ROW_MATH_HPP_
