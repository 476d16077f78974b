// ops.cpp: the op builders of backplane.h as functions (backplane.add,
// .mul_mat, ...), views, and the Tensor operators and methods built on them.
// Each result lives in the current context (common.hpp: current_ctx).
#include <algorithm>
#include <cctype>
#include <cstring>

#include "tensor_io.hpp"

namespace bppy {
namespace {

// A result of the current context; the contexts of its sources are kept.
Tensor result(const CtxP &c, bp_tensor *t, std::initializer_list<const Tensor *> srcs, int ndim_hint) {
  check_ptr(t);
  for (const Tensor *s : srcs)
    if (s) c->add_dep(s->ctx);
  return wrap(c, t, ndim_hint);
}

// A constant leaf of |type| holding |h| (a number or an array).
Tensor const_leaf(const py::handle &h, bp_type type) {
  std::vector<int64_t> shape;
  py::array a = host_bytes(h, type, nullptr, &shape, true);
  CtxP c = current_ctx();
  Tensor x = new_leaf(c, type, shape);
  bp_tensor_set_flags(x.t, BP_TENSOR_FLAG_INPUT);
  c->pending[x.t] = a;
  return x;
}

// |h| as a tensor: a Tensor, or a constant leaf from a number or array.
Tensor operand(const py::handle &h, bp_type like) {
  if (py::isinstance<Tensor>(h)) return h.cast<Tensor>();
  return const_leaf(h, like == BP_TYPE_F16 ? BP_TYPE_F16 : BP_TYPE_F32);
}

using Binary = bp_tensor *(*)(bp_context *, bp_tensor *, bp_tensor *);
Tensor binary(Binary fn, const Tensor &a, const py::handle &bh) {
  Tensor b = operand(bh, a.t->type);
  CtxP c = current_ctx();
  return result(c, fn(c->ctx, a.t, b.t), {&a, &b}, a.ndim);
}

using Unary = bp_tensor *(*)(bp_context *, bp_tensor *);
Tensor unary1(Unary fn, const Tensor &a, int ndim) {
  CtxP c = current_ctx();
  return result(c, fn(c->ctx, a.t), {&a}, ndim);
}

bp_op parse_op(const std::string &name) {
  std::string up = name;
  for (auto &ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (int i = 0; i < BP_OP_COUNT; ++i)
    if (up == bp_op_name(static_cast<bp_op>(i))) return static_cast<bp_op>(i);
  fail(BP_ERR_INVALID_ARGUMENT, "unknown op '" + name + "' (see backplane.OPS)");
}

Tensor mul_mat(const Tensor &a, const Tensor &b) {
  CtxP c = current_ctx();
  return result(c, bp_mul_mat(c->ctx, a.t, b.t), {&a, &b}, std::max(a.ndim, b.ndim));
}

Tensor transpose(const Tensor &a) {
  CtxP c = current_ctx();
  return result(c, bp_transpose(c->ctx, a.t), {&a}, std::max(a.ndim, 2));
}

Tensor cont(const Tensor &a) { return unary1(bp_cont, a, a.ndim); }

// NumPy's a @ b: (..., M, K) @ (..., K, N) = mul_mat(cont(b^T), a).
Tensor matmul(const Tensor &a, const py::handle &bh) {
  Tensor b = operand(bh, BP_TYPE_F32);
  Tensor r = mul_mat(cont(transpose(b)), a);
  r.ndim = infer_ndim(r.t, std::max({a.ndim, b.ndim, 2}));
  return r;
}

Tensor reshape(const Tensor &a, const std::vector<int64_t> &shape) {
  if (shape.empty() || shape.size() > BP_MAX_DIMS)
    fail(BP_ERR_INVALID_ARGUMENT, "reshape: 1 to 4 dimensions, got " + std::to_string(shape.size()));
  std::vector<int64_t> s = shape;
  int64_t known = 1, hole = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1 && hole < 0) {
      hole = static_cast<int64_t>(i);
    } else {
      known *= s[i];
    }
  }
  if (hole >= 0 && known > 0) s[hole] = bp_tensor_nelements(a.t) / known;
  int64_t ne[BP_MAX_DIMS] = {1, 1, 1, 1};
  int n = static_cast<int>(s.size());
  for (int i = 0; i < n; ++i) ne[i] = s[n - 1 - i];
  CtxP c = current_ctx();
  return result(c, bp_reshape(c->ctx, a.t, n, ne), {&a}, n);
}

// A view of |a|: NumPy-order shape and byte strides, |offset| bytes in.
Tensor view(const Tensor &a, std::vector<int64_t> shape, std::vector<int64_t> strides, size_t offset) {
  if (shape.empty() || shape.size() > BP_MAX_DIMS)
    fail(BP_ERR_INVALID_ARGUMENT, "view: 1 to 4 dimensions, got " + std::to_string(shape.size()));
  int n = static_cast<int>(shape.size());
  int64_t ne[BP_MAX_DIMS] = {1, 1, 1, 1};
  size_t nb[BP_MAX_DIMS];
  for (int i = 0; i < n; ++i) ne[i] = shape[n - 1 - i];
  if (strides.empty()) {
    nb[0] = bp_type_size(a.t->type);
    nb[1] = bp_type_row_size(a.t->type, ne[0]);
    for (int i = 2; i < BP_MAX_DIMS; ++i) nb[i] = nb[i - 1] * static_cast<size_t>(ne[i - 1]);
  } else {
    if (strides.size() != shape.size()) fail(BP_ERR_INVALID_ARGUMENT, "view: strides and shape differ in length");
    for (int i = 0; i < n; ++i) nb[i] = static_cast<size_t>(strides[n - 1 - i]);
    for (int i = n; i < BP_MAX_DIMS; ++i) nb[i] = nb[i - 1] * static_cast<size_t>(ne[i - 1]);
    if (nb[0] != bp_type_size(a.t->type) && ne[0] != 1)
      fail(BP_ERR_INVALID_ARGUMENT, "view: the last axis must be dense (stride " +
                                        std::to_string(bp_type_size(a.t->type)) + " bytes); got " +
                                        std::to_string(nb[0]));
  }
  CtxP c = current_ctx();
  return result(c, bp_view_4d(c->ctx, a.t, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset), {&a}, n);
}

// t[...] with integers and slices (positive steps; the last axis step 1).
Tensor getitem(const Tensor &a, const py::object &key) {
  py::tuple k = py::isinstance<py::tuple>(key) ? py::tuple(key) : py::make_tuple(key);
  if (static_cast<int>(k.size()) > a.ndim) fail(BP_ERR_INVALID_ARGUMENT, "too many indices for this tensor");
  std::vector<int64_t> shape, strides;
  size_t offset = 0;
  for (int j = 0; j < a.ndim; ++j) {
    int d = a.ndim - 1 - j;
    int64_t len = a.t->ne[d];
    int64_t nb = static_cast<int64_t>(a.t->nb[d]);
    if (j >= static_cast<int>(k.size())) {
      shape.push_back(len);
      strides.push_back(nb);
      continue;
    }
    py::handle item = k[j];
    if (py::isinstance<py::slice>(item)) {
      py::ssize_t start, stop, step, slicelen;
      if (!py::reinterpret_borrow<py::slice>(item).compute(len, &start, &stop, &step, &slicelen))
        throw py::error_already_set();
      if (step <= 0) fail(BP_ERR_INVALID_ARGUMENT, "views take positive steps only");
      if (d == 0 && step != 1) fail(BP_ERR_INVALID_ARGUMENT, "the last axis of a view is dense: step 1 only");
      if (slicelen == 0) fail(BP_ERR_INVALID_ARGUMENT, "an empty slice: every dimension must be >= 1");
      if (d == 0 && bp_type_is_quantized(a.t->type) &&
          (start % bp_type_block_size(a.t->type) || slicelen % bp_type_block_size(a.t->type)))
        fail(BP_ERR_INVALID_ARGUMENT, "a quantized row is sliced in whole blocks");
      int64_t elem = d == 0 && bp_type_is_quantized(a.t->type) ? nb / bp_type_block_size(a.t->type) : nb;
      offset += static_cast<size_t>(start * elem);
      shape.push_back(slicelen);
      strides.push_back(nb * step);
    } else {
      int64_t i = item.cast<int64_t>();
      if (i < 0) i += len;
      if (i < 0 || i >= len) throw py::index_error("index " + std::to_string(i) + " is out of range");
      if (d == 0) fail(BP_ERR_INVALID_ARGUMENT, "an integer index on the last axis: use a slice t[..., i:i+1]");
      offset += static_cast<size_t>(i * nb);
    }
  }
  if (shape.empty()) shape.push_back(1), strides.push_back(static_cast<int64_t>(bp_type_size(a.t->type)));
  return view(a, shape, strides, offset);
}

Tensor permute(const Tensor &a, int ax0, int ax1, int ax2, int ax3) {
  CtxP c = current_ctx();
  int hint = std::max(
      a.ndim, 1 + std::max({a.ndim > 0 ? ax0 : 0, a.ndim > 1 ? ax1 : 0, a.ndim > 2 ? ax2 : 0, a.ndim > 3 ? ax3 : 0}));
  return result(c, bp_permute(c->ctx, a.t, ax0, ax1, ax2, ax3), {&a}, hint);
}

Tensor cast(const Tensor &a, const py::handle &type) {
  CtxP c = current_ctx();
  return result(c, bp_cast(c->ctx, a.t, parse_type(type)), {&a}, a.ndim);
}

Tensor concat(const Tensor &a, const Tensor &b, py::object dim, py::object axis) {
  int d = 0;
  int nd = std::max(a.ndim, b.ndim);
  if (!axis.is_none()) {
    int ax = axis.cast<int>();
    if (ax < 0) ax += nd;
    d = nd - 1 - ax;
  } else if (!dim.is_none()) {
    d = dim.cast<int>();
  }
  CtxP c = current_ctx();
  return result(c, bp_concat(c->ctx, a.t, b.t, d), {&a, &b}, nd);
}

int rope_mode(const py::handle &h) {
  if (py::isinstance<py::str>(h)) {
    std::string s = h.cast<std::string>();
    if (s == "normal") return BP_ROPE_NORMAL;
    if (s == "neox") return BP_ROPE_NEOX;
    fail(BP_ERR_INVALID_ARGUMENT, "rope mode 'normal' or 'neox', not '" + s + "'");
  }
  return h.cast<int>();
}

void def_unary(py::module_ &m, const char *name, Unary fn, const char *doc) {
  m.def(
      name, [fn](const Tensor &a) { return unary1(fn, a, a.ndim); }, py::arg("a"), doc);
}

}  // namespace

void init_ops(py::module_ &m) {
  m.def(
      "add", [](const Tensor &a, const py::object &b) { return binary(bp_add, a, b); }, py::arg("a"), py::arg("b"),
      "a + b; b broadcasts over a (a.ne[i] % b.ne[i] == 0).");
  m.def(
      "sub", [](const Tensor &a, const py::object &b) { return binary(bp_sub, a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "mul", [](const Tensor &a, const py::object &b) { return binary(bp_mul, a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "div", [](const Tensor &a, const py::object &b) { return binary(bp_div, a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "scale",
      [](const Tensor &a, float s) {
        CtxP c = current_ctx();
        return result(c, bp_scale(c->ctx, a.t, s), {&a}, a.ndim);
      },
      py::arg("a"), py::arg("s"));
  m.def(
      "clamp",
      [](const Tensor &a, float lo, float hi) {
        CtxP c = current_ctx();
        return result(c, bp_clamp(c->ctx, a.t, lo, hi), {&a}, a.ndim);
      },
      py::arg("a"), py::arg("min"), py::arg("max"));
  m.def(
      "unary",
      [](const Tensor &a, const std::string &op) {
        CtxP c = current_ctx();
        return result(c, bp_unary(c->ctx, a.t, parse_op(op)), {&a}, a.ndim);
      },
      py::arg("a"), py::arg("op"), "Any op of the unary group by name ('gelu', 'NEG', ...).");
  def_unary(m, "neg", bp_neg, "-a");
  def_unary(m, "abs", bp_abs, "|a|");
  def_unary(m, "sqr", bp_sqr, "a * a");
  def_unary(m, "sqrt", bp_sqrt, "sqrt(a)");
  def_unary(m, "exp", bp_exp, "e^a");
  def_unary(m, "relu", bp_relu, "max(a, 0)");
  def_unary(m, "gelu", bp_gelu, "GELU, the tanh approximation (docs/ops.md)");
  def_unary(m, "silu", bp_silu, "a / (1 + e^-a)");
  def_unary(m, "tanh", bp_tanh, "tanh(a)");
  def_unary(m, "sigmoid", bp_sigmoid, "1 / (1 + e^-a)");
  def_unary(m, "sum_rows", bp_sum_rows, "Sum of each row (the last NumPy axis), kept as an axis of 1.");
  def_unary(m, "mean", bp_mean, "Mean of each row (the last NumPy axis), kept as an axis of 1.");
  m.def(
      "argmax", [](const Tensor &a) { return unary1(bp_argmax, a, std::max(a.ndim - 1, 1)); }, py::arg("a"),
      "i32 index of the largest value of each row (the last NumPy axis, dropped).");
  m.def("cont", &cont, py::arg("a"), "A contiguous copy of a.");
  m.def("transpose", &transpose, py::arg("a"), "Swaps Backplane dims 0 and 1 (NumPy's last two axes); a view.");
  m.def(
      "norm",
      [](const Tensor &a, float eps) {
        CtxP c = current_ctx();
        return result(c, bp_norm(c->ctx, a.t, eps), {&a}, a.ndim);
      },
      py::arg("a"), py::arg("eps") = 1e-5f);
  m.def(
      "rms_norm",
      [](const Tensor &a, float eps) {
        CtxP c = current_ctx();
        return result(c, bp_rms_norm(c->ctx, a.t, eps), {&a}, a.ndim);
      },
      py::arg("a"), py::arg("eps") = 1e-6f);
  m.def(
      "soft_max",
      [](const Tensor &a, const py::object &mask, float scale) {
        CtxP c = current_ctx();
        if (mask.is_none()) return result(c, bp_soft_max(c->ctx, a.t, nullptr, scale), {&a}, a.ndim);
        Tensor mk = operand(mask, BP_TYPE_F32);
        return result(c, bp_soft_max(c->ctx, a.t, mk.t, scale), {&a, &mk}, a.ndim);
      },
      py::arg("a"), py::arg("mask") = py::none(), py::arg("scale") = 1.0f,
      "softmax(a * scale + mask) over each row (the last NumPy axis).");
  m.def("mul_mat", &mul_mat, py::arg("a"), py::arg("b"),
        "Backplane's product: a [K, M] x b [K, N] -> [M, N] in ne order, i.e. b @ a.T in NumPy terms.");
  m.def("matmul", &matmul, py::arg("a"), py::arg("b"), "NumPy's a @ b: mul_mat(cont(transpose(b)), a).");
  m.def(
      "get_rows",
      [](const Tensor &a, const py::object &ids_arg) {
        Tensor ids = py::isinstance<Tensor>(ids_arg) ? ids_arg.cast<Tensor>() : const_leaf(ids_arg, BP_TYPE_I32);
        CtxP c = current_ctx();
        return result(c, bp_get_rows(c->ctx, a.t, ids.t), {&a, &ids}, std::max(a.ndim, ids.ndim + 1));
      },
      py::arg("a"), py::arg("ids"), "Rows of a picked by i32 ids (f32 result; i32 for an i32 table).");
  m.def(
      "cpy",
      [](const Tensor &a, const Tensor &b) {
        CtxP c = current_ctx();
        return result(c, bp_cpy(c->ctx, a.t, b.t), {&a, &b}, b.ndim);
      },
      py::arg("a"), py::arg("b"), "Writes a into b; use the result (an alias of b) in later ops.");
  m.def(
      "set_rows",
      [](const Tensor &dst, const Tensor &src, const py::object &ids_arg) {
        Tensor ids = py::isinstance<Tensor>(ids_arg) ? ids_arg.cast<Tensor>() : const_leaf(ids_arg, BP_TYPE_I32);
        CtxP c = current_ctx();
        return result(c, bp_set_rows(c->ctx, dst.t, src.t, ids.t), {&dst, &src, &ids}, dst.ndim);
      },
      py::arg("dst"), py::arg("src"), py::arg("ids"),
      "Writes row i of src into row ids[i] of dst (NumPy: dst[..., ids, :] = src); use the result (an alias of dst).");
  m.def(
      "attention",
      [](const Tensor &q, const Tensor &k, const Tensor &v, const py::object &mask, float scale) {
        CtxP c = current_ctx();
        if (mask.is_none()) return result(c, bp_attention(c->ctx, q.t, k.t, v.t, nullptr, scale), {&q, &k, &v}, q.ndim);
        Tensor mk = operand(mask, BP_TYPE_F32);
        return result(c, bp_attention(c->ctx, q.t, k.t, v.t, mk.t, scale), {&q, &k, &v, &mk}, q.ndim);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask") = py::none(), py::arg("scale") = 1.0f,
      "Fused softmax(scale q k^T + mask) v. NumPy shapes: q [B, H, T, D], k [B, Hk, N, D], v [B, Hk, N, Dv], "
      "mask [N] rows per token ([T, N]); result [B, T, H, Dv] (heads before tokens in ne order).");
  m.def("cast", &cast, py::arg("a"), py::arg("type"), "A contiguous copy of a converted to |type|.");
  m.def("concat", &concat, py::arg("a"), py::arg("b"), py::arg("dim") = py::none(), py::kw_only(),
        py::arg("axis") = py::none(), "a then b along Backplane dim |dim|, or NumPy axis |axis|.");
  m.def(
      "rope",
      [](const Tensor &a, const Tensor &pos, int n_dims, const py::object &mode, float base, float scale,
         const py::object &freq_factors) {
        CtxP c = current_ctx();
        if (freq_factors.is_none())
          return result(c, bp_rope(c->ctx, a.t, pos.t, n_dims, rope_mode(mode), base, scale), {&a, &pos}, a.ndim);
        const Tensor &ff = freq_factors.cast<const Tensor &>();
        return result(c, bp_rope_ext(c->ctx, a.t, pos.t, ff.t, n_dims, rope_mode(mode), base, scale), {&a, &pos, &ff},
                      a.ndim);
      },
      py::arg("a"), py::arg("pos"), py::arg("n_dims"), py::arg("mode") = 0, py::arg("freq_base") = 10000.0f,
      py::arg("freq_scale") = 1.0f, py::arg("freq_factors") = py::none(),
      "Rotary embedding of a [D, H, T, B] (ne order) by i32 positions [T]; pair i's angle is divided by "
      "freq_factors[i] when given (f32, at least n_dims/2).");
  m.def("reshape", &reshape, py::arg("a"), py::arg("shape"), "A view of contiguous a with a NumPy-order shape.");
  m.def("view", &view, py::arg("a"), py::arg("shape"), py::arg("strides") = std::vector<int64_t>{},
        py::arg("offset") = 0, "A view of a: NumPy-order shape and byte strides, |offset| bytes in.");
  m.def("permute", &permute, py::arg("a"), py::arg("ax0"), py::arg("ax1"), py::arg("ax2") = 2, py::arg("ax3") = 3,
        "bp_permute: Backplane dim i of a becomes dim ax_i.");
  m.def(
      "op",
      [](const std::string &name, const std::vector<Tensor> &srcs, const std::vector<int32_t> &params) {
        std::vector<bp_tensor *> s;
        int nd = 1;
        for (const auto &x : srcs) s.push_back(x.t), nd = std::max(nd, x.ndim);
        CtxP c = current_ctx();
        Tensor r = wrap(c,
                        check_ptr(bp_op_new(c->ctx, parse_op(name), s.data(), static_cast<int>(s.size()), params.data(),
                                            static_cast<int>(params.size()))),
                        nd);
        for (const auto &x : srcs) c->add_dep(x.ctx);
        return r;
      },
      py::arg("name"), py::arg("srcs"), py::arg("params") = std::vector<int32_t>{},
      "Any computed op by name (bp_op_new), parameters as 32-bit words.");
  std::vector<std::string> ops;
  for (int i = 0; i < BP_OP_COUNT; ++i) ops.push_back(bp_op_name(static_cast<bp_op>(i)));
  m.attr("OPS") = py::tuple(py::cast(ops));

  auto &cls = tensor_class();
  cls.attr("__array_ufunc__") = py::none();
  cls.def("__add__", [](const Tensor &a, const py::object &b) { return binary(bp_add, a, b); })
      .def("__radd__", [](const Tensor &a, const py::object &b) { return binary(bp_add, a, b); })
      .def("__sub__", [](const Tensor &a, const py::object &b) { return binary(bp_sub, a, b); })
      .def("__rsub__",
           [](const Tensor &a, const py::object &b) { return unary1(bp_neg, binary(bp_sub, a, b), a.ndim); })
      .def("__mul__",
           [](const Tensor &a, const py::object &b) {
             if (py::isinstance<py::float_>(b) || py::isinstance<py::int_>(b)) {
               CtxP c = current_ctx();
               return result(c, bp_scale(c->ctx, a.t, b.cast<float>()), {&a}, a.ndim);
             }
             return binary(bp_mul, a, b);
           })
      .def("__rmul__",
           [](const Tensor &a, const py::object &b) {
             if (py::isinstance<py::float_>(b) || py::isinstance<py::int_>(b)) {
               CtxP c = current_ctx();
               return result(c, bp_scale(c->ctx, a.t, b.cast<float>()), {&a}, a.ndim);
             }
             return binary(bp_mul, a, b);
           })
      .def("__truediv__", [](const Tensor &a, const py::object &b) { return binary(bp_div, a, b); })
      .def("__rtruediv__",
           [](const Tensor &a, const py::object &b) {
             py::object shape = py::cast(a).attr("shape");
             Tensor full = operand(np().attr("full")(shape, b, py::dtype::of<float>()), BP_TYPE_F32);
             return binary(bp_div, full, py::cast(a));
           })
      .def("__matmul__", &matmul)
      .def("__rmatmul__",
           [](const Tensor &a, const py::object &b) { return matmul(operand(b, BP_TYPE_F32), py::cast(a)); })
      .def("__neg__", [](const Tensor &a) { return unary1(bp_neg, a, a.ndim); })
      .def("__abs__", [](const Tensor &a) { return unary1(bp_abs, a, a.ndim); })
      .def("__getitem__", &getitem)
      .def_property_readonly("T", &transpose)
      .def("transpose", &transpose)
      .def("cont", &cont)
      .def("cast", &cast, py::arg("type"))
      .def("reshape",
           [](const Tensor &a, py::args shape) {
             if (shape.size() == 1 && !py::isinstance<py::int_>(shape[0]))
               return reshape(a, shape[0].cast<std::vector<int64_t>>());
             return reshape(a, shape.cast<std::vector<int64_t>>());
           })
      .def("view", &view, py::arg("shape"), py::arg("strides") = std::vector<int64_t>{}, py::arg("offset") = 0)
      .def("permute", &permute, py::arg("ax0"), py::arg("ax1"), py::arg("ax2") = 2, py::arg("ax3") = 3);
}

}  // namespace bppy
