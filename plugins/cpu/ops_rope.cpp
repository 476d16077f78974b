// ops_rope.cpp: rotary position embedding of a [D, H, T, B] by positions
// p = pos[t]. Pair i (0 <= i < n_dims/2) is rotated by
// theta_i = p * freq_scale * freq_base^(-2i/n_dims). NORMAL rotates the
// neighbours (2i, 2i+1); NEOX rotates (i, i + n_dims/2). Dims >= n_dims are
// copied unchanged. An optional src[2] holds frequency factors: theta_i is
// divided by ff[i].
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels.hpp"

namespace bp::cpu {

bool rope_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *pos = t->src[1];
  if (!has_valid_shape(t) || !has_valid_shape(a) || !has_valid_shape(pos)) return false;
  if (t->type != BP_TYPE_F32 || a->type != BP_TYPE_F32 || pos->type != BP_TYPE_I32) return false;
  if (!bp_tensor_same_shape(t, a) || pos->ne[0] < a->ne[2]) return false;
  const int32_t n_dims = bp_tensor_param_i32(t, 0);
  const int32_t mode = bp_tensor_param_i32(t, 1);
  if (!(n_dims >= 2 && n_dims % 2 == 0 && n_dims <= a->ne[0] && (mode == BP_ROPE_NORMAL || mode == BP_ROPE_NEOX)))
    return false;
  const bp_tensor *ff = t->src[2];
  return !ff || (has_valid_shape(ff) && ff->type == BP_TYPE_F32 && ff->ne[0] >= n_dims / 2);
}

void rope_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0], *pos = t->src[1];
  const int64_t n = a->ne[0];
  const int32_t n_dims = bp_tensor_param_i32(t, 0);
  const bool neox = bp_tensor_param_i32(t, 1) == BP_ROPE_NEOX;
  const double freq_base = bp_tensor_param_f32(t, 2);
  const double freq_scale = bp_tensor_param_f32(t, 3);
  const int64_t half = n_dims / 2;

  // Per-pair cos/sin for the current position, rebuilt when it changes.
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  std::vector<double> inv_freq(static_cast<size_t>(half));
  const bp_tensor *ff = t->src[2];
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(n_dims));
    if (ff) {
      float f;
      std::memcpy(&f, elem_ptr(ff, i, 0, 0, 0), sizeof f);
      inv_freq[i] /= static_cast<double>(f);
    }
  }
  bool have = false;
  int32_t cached = 0;

  std::vector<float> sa(static_cast<size_t>(n)), so(static_cast<size_t>(n));
  int64_t r0, r1;
  split_range(bp_tensor_nrows(t), ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    row_index ix = decode_row(t, r);
    int32_t p;
    std::memcpy(&p, elem_ptr(pos, ix.i2, 0, 0, 0), sizeof p);
    if (!have || p != cached) {
      for (int64_t i = 0; i < half; ++i) {
        double theta = static_cast<double>(p) * freq_scale * inv_freq[i];
        cs[i] = static_cast<float>(std::cos(theta));
        sn[i] = static_cast<float>(std::sin(theta));
      }
      have = true;
      cached = p;
    }
    const float *x = read_row(a, ix.i1, ix.i2, ix.i3, sa.data());
    float *y = out_row(t, ix.i1, ix.i2, ix.i3, so.data());
    for (int64_t i = 0; i < half; ++i) {
      const int64_t j0 = neox ? i : 2 * i;
      const int64_t j1 = neox ? i + half : 2 * i + 1;
      const float x0 = x[j0], x1 = x[j1];
      y[j0] = x0 * cs[i] - x1 * sn[i];
      y[j1] = x0 * sn[i] + x1 * cs[i];
    }
    for (int64_t i = n_dims; i < n; ++i) y[i] = x[i];
    finish_row(t, ix.i1, ix.i2, ix.i3, y);
  }
}

}  // namespace bp::cpu
