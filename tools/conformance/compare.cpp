// compare.cpp: result against reference. NMSE = sum((out - ref)^2) /
// sum(ref^2) over the finite reference values; non-finite values must match
// exactly (NaN where NaN, +inf where +inf). When the reference is zero
// everywhere the plain sum of squared errors stands in for the NMSE.

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>

#include "conformance/conformance.hpp"

namespace bp::conformance {

namespace {

std::string index_str(const expected &want, size_t flat) {
  int64_t i = static_cast<int64_t>(flat);
  int64_t idx[4];
  for (int d = 0; d < 4; ++d) {
    idx[d] = i % want.ne[d];
    i /= want.ne[d];
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "[%lld,%lld,%lld,%lld]", (long long)idx[0], (long long)idx[1], (long long)idx[2],
                (long long)idx[3]);
  return buf;
}

std::string fmt(const char *f, double a, double b) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

}  // namespace

comparison compare_values(const std::vector<double> &actual, const expected &want, double max_nmse, bool exact) {
  comparison c;
  if (actual.size() != want.values.size()) {
    c.message =
        "result has " + std::to_string(actual.size()) + " elements, reference " + std::to_string(want.values.size());
    return c;
  }
  double err2 = 0, ref2 = 0, worst = -1;
  size_t worst_at = 0, mismatches = 0, first_mismatch = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], r = want.values[i];
    if (!std::isfinite(r) || !std::isfinite(a)) {
      const bool same = (std::isnan(r) && std::isnan(a)) || (std::isinf(r) && std::isinf(a) && (r > 0) == (a > 0));
      if (!same) {
        c.message = "non-finite mismatch at " + index_str(want, i) + fmt(": got %g, want %g", a, r);
        c.nmse = INFINITY;
        return c;
      }
      continue;
    }
    const double d = a - r;
    if (d != 0 && mismatches++ == 0) first_mismatch = i;
    err2 += d * d;
    ref2 += r * r;
    if (std::fabs(d) > worst) {
      worst = std::fabs(d);
      worst_at = i;
    }
  }
  c.nmse = ref2 > 0 ? err2 / ref2 : err2;
  if (exact) {
    c.ok = mismatches == 0;
    if (!c.ok)
      c.message = std::to_string(mismatches) + " of " + std::to_string(actual.size()) + " elements differ; first at " +
                  index_str(want, first_mismatch) +
                  fmt(": got %.17g, want %.17g", actual[first_mismatch], want.values[first_mismatch]);
    return c;
  }
  c.ok = c.nmse <= max_nmse;
  if (!c.ok)
    c.message =
        "worst at " + index_str(want, worst_at) + fmt(": got %.9g, want %.9g", actual[worst_at], want.values[worst_at]);
  return c;
}

namespace {

// Whether |a| stands for |r| under |t| (see compare_elementwise).
bool element_ok(double a, double r, const elem_tol &t) {
  if (t.rel < 0) return true;
  if (std::isnan(r)) return std::isnan(a);
  if (std::isinf(r)) return a == r;
  if (!std::isfinite(a)) return false;
  if (std::fabs(r) < FLT_MIN && std::fabs(a) < FLT_MIN) return true;
  return std::fabs(a - r) <= t.rel * std::fabs(r) + t.abs;
}

}  // namespace

comparison compare_elementwise(const std::vector<double> &actual, const expected &want, const expected *alt) {
  comparison c;
  if (actual.size() != want.values.size() || want.tol.size() != want.values.size() ||
      (alt && alt->values.size() != want.values.size())) {
    c.message = "result has " + std::to_string(actual.size()) + " elements, reference " +
                std::to_string(want.values.size()) + " (with " + std::to_string(want.tol.size()) + " bounds)";
    return c;
  }
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], r = want.values[i];
    const elem_tol &t = want.tol[i];
    if (element_ok(a, r, t) || (alt && element_ok(a, alt->values[i], alt->tol.size() > i ? alt->tol[i] : t))) {
      if (t.rel >= 0 && std::isfinite(r) && std::isfinite(a) && r != 0)
        worst = std::fmax(worst, std::fabs(a - r) / std::fabs(r));
      continue;
    }
    if (bad++ == 0) first = i;
  }
  // The largest relative error among passing finite values stands in for the NMSE.
  c.nmse = bad ? INFINITY : worst;
  c.ok = bad == 0;
  if (!c.ok) {
    const elem_tol &t = want.tol[first];
    char buf[200];
    std::snprintf(buf, sizeof buf, ": got %.9g, want %.9g (rel %.3g, abs %.3g)", actual[first], want.values[first],
                  t.rel, t.abs);
    c.message = std::to_string(bad) + " of " + std::to_string(actual.size()) + " elements out of bounds; first at " +
                index_str(want, first) + buf;
  }
  return c;
}

}  // namespace bp::conformance
