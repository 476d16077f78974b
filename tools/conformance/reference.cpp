// reference.cpp: see reference.hpp. Everything is computed in double from
// the case's own description of the operands; the result is rounded to the
// output type once at the end, as a device storing it would.

#include "conformance/reference.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace bp::conformance::ref {

namespace {

expected make(bp_type type, const int64_t ne[4]) {
  expected e;
  e.type = type;
  for (int d = 0; d < 4; ++d) e.ne[d] = ne[d];
  e.values.assign(static_cast<size_t>(ne[0] * ne[1] * ne[2] * ne[3]), 0.0);
  return e;
}

double &cell(expected &e, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return e.values[static_cast<size_t>(((i3 * e.ne[2] + i2) * e.ne[1] + i1) * e.ne[0] + i0)];
}

expected finish(expected e) {
  for (double &v : e.values) v = round_to_type(v, e.type);
  return e;
}

// Calls f(i0, i1, i2, i3) over every index of |ne|, dim 0 fastest.
template <typename F>
void for_each_index(const int64_t ne[4], F f) {
  for (int64_t i3 = 0; i3 < ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < ne[0]; ++i0) f(i0, i1, i2, i3);
}

double apply_unary(bp_op op, double x, const op_args &a) {
  const double pi = 3.14159265358979323846;
  switch (op) {
    case BP_OP_NEG:
      return -x;
    case BP_OP_ABS:
      return std::fabs(x);
    case BP_OP_SQR:
      return x * x;
    case BP_OP_SQRT:
      return std::sqrt(x);
    case BP_OP_EXP:
      return std::exp(x);
    case BP_OP_RELU:
      return x > 0 ? x : 0.0;
    // GELU as docs/ops.md defines it: x sigmoid(2u), u = sqrt(2/pi) (x +
    // 0.044715 x^3), which is the tanh form 0.5 x (1 + tanh(u)) without its
    // cancellation at large negative x.
    case BP_OP_GELU:
      return x / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    case BP_OP_SILU:
      return x / (1.0 + std::exp(-x));
    case BP_OP_TANH:
      return std::tanh(x);
    case BP_OP_SIGMOID:
      return 1.0 / (1.0 + std::exp(-x));
    case BP_OP_SCALE:
      return x * static_cast<double>(a.f[0]);
    // NaN stays NaN (docs/ops.md); std::fmax would give the lower bound.
    case BP_OP_CLAMP:
      return std::isnan(x) ? x : std::fmin(std::fmax(x, static_cast<double>(a.f[0])), static_cast<double>(a.f[1]));
    default:
      throw std::logic_error("reference: not a unary op");
  }
}

double apply_binary(bp_op op, double x, double y) {
  switch (op) {
    case BP_OP_ADD:
      return x + y;
    case BP_OP_SUB:
      return x - y;
    case BP_OP_MUL:
      return x * y;
    case BP_OP_DIV:
      return x / y;
    default:
      throw std::logic_error("reference: not a binary op");
  }
}

// Reduces each row (dim 0) of input 0 into one value with |f(row)|.
template <typename F>
expected per_row(const host_input &a, bp_type out_type, const int64_t out_ne[4], F f) {
  expected e = make(out_type, out_ne);
  std::vector<double> row(static_cast<size_t>(a.ne()[0]));
  size_t k = 0;
  for (int64_t i3 = 0; i3 < a.ne()[3]; ++i3)
    for (int64_t i2 = 0; i2 < a.ne()[2]; ++i2)
      for (int64_t i1 = 0; i1 < a.ne()[1]; ++i1) {
        for (int64_t i0 = 0; i0 < a.ne()[0]; ++i0) row[i0] = a.at(i0, i1, i2, i3);
        e.values[k++] = f(row);
      }
  return e;
}

// Each row of input 0 mapped to a new row of the same length.
template <typename F>
expected row_map(const host_input &a, F f) {
  expected e = make(BP_TYPE_F32, a.ne());
  const int64_t n = a.ne()[0];
  std::vector<double> row(static_cast<size_t>(n));
  for (int64_t i3 = 0; i3 < a.ne()[3]; ++i3)
    for (int64_t i2 = 0; i2 < a.ne()[2]; ++i2)
      for (int64_t i1 = 0; i1 < a.ne()[1]; ++i1) {
        for (int64_t i0 = 0; i0 < n; ++i0) row[i0] = a.at(i0, i1, i2, i3);
        f(row, i1, i2, i3);
        for (int64_t i0 = 0; i0 < n; ++i0) cell(e, i0, i1, i2, i3) = row[i0];
      }
  return e;
}

double row_mean(const std::vector<double> &r) {
  double s = 0;
  for (double x : r) s += x;
  return s / static_cast<double>(r.size());
}

}  // namespace

reference_fn binary(bp_op op) {
  return [op](const std::vector<host_input> &in, const op_args &) {
    const host_input &a = in[0], &b = in[1];
    expected e = make(a.type, a.ne());
    for_each_index(a.ne(), [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
      cell(e, i0, i1, i2, i3) =
          apply_binary(op, a.at(i0, i1, i2, i3), b.at(i0 % b.ne()[0], i1 % b.ne()[1], i2 % b.ne()[2], i3 % b.ne()[3]));
    });
    return finish(std::move(e));
  };
}

reference_fn unary(bp_op op) {
  return [op](const std::vector<host_input> &in, const op_args &args) {
    const host_input &a = in[0];
    expected e = make(a.type, a.ne());
    for_each_index(a.ne(), [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
      cell(e, i0, i1, i2, i3) = apply_unary(op, a.at(i0, i1, i2, i3), args);
    });
    return finish(std::move(e));
  };
}

reference_fn sum_rows() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const int64_t ne[4] = {1, in[0].ne()[1], in[0].ne()[2], in[0].ne()[3]};
    return finish(per_row(in[0], BP_TYPE_F32, ne, [](const std::vector<double> &r) { return row_mean(r) * r.size(); }));
  };
}

reference_fn mean() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const int64_t ne[4] = {1, in[0].ne()[1], in[0].ne()[2], in[0].ne()[3]};
    return finish(per_row(in[0], BP_TYPE_F32, ne, row_mean));
  };
}

reference_fn argmax() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const int64_t ne[4] = {in[0].ne()[1], in[0].ne()[2], in[0].ne()[3], 1};
    return finish(per_row(in[0], BP_TYPE_I32, ne, [](const std::vector<double> &r) {
      size_t best = 0;
      for (size_t i = 1; i < r.size(); ++i)
        if (r[i] > r[best]) best = i;
      return static_cast<double>(best);
    }));
  };
}

reference_fn norm() {
  return [](const std::vector<host_input> &in, const op_args &args) {
    const double eps = args.f[0];
    return finish(row_map(in[0], [eps](std::vector<double> &r, int64_t, int64_t, int64_t) {
      const double m = row_mean(r);
      double var = 0;
      for (double x : r) var += (x - m) * (x - m);
      var /= static_cast<double>(r.size());
      for (double &x : r) x = (x - m) / std::sqrt(var + eps);
    }));
  };
}

reference_fn rms_norm() {
  return [](const std::vector<host_input> &in, const op_args &args) {
    const double eps = args.f[0];
    return finish(row_map(in[0], [eps](std::vector<double> &r, int64_t, int64_t, int64_t) {
      double ms = 0;
      for (double x : r) ms += x * x;
      ms /= static_cast<double>(r.size());
      for (double &x : r) x = x / std::sqrt(ms + eps);
    }));
  };
}

reference_fn soft_max() {
  return [](const std::vector<host_input> &in, const op_args &args) {
    const double scale = args.f[0];
    const host_input *mask = in.size() > 1 ? &in[1] : nullptr;
    return finish(row_map(in[0], [&](std::vector<double> &r, int64_t i1, int64_t i2, int64_t i3) {
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t i0 = 0; i0 < r.size(); ++i0) {
        r[i0] *= scale;
        if (mask) r[i0] += mask->at(static_cast<int64_t>(i0), i1, i2 % mask->ne()[2], i3 % mask->ne()[3]);
        mx = std::fmax(mx, r[i0]);
      }
      if (mx == -std::numeric_limits<double>::infinity()) {  // fully masked: zeros (docs/ops.md)
        for (double &x : r) x = 0;
        return;
      }
      double sum = 0;
      for (double &x : r) sum += (x = std::exp(x - mx));
      for (double &x : r) x /= sum;
    }));
  };
}

reference_fn mul_mat() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const host_input &a = in[0], &b = in[1];
    const int64_t K = a.ne()[0];
    const int64_t ne[4] = {a.ne()[1], b.ne()[1], b.ne()[2], b.ne()[3]};
    const int64_t r2 = b.ne()[2] / a.ne()[2], r3 = b.ne()[3] / a.ne()[3];
    expected e = make(BP_TYPE_F32, ne);
    for_each_index(ne, [&](int64_t m, int64_t n, int64_t i2, int64_t i3) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += a.at(k, m, i2 / r2, i3 / r3) * b.at(k, n, i2, i3);
      cell(e, m, n, i2, i3) = s;
    });
    return finish(std::move(e));
  };
}

reference_fn get_rows() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const host_input &a = in[0], &ids = in[1];
    const int64_t ne[4] = {a.ne()[0], ids.ne()[0], a.ne()[2], a.ne()[3]};
    expected e = make(a.type == BP_TYPE_I32 ? BP_TYPE_I32 : BP_TYPE_F32, ne);
    for_each_index(ne, [&](int64_t i0, int64_t n, int64_t i2, int64_t i3) {
      const auto row = static_cast<int64_t>(ids.at(n, i2, i3, 0));
      cell(e, i0, n, i2, i3) = a.at(i0, row, i2, i3);
    });
    return finish(std::move(e));
  };
}

reference_fn cpy_into_leaf() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const host_input &src = in[0], &dst = in[1];
    expected e = make(dst.type, dst.leaf_ne);
    e.values = *dst.leaf;
    int64_t k = 0;
    for_each_index(dst.ne(), [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
      const int64_t at = dst.layout.offset + i0 * dst.layout.stride[0] + i1 * dst.layout.stride[1] +
                         i2 * dst.layout.stride[2] + i3 * dst.layout.stride[3];
      e.values[static_cast<size_t>(at)] = src.flat(k++);
    });
    return finish(std::move(e));
  };
}

reference_fn set_rows_into_leaf() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const host_input &src = in[0], &dst = in[1], &ids = in[2];
    expected e = make(dst.type, dst.leaf_ne);
    e.values = *dst.leaf;
    for_each_index(src.ne(), [&](int64_t i0, int64_t n, int64_t i2, int64_t i3) {
      const int64_t row = static_cast<int64_t>(ids.at(n, 0, 0, 0));
      const int64_t at = dst.layout.offset + i0 * dst.layout.stride[0] + row * dst.layout.stride[1] +
                         i2 * dst.layout.stride[2] + i3 * dst.layout.stride[3];
      e.values[static_cast<size_t>(at)] = src.at(i0, n, i2, i3);
    });
    return finish(std::move(e));
  };
}

reference_fn cont() {
  return [](const std::vector<host_input> &in, const op_args &args) {
    const host_input &a = in[0];
    expected e = make(args.type, a.ne());
    for_each_index(a.ne(), [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
      cell(e, i0, i1, i2, i3) = a.at(i0, i1, i2, i3);
    });
    return finish(std::move(e));
  };
}

reference_fn concat() {
  return [](const std::vector<host_input> &in, const op_args &args) {
    const host_input &a = in[0], &b = in[1];
    const int dim = args.i[0];
    int64_t ne[4] = {a.ne()[0], a.ne()[1], a.ne()[2], a.ne()[3]};
    ne[dim] += b.ne()[dim];
    expected e = make(a.type, ne);
    for_each_index(ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
      int64_t idx[4] = {i0, i1, i2, i3};
      double v;
      if (idx[dim] < a.ne()[dim]) {
        v = a.at(i0, i1, i2, i3);
      } else {
        idx[dim] -= a.ne()[dim];
        v = b.at(idx[0], idx[1], idx[2], idx[3]);
      }
      cell(e, i0, i1, i2, i3) = v;
    });
    return finish(std::move(e));
  };
}

reference_fn rope() {
  return [](const std::vector<host_input> &in, const op_args &args) {
    const host_input &pos = in[1];
    const host_input *ff = in.size() > 2 ? &in[2] : nullptr;  // frequency factors, one per pair
    const int64_t n_dims = args.i[0];
    const bool neox = args.i[1] == BP_ROPE_NEOX;
    const double base = args.f[2], fscale = args.f[3];
    return finish(row_map(in[0], [&](std::vector<double> &r, int64_t, int64_t i2, int64_t) {
      const double p = pos.at(i2, 0, 0, 0);
      const std::vector<double> x = r;
      for (int64_t i = 0; i < n_dims / 2; ++i) {
        double theta = p * fscale * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(n_dims));
        if (ff) theta /= ff->at(i, 0, 0, 0);
        const double c = std::cos(theta), s = std::sin(theta);
        const int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + n_dims / 2 : 2 * i + 1;
        r[j0] = x[j0] * c - x[j1] * s;
        r[j1] = x[j0] * s + x[j1] * c;
      }
    }));
  };
}

reference_fn attention() {
  return [](const std::vector<host_input> &in, const op_args &args) {
    const host_input &q = in[0], &k = in[1], &v = in[2];
    const host_input *mask = in.size() > 3 ? &in[3] : nullptr;
    const int64_t D = q.ne()[0], T = q.ne()[1], H = q.ne()[2], B = q.ne()[3];
    const int64_t N = k.ne()[1], Dv = v.ne()[0];
    const int64_t r2 = H / k.ne()[2], r3 = B / k.ne()[3];
    const int64_t ne[4] = {Dv, H, T, B};
    expected e = make(BP_TYPE_F32, ne);
    std::vector<double> s(static_cast<size_t>(N));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t hk = h / r2, bk = b / r3;
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < N; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += q.at(d, t, h, b) * k.at(d, j, hk, bk);
            s[j] = static_cast<double>(args.f[0]) * dot;
            if (mask) s[j] += mask->at(j, t, h % mask->ne()[2], b % mask->ne()[3]);
            mx = std::fmax(mx, s[j]);
          }
          if (mx == -std::numeric_limits<double>::infinity()) continue;  // fully masked: zeros (docs/ops.md)
          double sum = 0;
          for (double &x : s) sum += (x = std::exp(x - mx));
          for (int64_t d = 0; d < Dv; ++d) {
            double acc = 0;
            for (int64_t j = 0; j < N; ++j) acc += s[j] * v.at(d, j, hk, bk);
            cell(e, d, h, t, b) = acc / sum;
          }
        }
    return finish(std::move(e));
  };
}

// ---------------------------------------------------------------------------
// Special values: the same references, plus a bound per element from the
// stated precision of the API under test (docs/ops.md, "Special values and
// tolerances"). "ulp" here is 2^-23 relative, one unit in the last place of
// a float at the bottom of its binade.

namespace {

constexpr double k_ulp = 1.0 / 8388608.0;  // 2^-23
// exp(-t) is 0 or inf in f32 beyond this |t|: larger arguments add no error.
constexpr double k_exp_range = 104.0;

enum class api_kind { host, vulkan, opencl };

api_kind api_of(const std::string &api) {
  if (api == "vulkan") return api_kind::vulkan;
  if (api == "opencl") return api_kind::opencl;
  return api_kind::host;  // cpu, blas, anything in C++ with libm
}

// Ulps allowed for exp(t): Vulkan 3 + 2|t| (SPIR-V Exp), OpenCL 3 (full
// profile), host 4 (glibc's vector expf is within 4, its scalar expf 1).
double exp_ulps(api_kind api, double t) {
  t = std::fmin(std::fabs(t), k_exp_range);
  switch (api) {
    case api_kind::vulkan:
      return 3.0 + 2.0 * t;
    case api_kind::opencl:
      return 3.0;
    default:
      return 4.0;
  }
}

// Ulps for x / y: 2.5 in Vulkan and OpenCL, correctly rounded on the host.
double div_ulps(api_kind api) { return api == api_kind::host ? 1.0 : 3.0; }

// The bound of f(x) = num / (1 + exp(-t)) computed in f32, |t| from x with
// |t_ulps| ulps of its own: exp's error, t's error carried through exp,
// the add and the divide.
elem_tol sigmoid_form(api_kind api, double t, double t_ulps) {
  const double at = std::fmin(std::fabs(t), k_exp_range);
  return {(exp_ulps(api, t) + t_ulps * at + div_ulps(api) + 1.0) * k_ulp, 0.0};
}

elem_tol unary_tol(api_kind api, bp_op op, double x) {
  const double pi = 3.14159265358979323846;
  switch (op) {
    case BP_OP_NEG:
    case BP_OP_ABS:
    case BP_OP_RELU:
    case BP_OP_CLAMP:
      return {0.0, 0.0};
    case BP_OP_SQR:
    case BP_OP_SCALE:
      return {k_ulp, 0.0};
    // Vulkan: 1 / inversesqrt(x) (2 + 2.5 ulps); OpenCL 3; host correctly rounded.
    case BP_OP_SQRT:
      return {(api == api_kind::vulkan ? 5.0 : api == api_kind::opencl ? 3.0 : 1.0) * k_ulp, 0.0};
    case BP_OP_EXP:
      return {exp_ulps(api, x) * k_ulp, 0.0};
    case BP_OP_SIGMOID:
    case BP_OP_SILU:
      return sigmoid_form(api, x, 0.0);
    // t = 2 sqrt(2/pi) (x + 0.044715 x^3) takes about 5 roundings.
    case BP_OP_GELU:
      return sigmoid_form(api, 2.0 * std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x), 5.0);
    // Vulkan's tanh is inherited from sinh / cosh, so from exp: an absolute
    // error near 0 as well. OpenCL 5 ulps; host 2.
    case BP_OP_TANH:
      if (api == api_kind::vulkan) return {8.0 * k_ulp, 8.0 * k_ulp};
      return {(api == api_kind::opencl ? 5.0 : 2.0) * k_ulp, 0.0};
    default:
      throw std::logic_error("reference: not a unary op");
  }
}

elem_tol binary_tol(api_kind api, bp_op op) { return {op == BP_OP_DIV ? div_ulps(api) * k_ulp : k_ulp, 0.0}; }

}  // namespace

reference_fn unary_special(bp_op op) {
  return [op](const std::vector<host_input> &in, const op_args &args) {
    expected e = unary(op)(in, args);
    const api_kind api = api_of(args.api);
    e.tol.resize(e.values.size());
    for (size_t i = 0; i < e.values.size(); ++i) e.tol[i] = unary_tol(api, op, in[0].flat(static_cast<int64_t>(i)));
    return e;
  };
}

reference_fn binary_special(bp_op op) {
  return [op](const std::vector<host_input> &in, const op_args &args) {
    expected e = binary(op)(in, args);
    e.tol.assign(e.values.size(), binary_tol(api_of(args.api), op));
    return e;
  };
}

reference_fn row_special(bp_op op) {
  return [op](const std::vector<host_input> &in, const op_args &args) {
    const host_input &a = in[0];
    const api_kind api = api_of(args.api);
    expected e;
    switch (op) {
      case BP_OP_SUM_ROWS:
        e = sum_rows()(in, args);
        break;
      case BP_OP_MEAN:
        e = mean()(in, args);
        break;
      case BP_OP_NORM:
        e = norm()(in, args);
        break;
      case BP_OP_RMS_NORM:
        e = rms_norm()(in, args);
        break;
      case BP_OP_SOFT_MAX:
        e = soft_max()(in, args);
        break;
      default:
        throw std::logic_error("reference: no special-value bound for this row op");
    }
    const int64_t n = a.ne()[0];
    const double dn = static_cast<double>(n);
    const bool per_row_value = op == BP_OP_SUM_ROWS || op == BP_OP_MEAN;
    e.tol.resize(e.values.size());
    std::vector<double> row(static_cast<size_t>(n));
    size_t k = 0;
    for (int64_t i3 = 0; i3 < a.ne()[3]; ++i3)
      for (int64_t i2 = 0; i2 < a.ne()[2]; ++i2)
        for (int64_t i1 = 0; i1 < a.ne()[1]; ++i1) {
          double sum_abs = 0, sum = 0, sum2 = 0, mx = -std::numeric_limits<double>::infinity();
          for (int64_t i0 = 0; i0 < n; ++i0) {
            row[i0] = a.at(i0, i1, i2, i3);
            sum_abs += std::fabs(row[i0]);
            sum += row[i0];
            sum2 += row[i0] * row[i0];
            mx = std::fmax(mx, row[i0] * static_cast<double>(args.f[0]));
          }
          const double m = sum / dn;
          double var = 0, dev = 0;
          for (double x : row) {
            var += (x - m) * (x - m);
            dev = std::fmax(dev, std::fabs(x - m));
          }
          var /= dn;
          if (per_row_value) {
            // Any summation order: (n - 1) ulps of the sum of magnitudes.
            const double bound = (dn + 1.0) * k_ulp * sum_abs;
            e.tol[k++] = {k_ulp, op == BP_OP_MEAN ? bound / dn : bound};
            continue;
          }
          for (int64_t i0 = 0; i0 < n; ++i0) {
            elem_tol t;
            if (op == BP_OP_NORM) {
              t = {4.0 * k_ulp, 4.0 * dn * k_ulp * dev / std::sqrt(var + static_cast<double>(args.f[0]))};
            } else if (op == BP_OP_RMS_NORM) {
              double big = 0;
              for (double x : row) big = std::fmax(big, std::fabs(x));
              t = {4.0 * k_ulp, 4.0 * dn * k_ulp * big / std::sqrt(sum2 / dn + static_cast<double>(args.f[0]))};
            } else {  // SOFT_MAX: exp of x - max, the sum of n, the divide
              const double d = std::fabs(row[i0] * static_cast<double>(args.f[0]) - mx);
              t = {(exp_ulps(api, d) + std::fmin(d, k_exp_range) + 2.0 * dn + div_ulps(api) + 2.0) * k_ulp, 0.0};
            }
            e.tol[static_cast<size_t>(((i3 * a.ne()[2] + i2) * a.ne()[1] + i1) * n + i0)] = t;
          }
        }
    return e;
  };
}

}  // namespace bp::conformance::ref
