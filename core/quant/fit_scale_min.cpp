// fit_scale_min.cpp: the scale-and-min search of the K types with a minimum
// (Q2_K, Q4_K, Q5_K): fit x[i] ~ scale * L[i] - min with codes L in 0..nmax.
//
// Start from the min/max fit, then try candidate inverse scales
// (nmax + rmin + 0.1 s) / (max - min), s = 0..steps, and keep the weighted
// least-squares scale and min of the one with the smallest weighted error
// (squared, or absolute for Q2_K).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quant.hpp"

namespace bp::core::quant {
namespace {

constexpr float k_rdelta = 0.1f;

float weighted_error(const scale_min_search &sp, float w, float diff) {
  return sp.absolute_error ? w * std::fabs(diff) : w * (diff * diff);
}

}  // namespace

float fit_scale_min(const scale_min_search &sp, int n, const float *x, const float *w, uint8_t *L, uint8_t *aux,
                    float *min_out) {
  const int nmax = sp.nmax;
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;  // the min is subtracted, so it is never positive
  if (hi == lo) {
    std::memset(L, 0, static_cast<size_t>(n));
    *min_out = -lo;
    return 0.0f;
  }
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float best_err = 0;
  for (int i = 0; i < n; ++i) {
    const int l = round_nearest(iscale * (x[i] - lo));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    best_err += weighted_error(sp, w[i], scale * L[i] + lo - x[i]);
  }
  for (int s = 0; s <= sp.steps; ++s) {
    iscale = (sp.rmin + k_rdelta * s + nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, round_nearest(iscale * (x[i] - lo))));
      aux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float cand_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float cand_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (cand_min > 0) {
      cand_min = 0;
      cand_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) err += weighted_error(sp, w[i], cand_scale * aux[i] + cand_min - x[i]);
    if (err < best_err) {
      std::memcpy(L, aux, static_cast<size_t>(n));
      best_err = err;
      scale = cand_scale;
      lo = cand_min;
    }
  }
  *min_out = -lo;
  return scale;
}

}  // namespace bp::core::quant
