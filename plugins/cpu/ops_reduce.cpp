// ops_reduce.cpp: reductions over dim 0 (SUM_ROWS MEAN ARGMAX), the row
// normalisations (NORM RMS_NORM) and SOFT_MAX with optional mask and scale.
// Sums accumulate in double so long rows stay accurate.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels.hpp"
#include "row_math.hpp"

namespace bp::cpu {
namespace {

// The reductions write one value per source row; the output element of row
// |r| is the r-th element of |dst| in logical order, whatever its shape.
void store_flat(const bp_tensor *dst, int64_t r, float v, int32_t iv, bool as_int) {
  int64_t i0 = r % dst->ne[0];
  int64_t q = r / dst->ne[0];
  int64_t i1 = q % dst->ne[1];
  q /= dst->ne[1];
  int64_t i2 = q % dst->ne[2];
  int64_t i3 = q / dst->ne[2];
  char *p = elem_ptr(dst, i0, i1, i2, i3);
  if (as_int && dst->type == BP_TYPE_I32) {
    std::memcpy(p, &iv, sizeof iv);
  } else {
    store_f32(p, dst->type, as_int ? static_cast<float>(iv) : v);
  }
}

void reduce_rows(const bp_tensor *dst, int ith, int nth) {
  const bp_tensor *a = dst->src[0];
  const int64_t n = a->ne[0];
  std::vector<float> sa(static_cast<size_t>(n));
  int64_t r0, r1;
  split_range(bp_tensor_nrows(a), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(a, r);
    const float *x = read_row(a, ix.i1, ix.i2, ix.i3, sa.data());
    if (dst->op == BP_OP_ARGMAX) {
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
      store_flat(dst, r, 0.0f, static_cast<int32_t>(best), true);
      continue;
    }
    double sum = row_sum(x, n);
    if (dst->op == BP_OP_MEAN) sum /= static_cast<double>(n);
    store_flat(dst, r, static_cast<float>(sum), 0, false);
  }
}

void norm_rows(const bp_tensor *dst, int ith, int nth) {
  const bp_tensor *a = dst->src[0];
  const int64_t n = a->ne[0];
  const double eps = bp_tensor_param_f32(dst, 0);
  std::vector<float> sa(scratch_for(a, n)), so(scratch_for(dst, n));
  const row_store store = row_store_for(dst);
  int64_t r0, r1;
  split_range(bp_tensor_nrows(dst), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(dst, r);
    const float *x = read_row(a, ix.i1, ix.i2, ix.i3, sa.data());
    float *y = out_row(dst, ix.i1, ix.i2, ix.i3, so.data());
    if (dst->op == BP_OP_NORM) {
      const double mean = row_sum(x, n) / static_cast<double>(n);
      const double var = row_sum_sq(x, n, mean) / static_cast<double>(n);
      const double inv = 1.0 / std::sqrt(var + eps);
      // (x - mean) * inv in float: both fit, and the loop vectorizes.
      row_sub_scale(y, x, n, static_cast<float>(mean), static_cast<float>(inv), store);
    } else {  // RMS_NORM
      const double ss = row_sum_sq(x, n, 0.0);
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
      row_scale_add(y, x, n, inv, nullptr, store);
    }
    finish_row(dst, ix.i1, ix.i2, ix.i3, y);
  }
  row_store_fence(store);
}

}  // namespace

bool reduce_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0];
  // The kernels convert any float type; the core's op table allows F32.
  if (!has_valid_shape(t) || !has_valid_shape(a) || a->type != BP_TYPE_F32) return false;
  switch (t->op) {
    case BP_OP_NORM:
    case BP_OP_RMS_NORM:
      return t->type == BP_TYPE_F32 && bp_tensor_same_shape(t, a);
    case BP_OP_ARGMAX:
      return t->type == BP_TYPE_I32 && bp_tensor_nelements(t) == bp_tensor_nrows(a);
    default:  // SUM_ROWS, MEAN
      return t->type == BP_TYPE_F32 && bp_tensor_nelements(t) == bp_tensor_nrows(a);
  }
}

void reduce_run(const bp_tensor *t, int ith, int nth) {
  if (t->op == BP_OP_NORM || t->op == BP_OP_RMS_NORM) {
    norm_rows(t, ith, nth);
  } else {
    reduce_rows(t, ith, nth);
  }
}

bool soft_max_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0];
  const bp_tensor *mask = t->src[1];
  if (!has_valid_shape(t) || !has_valid_shape(a) || a->type != BP_TYPE_F32 || t->type != BP_TYPE_F32 ||
      !bp_tensor_same_shape(t, a))
    return false;
  return !mask || (has_valid_shape(mask) && is_float_type(mask->type));
}

// y = softmax(x * scale + mask) over dim 0. The mask row of (i1, i2, i3) is
// (i1, i2, i3) modulo the mask's extents: it broadcasts over heads and
// batches, and a mask with more rows or columns than |a| is read in its
// top-left corner. A row that is entirely -inf gives zeros, not NaN.
void soft_max_run(const bp_tensor *dst, int ith, int nth) {
  const bp_tensor *a = dst->src[0];
  const bp_tensor *mask = dst->src[1];
  const int64_t n = a->ne[0];
  const float scale = bp_tensor_param_f32(dst, 0);
  std::vector<float> sa(static_cast<size_t>(n)), so(static_cast<size_t>(n));
  std::vector<float> sm(mask ? static_cast<size_t>(mask->ne[0]) : 0u);
  // Streamed, the passes over a row work in |so| (L1 or L2) and only the
  // last one writes the row out, with non-temporal stores.
  const row_store store = row_store_for(dst);
  int64_t r0, r1;
  split_range(bp_tensor_nrows(dst), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(dst, r);
    const float *x = read_row(a, ix.i1, ix.i2, ix.i3, sa.data());
    const float *m =
        mask ? read_row(mask, ix.i1 % mask->ne[1], ix.i2 % mask->ne[2], ix.i3 % mask->ne[3], sm.data()) : nullptr;
    float *out = out_row(dst, ix.i1, ix.i2, ix.i3, so.data());
    float *y = store == row_store::streamed ? so.data() : out;
    // Scale and mask, then the row maximum (separate loops vectorize).
    if (!m || mask->ne[0] >= n) {
      row_scale_add(y, x, n, scale, m);
    } else {  // a narrower mask repeats along the row
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + m[i % mask->ne[0]];
    }
    const float mx = row_max(y, n);
    if (mx == -std::numeric_limits<float>::infinity()) {
      for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
    } else {
      const double sum = row_exp_shift_sum(y, n, mx);
      row_scale_add(out, y, n, static_cast<float>(1.0 / sum), nullptr, store);
    }
    finish_row(dst, ix.i1, ix.i2, ix.i3, out);
  }
  row_store_fence(store);
}

}  // namespace bp::cpu
