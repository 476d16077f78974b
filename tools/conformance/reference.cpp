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
    case BP_OP_NEG: return -x;
    case BP_OP_ABS: return std::fabs(x);
    case BP_OP_SQR: return x * x;
    case BP_OP_SQRT: return std::sqrt(x);
    case BP_OP_EXP: return std::exp(x);
    case BP_OP_RELU: return x > 0 ? x : 0.0;
    // The tanh form of GELU (the one docs/ops.md specifies).
    case BP_OP_GELU: return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    case BP_OP_SILU: return x / (1.0 + std::exp(-x));
    case BP_OP_TANH: return std::tanh(x);
    case BP_OP_SIGMOID: return 1.0 / (1.0 + std::exp(-x));
    case BP_OP_SCALE: return x * static_cast<double>(a.f[0]);
    case BP_OP_CLAMP: return std::fmin(std::fmax(x, static_cast<double>(a.f[0])), static_cast<double>(a.f[1]));
    default: throw std::logic_error("reference: not a unary op");
  }
}

double apply_binary(bp_op op, double x, double y) {
  switch (op) {
    case BP_OP_ADD: return x + y;
    case BP_OP_SUB: return x - y;
    case BP_OP_MUL: return x * y;
    case BP_OP_DIV: return x / y;
    default: throw std::logic_error("reference: not a binary op");
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
      cell(e, i0, i1, i2, i3) = apply_binary(
          op, a.at(i0, i1, i2, i3), b.at(i0 % b.ne()[0], i1 % b.ne()[1], i2 % b.ne()[2], i3 % b.ne()[3]));
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
    const int64_t n_dims = args.i[0];
    const bool neox = args.i[1] == BP_ROPE_NEOX;
    const double base = args.f[2], fscale = args.f[3];
    return finish(row_map(in[0], [&](std::vector<double> &r, int64_t, int64_t i2, int64_t) {
      const double p = pos.at(i2, 0, 0, 0);
      const std::vector<double> x = r;
      for (int64_t i = 0; i < n_dims / 2; ++i) {
        const double theta = p * fscale * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(n_dims));
        const double c = std::cos(theta), s = std::sin(theta);
        const int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + n_dims / 2 : 2 * i + 1;
        r[j0] = x[j0] * c - x[j1] * s;
        r[j1] = x[j0] * s + x[j1] * c;
      }
    }));
  };
}

}  // namespace bp::conformance::ref
