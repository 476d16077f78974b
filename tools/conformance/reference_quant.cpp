// reference_quant.cpp: the references of the quantized cases (see
// reference.hpp). Values are exact (double) from the operands the suite read
// with its own block reader; the bounds come from conformance/quant.hpp.
#include <cmath>

#include "conformance/quant.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance::ref {

namespace {

expected make_expected(bp_type type, const int64_t ne[4]) {
  expected e;
  e.type = type;
  for (int d = 0; d < 4; ++d) e.ne[d] = ne[d];
  const size_t n = static_cast<size_t>(ne[0] * ne[1] * ne[2] * ne[3]);
  e.values.assign(n, 0.0);
  e.tol.assign(n, elem_tol{0, 0});
  return e;
}

// Bounds of a quantized result whose values (logical order, dim 0 fastest)
// are e.values: each block's own quantization bound where |touched|, else 0
// (the bytes were not written, so the values must not move).
void set_quant_bounds(expected &e, const std::vector<bool> &touched) {
  const int64_t blck = bp_type_block_size(e.type);
  for (size_t b0 = 0; b0 < e.values.size(); b0 += static_cast<size_t>(blck)) {
    bool any = false;
    for (int64_t i = 0; i < blck; ++i) any = any || touched[b0 + static_cast<size_t>(i)];
    if (!any) continue;
    const std::vector<double> bound = quantization_bound(e.type, e.values.data() + b0, blck);
    for (int64_t i = 0; i < blck; ++i) e.tol[b0 + static_cast<size_t>(i)] = {0, bound[static_cast<size_t>(i)]};
  }
}

}  // namespace

reference_fn mul_mat_quant() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const host_input &a = in[0], &b = in[1];
    const int64_t K = a.ne()[0];
    const int64_t ne[4] = {a.ne()[1], b.ne()[1], b.ne()[2], b.ne()[3]};
    const int64_t r2 = b.ne()[2] / a.ne()[2], r3 = b.ne()[3] / a.ne()[3];
    expected e = make_expected(BP_TYPE_F32, ne);
    std::vector<double> w(static_cast<size_t>(K)), x(static_cast<size_t>(K));
    size_t i = 0;
    for (int64_t i3 = 0; i3 < ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < ne[2]; ++i2)
        for (int64_t n = 0; n < ne[1]; ++n)
          for (int64_t m = 0; m < ne[0]; ++m, ++i) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) {
              w[k] = a.at(k, m, i2 / r2, i3 / r3);
              x[k] = b.at(k, n, i2, i3);
              s += w[k] * x[k];
            }
            // The result is stored as f32: half an ulp of it on top.
            e.values[i] = static_cast<float>(s);
            e.tol[i] = {0x1p-24, mul_mat_quant_bound(a.type, w.data(), x.data(), K)};
          }
    return e;
  };
}

reference_fn cpy_into_quant_leaf() {
  return [](const std::vector<host_input> &in, const op_args &) {
    const host_input &src = in[0], &dst = in[1];
    expected e = make_expected(dst.type, dst.leaf_ne);
    e.values = *dst.leaf;
    std::vector<bool> touched(e.values.size(), false);
    int64_t k = 0;
    const int64_t *ne = dst.ne();
    for (int64_t i3 = 0; i3 < ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < ne[1]; ++i1)
          for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
            const int64_t at = dst.layout.offset + i0 * dst.layout.stride[0] + i1 * dst.layout.stride[1] +
                               i2 * dst.layout.stride[2] + i3 * dst.layout.stride[3];
            e.values[static_cast<size_t>(at)] = src.flat(k++);
            touched[static_cast<size_t>(at)] = true;
          }
    set_quant_bounds(e, touched);
    return e;
  };
}

reference_fn cont_quant() {
  return [](const std::vector<host_input> &in, const op_args &args) {
    const host_input &a = in[0];
    expected e = make_expected(args.type, a.ne());
    for (int64_t i = 0; i < a.nelements(); ++i) e.values[static_cast<size_t>(i)] = a.flat(i);
    set_quant_bounds(e, std::vector<bool>(e.values.size(), true));
    return e;
  };
}

}  // namespace bp::conformance::ref
