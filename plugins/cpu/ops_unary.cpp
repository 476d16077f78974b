// ops_unary.cpp: NEG ABS SQR SQRT EXP RELU GELU SILU TANH SIGMOID, row by
// row, F32 or F16 in and out (math in F32).
#include <cmath>
#include <vector>

#include "kernels.hpp"

namespace bp::cpu {
namespace {

struct neg_op { static float f(float x) { return -x; } };
struct abs_op { static float f(float x) { return std::fabs(x); } };
struct sqr_op { static float f(float x) { return x * x; } };
struct sqrt_op { static float f(float x) { return std::sqrt(x); } };
struct exp_op { static float f(float x) { return std::exp(x); } };
struct relu_op { static float f(float x) { return x > 0.0f ? x : 0.0f; } };
// The tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct gelu_op {
  static float f(float x) {
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
  }
};
// exp(-x) overflows to inf for x < -88 and x / inf = -0: the right limit.
struct silu_op { static float f(float x) { return x / (1.0f + std::exp(-x)); } };
struct tanh_op { static float f(float x) { return std::tanh(x); } };
struct sigmoid_op { static float f(float x) { return 1.0f / (1.0f + std::exp(-x)); } };

template <typename Op>
void unary_rows(const bp_tensor *dst, int ith, int nth) {
  const bp_tensor *a = dst->src[0];
  const int64_t n = dst->ne[0];
  std::vector<float> sa(static_cast<size_t>(n)), so(static_cast<size_t>(n));
  int64_t r0, r1;
  split_range(bp_tensor_nrows(dst), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(dst, r);
    const float *ra = read_row(a, ix.i1, ix.i2, ix.i3, sa.data());
    float *ro = out_row(dst, ix.i1, ix.i2, ix.i3, so.data());
    for (int64_t i = 0; i < n; ++i) ro[i] = Op::f(ra[i]);
    finish_row(dst, ix.i1, ix.i2, ix.i3, ro);
  }
}

}  // namespace

bool unary_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0];
  return has_valid_shape(t) && has_valid_shape(a) && is_float_type(t->type) && t->type == a->type &&
         bp_tensor_same_shape(t, a);
}

void unary_run(const bp_tensor *t, int ith, int nth) {
  switch (t->op) {
    case BP_OP_NEG: unary_rows<neg_op>(t, ith, nth); break;
    case BP_OP_ABS: unary_rows<abs_op>(t, ith, nth); break;
    case BP_OP_SQR: unary_rows<sqr_op>(t, ith, nth); break;
    case BP_OP_SQRT: unary_rows<sqrt_op>(t, ith, nth); break;
    case BP_OP_EXP: unary_rows<exp_op>(t, ith, nth); break;
    case BP_OP_RELU: unary_rows<relu_op>(t, ith, nth); break;
    case BP_OP_GELU: unary_rows<gelu_op>(t, ith, nth); break;
    case BP_OP_SILU: unary_rows<silu_op>(t, ith, nth); break;
    case BP_OP_TANH: unary_rows<tanh_op>(t, ith, nth); break;
    case BP_OP_SIGMOID: unary_rows<sigmoid_op>(t, ith, nth); break;
    default: break;
  }
}

}  // namespace bp::cpu
