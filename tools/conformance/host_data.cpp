// host_data.cpp: the host side of a case's inputs: seeded random leaf values
// and the layout a chain of views gives, computed without the library (the
// library's own view code is under test).

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/splitmix64.hpp"
#include "conformance/conformance.hpp"

namespace bp::conformance {

namespace {

using rng = bp::tools::splitmix64;

// The specials |f| keeps.
std::vector<double> specials_for(const fill_spec &f) {
  std::vector<double> out;
  for (double v : special_values()) {
    if (f.no_nan && std::isnan(v)) continue;
    if (f.max_abs > 0 && std::isfinite(v) && std::fabs(v) > f.max_abs) continue;
    out.push_back(v);
  }
  return out;
}

}  // namespace

const std::vector<double> &special_values() {
  const double inf = std::numeric_limits<double>::infinity();
  const double fmax = std::numeric_limits<float>::max(), fmin = std::numeric_limits<float>::min();
  const double tiny = std::numeric_limits<float>::denorm_min();
  static const std::vector<double> v = {0.0,   -0.0,  inf,    -inf,   std::nan(""), 1e-40, -1e-40, tiny,  -2e-39,
                                        fmin,  -fmin, 1e-30,  -1e-7,  0.5,          -3.0,  10.0,   -10.0, 88.0,
                                        -88.0, 100.0, -100.0, 1000.0, -1000.0,      1e4,   -1e4,   1e10,  -1e10,
                                        1e20,  -1e20, 1e30,   -1e30,  3e38,         -3e38, fmax,   -fmax, 1.0};
  return v;
}

double round_to_type(double v, bp_type type) {
  switch (type) {
    case BP_TYPE_F32:
      return static_cast<double>(static_cast<float>(v));
    case BP_TYPE_F16:
      return static_cast<double>(bp_fp16_to_fp32(bp_fp32_to_fp16(static_cast<float>(v))));
    case BP_TYPE_I32:
      return std::nearbyint(v);
    default:
      return v;
  }
}

double host_input::flat(int64_t i) const {
  const int64_t i0 = i % layout.ne[0];
  i /= layout.ne[0];
  const int64_t i1 = i % layout.ne[1];
  i /= layout.ne[1];
  const int64_t i2 = i % layout.ne[2];
  const int64_t i3 = i / layout.ne[2];
  return at(i0, i1, i2, i3);
}

std::vector<double> make_leaf_values(const input_spec &spec, uint64_t seed) {
  const int64_t n = spec.ne[0] * spec.ne[1] * spec.ne[2] * spec.ne[3];
  std::vector<double> v(static_cast<size_t>(n));
  rng r{seed};
  const fill_spec &f = spec.fill;
  switch (f.kind) {
    case fill_kind::uniform:
      for (auto &x : v) x = f.lo + (f.hi - f.lo) * r.unit();
      break;
    case fill_kind::away_from_zero:
      for (auto &x : v) {
        const double mag = f.lo + (f.hi - f.lo) * r.unit();
        x = (r.next() & 1) ? mag : -mag;
      }
      break;
    case fill_kind::integers: {
      const auto lo = static_cast<int64_t>(f.lo), span = static_cast<int64_t>(f.hi) - lo + 1;
      for (auto &x : v) x = static_cast<double>(lo + static_cast<int64_t>(r.next() % static_cast<uint64_t>(span)));
      break;
    }
    case fill_kind::distinct: {
      // A ramp of n levels spread over [lo, hi], shuffled. Levels are at least
      // (hi - lo) / n apart, far more than the rounding of any type we use
      // for n <= a few thousand and |hi|, |lo| small.
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[r.next() % static_cast<uint64_t>(i + 1)]);
      const double step = n > 1 ? (f.hi - f.lo) / static_cast<double>(n - 1) : 0.0;
      for (int64_t i = 0; i < n; ++i) v[i] = f.lo + step * static_cast<double>(order[i]);
      break;
    }
    case fill_kind::special: {
      const std::vector<double> sv = specials_for(f);
      for (int64_t i = 0; i < n; ++i) v[i] = sv[static_cast<size_t>(i) % sv.size()];
      break;
    }
    case fill_kind::special_by_row: {
      const std::vector<double> sv = specials_for(f);
      for (int64_t i = 0; i < n; ++i) v[i] = sv[static_cast<size_t>(i / spec.ne[0]) % sv.size()];
      break;
    }
    case fill_kind::special_in_rows: {
      // Distinct values when NaN is left out (ARGMAX), so no ties but the
      // special's own; the special sits at a different column in each row.
      const std::vector<double> sv = specials_for(f);
      const int64_t ne0 = spec.ne[0];
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[r.next() % static_cast<uint64_t>(i + 1)]);
      const double step = n > 1 ? (f.hi - f.lo) / static_cast<double>(n - 1) : 0.0;
      for (int64_t i = 0; i < n; ++i)
        v[i] = f.no_nan ? f.lo + step * static_cast<double>(order[i]) : f.lo + (f.hi - f.lo) * r.unit();
      for (int64_t row = 0; row * ne0 < n; ++row)
        v[row * ne0 + (row * 7) % ne0] = sv[static_cast<size_t>(row) % sv.size()];
      break;
    }
    case fill_kind::causal_mask: {
      const int64_t ne0 = spec.ne[0], ne1 = spec.ne[1];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t i0 = i % ne0, i1 = (i / ne0) % ne1;
        v[i] = i0 <= i1 + (ne0 - ne1) ? 0.0 : -std::numeric_limits<double>::infinity();
      }
      break;
    }
  }
  for (auto &x : v) x = round_to_type(x, spec.type);
  return v;
}

host_layout apply_views_on_host(const input_spec &spec) {
  host_layout l;
  for (int d = 0; d < 4; ++d) l.ne[d] = spec.ne[d];
  l.stride[0] = 1;
  for (int d = 1; d < 4; ++d) l.stride[d] = l.stride[d - 1] * spec.ne[d - 1];
  for (const view_step &s : spec.views) {
    host_layout next = l;
    switch (s.what) {
      case view_step::kind::permute:
        for (int d = 0; d < 4; ++d) {
          next.ne[s.axes[d]] = l.ne[d];
          next.stride[s.axes[d]] = l.stride[d];
        }
        break;
      case view_step::kind::transpose:
        std::swap(next.ne[0], next.ne[1]);
        std::swap(next.stride[0], next.stride[1]);
        break;
      case view_step::kind::view:
        // A view's offset and strides count from the start of the viewed
        // tensor's memory, in the leaf's element units; dim 0 is dense.
        for (int d = 0; d < 4; ++d) next.ne[d] = s.ne[d];
        next.stride[0] = 1;
        for (int d = 1; d < 4; ++d) next.stride[d] = s.stride[d];
        next.offset = l.offset + s.offset;
        break;
    }
    l = next;
  }
  return l;
}

}  // namespace bp::conformance
