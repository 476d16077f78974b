// tensor.cpp: Tensor, tensors from NumPy arrays (copied, or wrapping the
// array's memory on host-memory devices) and back (np.asarray copies out).
#include <cstring>

#include "common.hpp"
#include "tensor_io.hpp"

namespace bppy {
namespace {

py::class_<Tensor> *g_tensor_class = nullptr;

std::vector<py::ssize_t> np_shape_of(const Tensor &x) {
  std::vector<py::ssize_t> s;
  for (int i = x.ndim - 1; i >= 0; --i) s.push_back(x.t->ne[i]);
  return s;
}

// The tensor's bytes (its memory, or the host data of a leaf that has none
// yet) as a NumPy array of its NumPy shape, copied out.
py::array to_numpy(const Tensor &x) {
  bp_tensor *t = x.t;
  if (!t->data) {
    auto it = x.ctx->pending.find(t);
    if (it != x.ctx->pending.end()) return py::array(it->second.attr("copy")());
    fail(BP_ERR_FAILED_PRECONDITION, std::string("tensor '") + t->name +
                                         "' has no memory yet: compute a graph that holds it, or create it "
                                         "with device=");
  }
  size_t nbytes = bp_tensor_nbytes(t);
  py::array_t<uint8_t> raw(static_cast<py::ssize_t>(nbytes));
  void *dst = raw.mutable_data();
  call_nogil([&] {
    std::lock_guard<std::mutex> lock(buffer_lock(t->buffer));
    return bp_tensor_get(t, dst, 0, nbytes);
  });
  bool q = bp_type_is_quantized(t->type);
  std::vector<py::ssize_t> shape, strides;
  for (int i = x.ndim - 1; i >= 0; --i) {
    py::ssize_t ne = t->ne[i], nb = static_cast<py::ssize_t>(t->nb[i]);
    if (i == 0 && q) {
      ne = ne / bp_type_block_size(t->type) * static_cast<py::ssize_t>(bp_type_size(t->type));
      nb = 1;
    }
    shape.push_back(ne);
    strides.push_back(nb);
  }
  py::array view(dtype_of(t->type), shape, strides, raw.data(), raw);
  return py::array(view.attr("copy")());
}

void set_from(const Tensor &x, const py::handle &data) {
  bp_tensor *t = x.t;
  std::vector<int64_t> shape;
  py::array arr = host_bytes(data, t->type, nullptr, &shape, true);
  int64_t n = 1;
  for (auto d : shape) n *= d;
  if (n != bp_tensor_nelements(t))
    fail(BP_ERR_INVALID_ARGUMENT,
         "set: the array has " + std::to_string(n) + " elements, the tensor " + std::to_string(bp_tensor_nelements(t)));
  if (!t->data) {
    if (t->op != BP_OP_NONE)
      fail(BP_ERR_FAILED_PRECONDITION, "set: an op's result gets memory when its graph is computed");
    x.ctx->pending[t] = arr.attr("reshape")(np_shape_of(x));
    return;
  }
  if (!bp_tensor_is_contiguous(t))
    fail(BP_ERR_INVALID_ARGUMENT, "set: the tensor is not contiguous (a view with gaps); set its source instead");
  const void *src = arr.data();
  size_t nbytes = static_cast<size_t>(arr.nbytes());
  call_nogil([&] {
    std::lock_guard<std::mutex> lock(buffer_lock(t->buffer));
    return bp_tensor_set(t, src, 0, nbytes);
  });
}

bp_buffer_usage parse_usage(const std::string &u) {
  if (u == "any") return BP_BUFFER_USAGE_ANY;
  if (u == "weights") return BP_BUFFER_USAGE_WEIGHTS;
  if (u == "compute") return BP_BUFFER_USAGE_COMPUTE;
  fail(BP_ERR_INVALID_ARGUMENT, "usage must be 'any', 'weights' or 'compute', not '" + u + "'");
}

Tensor make_tensor(const py::handle &data, const py::object &type_arg, const py::object &device, bool copy,
                   const py::object &name, const std::string &usage, const py::object &shape_arg) {
  std::vector<int64_t> shape;
  bp_type type = BP_TYPE_COUNT;
  if (!type_arg.is_none()) type = parse_type(type_arg);
  std::vector<int64_t> want;
  if (!shape_arg.is_none()) want = shape_arg.cast<std::vector<int64_t>>();
  // With a device and copy=True the bytes go into its buffer below: no host copy of its own is needed.
  py::array arr = host_bytes(data, type, shape_arg.is_none() ? nullptr : &want, &shape, copy || device.is_none(),
                             copy && !device.is_none());
  if (type == BP_TYPE_COUNT) type = parse_type(arr.dtype());
  CtxP c = current_ctx();
  Tensor x = new_leaf(c, type, shape);
  if (!name.is_none()) bp_tensor_set_name(x.t, name.cast<std::string>().c_str());
  bp_buffer_usage use = parse_usage(usage);
  if (device.is_none()) {
    if (!copy) fail(BP_ERR_INVALID_ARGUMENT, "copy=False wraps the array's memory: name a host-memory device");
    bp_tensor_set_flags(x.t, BP_TENSOR_FLAG_INPUT);
    c->pending[x.t] = arr;
    return x;
  }
  BackendP keep;
  bp_device *dev = device_from(device, &keep);
  auto b = std::make_shared<BufferH>();
  if (!copy) {
    void *ptr = arr.mutable_data();
    size_t nbytes = static_cast<size_t>(arr.nbytes());
    check(bp_device_buffer_from_host_ptr(dev, ptr, nbytes, &b->buf));
    b->host = arr;
  } else {
    bp_buffer_type *buft = check_ptr(bp_device_buffer_type(dev));
    size_t size = bp_buffer_type_alloc_size(buft, x.t);
    call_nogil([&] { return bp_buffer_type_alloc(buft, size, &b->buf); });
  }
  bp_buffer_set_usage(b->buf, use);
  check(bp_buffer_place_tensor(b->buf, x.t, 0));
  c->add_keep(b);
  if (copy) {
    const void *src = arr.data();
    size_t nbytes = static_cast<size_t>(arr.nbytes());
    bp_tensor *t = x.t;
    call_nogil([&] {
      std::lock_guard<std::mutex> lock(buffer_lock(t->buffer));
      return bp_tensor_set(t, src, 0, nbytes);
    });
  }
  return x;
}

Tensor make_empty(const std::vector<int64_t> &shape, const py::object &type_arg, const py::object &device,
                  const py::object &name) {
  bp_type type = type_arg.is_none() ? BP_TYPE_F32 : parse_type(type_arg);
  CtxP c = current_ctx();
  Tensor x = new_leaf(c, type, shape);
  if (!name.is_none()) bp_tensor_set_name(x.t, name.cast<std::string>().c_str());
  if (device.is_none()) {
    bp_tensor_set_flags(x.t, BP_TENSOR_FLAG_INPUT);
    return x;
  }
  BackendP keep;
  bp_device *dev = device_from(device, &keep);
  auto b = std::make_shared<BufferH>();
  bp_buffer_type *buft = check_ptr(bp_device_buffer_type(dev));
  size_t size = bp_buffer_type_alloc_size(buft, x.t);
  call_nogil([&] { return bp_buffer_type_alloc(buft, size, &b->buf); });
  check(bp_buffer_place_tensor(b->buf, x.t, 0));
  c->add_keep(b);
  return x;
}

template <typename A>
py::tuple tuple4(const A &a) {
  return py::make_tuple(a[0], a[1], a[2], a[3]);
}

}  // namespace

py::class_<Tensor> &tensor_class() { return *g_tensor_class; }

Tensor new_leaf(const CtxP &c, bp_type type, const std::vector<int64_t> &np_shape) {
  if (np_shape.size() > BP_MAX_DIMS)
    fail(BP_ERR_INVALID_ARGUMENT,
         "a tensor has at most 4 dimensions, this shape has " + std::to_string(np_shape.size()));
  int64_t ne[BP_MAX_DIMS] = {1, 1, 1, 1};
  int n = static_cast<int>(np_shape.size());
  for (int i = 0; i < n; ++i) ne[i] = np_shape[n - 1 - i];
  bp_tensor *t = check_ptr(bp_tensor_new(c->ctx, type, n == 0 ? 1 : n, ne));
  return Tensor{c, t, n == 0 ? 1 : n};
}

void init_tensor(py::module_ &m) {
  g_tensor_class = new py::class_<Tensor>(
      m, "Tensor",
      "A tensor (bp_tensor) of a context. Its NumPy shape is Backplane's ne reversed (ne[0], the fastest "
      "dimension, is the last axis). Operators build graph nodes: + - * / @ and unary -.");
  auto &cls = *g_tensor_class;
  cls.def_property_readonly("shape", [](const Tensor &x) { return py::tuple(py::cast(np_shape_of(x))); })
      .def_property_readonly("ndim", [](const Tensor &x) { return x.ndim; })
      .def_property_readonly(
          "ne", [](const Tensor &x) { return tuple4(x.t->ne); }, "Backplane's dims, fastest first.")
      .def_property_readonly(
          "nb", [](const Tensor &x) { return tuple4(x.t->nb); }, "Byte strides per ne dim.")
      .def_property_readonly("type", [](const Tensor &x) { return type_name(x.t->type); })
      .def_property_readonly("dtype", [](const Tensor &x) { return dtype_of(x.t->type); })
      .def_property_readonly("op", [](const Tensor &x) { return std::string(bp_op_name(x.t->op)); })
      .def_property_readonly("flags", [](const Tensor &x) { return x.t->flags; })
      .def_property_readonly("nbytes", [](const Tensor &x) { return bp_tensor_nbytes(x.t); })
      .def_property_readonly("nelements", [](const Tensor &x) { return bp_tensor_nelements(x.t); })
      .def_property_readonly("is_contiguous", [](const Tensor &x) { return bp_tensor_is_contiguous(x.t); })
      .def_property_readonly("has_memory", [](const Tensor &x) { return x.t->data != nullptr; })
      .def_property_readonly("src",
                             [](const Tensor &x) {
                               std::vector<Tensor> out;
                               for (auto *s : x.t->src)
                                 if (s) out.push_back(Tensor{x.ctx, s, infer_ndim(s, 1)});
                               return out;
                             })
      .def_property(
          "name", [](const Tensor &x) { return std::string(x.t->name); },
          [](const Tensor &x, const std::string &n) { check_ptr(bp_tensor_set_name(x.t, n.c_str())); })
      .def("numpy", &to_numpy, "A copy of the tensor's values (raw uint8 blocks for a quantized type).")
      .def(
          "__array__",
          [](const Tensor &x, py::object dtype, py::object) {
            py::array a = to_numpy(x);
            return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("set", &set_from, py::arg("data"), "Writes the array's values into the tensor.")
      .def("__len__", [](const Tensor &x) { return x.t->ne[x.ndim - 1]; })
      .def("__repr__", [](const Tensor &x) {
        std::string s = "Tensor(";
        if (x.t->name[0]) s += "'" + std::string(x.t->name) + "', ";
        s += "shape=" + py::str(py::tuple(py::cast(np_shape_of(x)))).cast<std::string>();
        s += ", type='" + type_name(x.t->type) + "', op=" + bp_op_name(x.t->op) + ")";
        return s;
      });

  m.def("tensor", &make_tensor, py::arg("data"), py::arg("type") = py::none(), py::kw_only(),
        py::arg("device") = py::none(), py::arg("copy") = true, py::arg("name") = py::none(), py::arg("usage") = "any",
        py::arg("shape") = py::none(),
        "A leaf tensor holding |data| (a NumPy array or anything np.asarray takes). Without a device it has no "
        "memory until a graph holding it is computed (the scheduler places it; its values are written then). "
        "With device= (a Device, Backend or spec) it is allocated there now; copy=False wraps the array's "
        "memory instead (host-memory devices), keeping the array alive. A quantized type quantizes float data "
        "or takes raw uint8 blocks (shape= gives the element shape).");
  m.def("empty", &make_empty, py::arg("shape"), py::arg("type") = py::none(), py::kw_only(),
        py::arg("device") = py::none(), py::arg("name") = py::none(),
        "A leaf tensor of |shape| (NumPy order) with undefined values.");
}

}  // namespace bppy
