// ops_unary.cpp: NEG ABS SQR SQRT EXP RELU GELU SILU TANH SIGMOID, row by
// row, F32 or F16 in and out (math in F32, in row_unary: row_math.hpp).
#include <vector>

#include "kernels.hpp"
#include "row_math.hpp"

namespace bp::cpu {
namespace {

row_unary_op unary_of(bp_op op) {
  switch (op) {
    case BP_OP_NEG:
      return row_unary_op::neg;
    case BP_OP_ABS:
      return row_unary_op::abs;
    case BP_OP_SQR:
      return row_unary_op::sqr;
    case BP_OP_SQRT:
      return row_unary_op::sqrt;
    case BP_OP_EXP:
      return row_unary_op::exp;
    case BP_OP_RELU:
      return row_unary_op::relu;
    case BP_OP_GELU:
      return row_unary_op::gelu;
    case BP_OP_SILU:
      return row_unary_op::silu;
    case BP_OP_TANH:
      return row_unary_op::tanh;
    default:
      return row_unary_op::sigmoid;
  }
}

}  // namespace

bool unary_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0];
  return has_valid_shape(t) && has_valid_shape(a) && is_float_type(t->type) && t->type == a->type &&
         bp_tensor_same_shape(t, a);
}

void unary_run(const bp_tensor *dst, int ith, int nth) {
  const bp_tensor *a = dst->src[0];
  const int64_t n = dst->ne[0];
  const row_unary_op op = unary_of(dst->op);
  const row_store store = row_store_for(dst);
  std::vector<float> sa(scratch_for(a, n)), so(scratch_for(dst, n));
  int64_t r0, r1;
  split_range(bp_tensor_nrows(dst), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(dst, r);
    const float *ra = read_row(a, ix.i1, ix.i2, ix.i3, sa.data());
    float *ro = out_row(dst, ix.i1, ix.i2, ix.i3, so.data());
    row_unary(op, ro, ra, n, store);
    finish_row(dst, ix.i1, ix.i2, ix.i3, ro);
  }
  row_store_fence(store);
}

}  // namespace bp::cpu
