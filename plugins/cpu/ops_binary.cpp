// ops_binary.cpp: ADD SUB MUL DIV (src1 broadcast over src0 by repetition
// in every dim), and the elementwise ops with parameters SCALE and CLAMP.
// Inputs and output may be F32 or F16 in any combination; math is in F32.
#include <vector>

#include "kernels.hpp"
#include "row_math.hpp"

namespace bp::cpu {
namespace {

struct add_op {
  static float f(float a, float b) { return a + b; }
  static constexpr row_binary_op row = row_binary_op::add;
};
struct sub_op {
  static float f(float a, float b) { return a - b; }
  static constexpr row_binary_op row = row_binary_op::sub;
};
struct mul_op {
  static float f(float a, float b) { return a * b; }
  static constexpr row_binary_op row = row_binary_op::mul;
};
struct div_op {
  static float f(float a, float b) { return a / b; }
  static constexpr row_binary_op row = row_binary_op::div;
};

// out[i] = a[i] op b[i % nb0] for one row. The three shapes of b get their
// own loops so the common ones vectorize.
template <typename Op>
void binary_row(float *out, const float *a, const float *b, int64_t n, int64_t nb0, row_store store) {
  if (nb0 == n) {
    row_binary(Op::row, out, a, b, n, store);  // the ISA-dispatched loop (row_math.hpp)
  } else if (nb0 == 1) {
    const float s = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = Op::f(a[i], s);
  } else {
    for (int64_t base = 0; base < n; base += nb0) {
      int64_t m = n - base < nb0 ? n - base : nb0;
      for (int64_t i = 0; i < m; ++i) out[base + i] = Op::f(a[base + i], b[i]);
    }
  }
}

template <typename Op>
void binary_rows(const bp_tensor *dst, int ith, int nth) {
  const bp_tensor *a = dst->src[0];
  const bp_tensor *b = dst->src[1];
  const int64_t n = dst->ne[0];
  // Scratch only for rows that need converting (scratch_for, kernels.hpp).
  std::vector<float> sa(scratch_for(a, n)), sb(scratch_for(b, b->ne[0])), so(scratch_for(dst, n));
  const row_store store = row_store_for(dst);
  int64_t r0, r1;
  split_range(bp_tensor_nrows(dst), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(dst, r);
    const float *ra = read_row(a, ix.i1, ix.i2, ix.i3, sa.data());
    const float *rb = read_row(b, ix.i1 % b->ne[1], ix.i2 % b->ne[2], ix.i3 % b->ne[3], sb.data());
    float *ro = out_row(dst, ix.i1, ix.i2, ix.i3, so.data());
    binary_row<Op>(ro, ra, rb, n, b->ne[0], store);
    finish_row(dst, ix.i1, ix.i2, ix.i3, ro);
  }
  row_store_fence(store);
}

void param_rows(const bp_tensor *dst, int ith, int nth) {
  const bp_tensor *a = dst->src[0];
  const int64_t n = dst->ne[0];
  std::vector<float> sa(scratch_for(a, n)), so(scratch_for(dst, n));
  const float p0 = bp_tensor_param_f32(dst, 0), p1 = bp_tensor_param_f32(dst, 1);
  const row_store store = row_store_for(dst);
  int64_t r0, r1;
  split_range(bp_tensor_nrows(dst), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(dst, r);
    const float *ra = read_row(a, ix.i1, ix.i2, ix.i3, sa.data());
    float *ro = out_row(dst, ix.i1, ix.i2, ix.i3, so.data());
    if (dst->op == BP_OP_SCALE) {
      row_scale_add(ro, ra, n, p0, nullptr, store);
    } else {  // CLAMP: min then max, so NaN bounds leave values alone
      for (int64_t i = 0; i < n; ++i) {
        float v = ra[i];
        v = v < p0 ? p0 : v;
        ro[i] = v > p1 ? p1 : v;
      }
    }
    finish_row(dst, ix.i1, ix.i2, ix.i3, ro);
  }
  row_store_fence(store);
}

}  // namespace

bool binary_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0];
  if (!has_valid_shape(t) || !has_valid_shape(a) || !is_float_type(t->type) || !is_float_type(a->type)) return false;
  if (!bp_tensor_same_shape(t, a) || t->type != a->type) return false;
  if (t->op == BP_OP_SCALE || t->op == BP_OP_CLAMP) return true;
  const bp_tensor *b = t->src[1];
  if (!has_valid_shape(b) || !is_float_type(b->type)) return false;
  for (int d = 0; d < BP_MAX_DIMS; ++d)
    if (a->ne[d] % b->ne[d] != 0) return false;
  return true;
}

void binary_run(const bp_tensor *t, int ith, int nth) {
  switch (t->op) {
    case BP_OP_ADD:
      binary_rows<add_op>(t, ith, nth);
      break;
    case BP_OP_SUB:
      binary_rows<sub_op>(t, ith, nth);
      break;
    case BP_OP_MUL:
      binary_rows<mul_op>(t, ith, nth);
      break;
    case BP_OP_DIV:
      binary_rows<div_op>(t, ith, nth);
      break;
    default:
      param_rows(t, ith, nth);
      break;
  }
}

}  // namespace bp::cpu
