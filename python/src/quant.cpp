// quant.cpp: quantize() and dequantize() (bp_quantize_rows / bp_dequantize, byte
// for byte), and the conversion of NumPy data into a tensor's bytes.
#include "tensor_io.hpp"

namespace bppy {
namespace {

std::vector<int64_t> shape_of(const py::array &a) {
  std::vector<int64_t> s;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s.push_back(a.shape(i));
  if (s.empty()) s.push_back(1);
  return s;
}

int64_t count(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

}  // namespace

py::array quantize_rows(const py::array &f32, bp_type type) {
  std::vector<int64_t> shape = shape_of(f32);
  int64_t n = shape.back(), rows = n ? count(shape) / n : 0;
  int64_t blck = bp_type_block_size(type);
  size_t row_bytes = bp_type_size(type) * static_cast<size_t>((n + blck - 1) / blck);
  std::vector<py::ssize_t> out_shape(shape.begin(), shape.end());
  out_shape.back() = static_cast<py::ssize_t>(row_bytes);
  py::array_t<uint8_t> out(out_shape);
  const float *src = static_cast<const float *>(f32.data());
  void *dst = out.mutable_data();
  call_nogil([&] { return bp_quantize_rows(type, src, dst, rows, n, nullptr); });
  return out;
}

py::array host_bytes(const py::handle &data, bp_type &type, const std::vector<int64_t> *shape,
                     std::vector<int64_t> *out_shape, bool copy, bool transient) {
  py::array a0 = np().attr("asarray")(data);
  if (type == BP_TYPE_COUNT) type = type_of_dtype(a0.dtype());
  if (!bp_type_is_quantized(type)) {
    py::dtype dt = dtype_of(type);
    py::array a;
    if (copy && transient) {
      a = np().attr("ascontiguousarray")(a0, dt);  // a copy only where the dtype or layout differs
    } else if (copy) {
      a = np().attr("array")(a0, dt, py::arg("order") = "C", py::arg("copy") = true);
    } else {
      bool ok = a0.dtype().equal(dt) && (a0.flags() & py::array::c_style) && a0.writeable();
      if (!ok)
        fail(BP_ERR_INVALID_ARGUMENT,
             "copy=False wraps the array itself: it must be C-contiguous, writeable and of "
             "dtype " +
                 py::str(py::handle(dt)).cast<std::string>() + " (got " +
                 py::str(py::handle(a0.dtype())).cast<std::string>() + ")");
      a = a0;
    }
    std::vector<int64_t> s = shape ? *shape : shape_of(a);
    if (count(s) != a.size())
      fail(BP_ERR_INVALID_ARGUMENT,
           "shape= has " + std::to_string(count(s)) + " elements, the data " + std::to_string(a.size()));
    if (copy || shape) a = a.attr("reshape")(std::vector<py::ssize_t>(s.begin(), s.end()));
    *out_shape = s;
    return a;
  }
  int64_t blck = bp_type_block_size(type), tsize = static_cast<int64_t>(bp_type_size(type));
  if (a0.dtype().equal(py::dtype::of<uint8_t>())) {  // raw blocks
    std::vector<int64_t> s;
    if (shape) {
      s = *shape;
    } else {
      s = shape_of(a0);
      if (s.back() % tsize)
        fail(BP_ERR_INVALID_ARGUMENT, "raw " + type_name(type) + " data: the last axis (" + std::to_string(s.back()) +
                                          " bytes) is not whole blocks of " + std::to_string(tsize) + " bytes");
      s.back() = s.back() / tsize * blck;
    }
    if (s.empty() || s.back() % blck)
      fail(BP_ERR_INVALID_ARGUMENT,
           "a " + type_name(type) + " row holds whole blocks of " + std::to_string(blck) + " values");
    int64_t want = count(s) / blck * tsize;
    if (a0.nbytes() != want)
      fail(BP_ERR_INVALID_ARGUMENT, "raw " + type_name(type) + " data of " + std::to_string(a0.nbytes()) +
                                        " bytes; that shape needs " + std::to_string(want));
    py::array a = a0;
    if ((copy && !transient) || !(a0.flags() & py::array::c_style))
      a = np().attr("array")(a0, py::arg("order") = "C", py::arg("copy") = true);
    *out_shape = s;
    return a;
  }
  if (!copy) fail(BP_ERR_INVALID_ARGUMENT, "copy=False needs raw uint8 blocks for a quantized type");
  py::array f = np().attr("ascontiguousarray")(a0, py::dtype::of<float>());
  std::vector<int64_t> s = shape ? *shape : shape_of(f);
  if (count(s) != f.size()) fail(BP_ERR_INVALID_ARGUMENT, "shape= does not match the data's element count");
  f = f.attr("reshape")(std::vector<py::ssize_t>(s.begin(), s.end()));
  *out_shape = s;
  return quantize_rows(f, type);
}

void init_quant(py::module_ &m) {
  m.def(
      "quantize",
      [](const py::handle &data, const py::handle &type_arg) {
        bp_type type = parse_type(type_arg);
        py::array f = np().attr("ascontiguousarray")(data, py::dtype::of<float>());
        if (f.ndim() == 0) f = f.attr("reshape")(1);
        return quantize_rows(f, type);
      },
      py::arg("data"), py::arg("type"),
      "Quantizes float rows (along the last axis) into |type|'s blocks with bp_quantize_rows; returns uint8 of "
      "shape (..., row bytes).");
  m.def(
      "dequantize",
      [](const py::handle &data, const py::handle &type_arg, const std::vector<int64_t> &shape) {
        bp_type type = parse_type(type_arg);
        py::buffer_info info =
            py::buffer(np().attr("ascontiguousarray")(np().attr("frombuffer")(data, py::dtype::of<uint8_t>())))
                .request();
        int64_t n = count(shape);
        int64_t blck = bp_type_block_size(type);
        if (n % blck == 0) {
          size_t want = bp_type_row_size(type, n);
          if (static_cast<size_t>(info.size) != want)
            fail(BP_ERR_INVALID_ARGUMENT, "dequantize: " + std::to_string(n) + " values of " + type_name(type) +
                                              " are " + std::to_string(want) + " bytes, got " +
                                              std::to_string(info.size));
        }
        py::array_t<float> out(std::vector<py::ssize_t>(shape.begin(), shape.end()));
        const void *src = info.ptr;
        float *dst = out.mutable_data();
        call_nogil([&] { return bp_dequantize(type, src, dst, n); });
        return out;
      },
      py::arg("data"), py::arg("type"), py::arg("shape"),
      "Expands raw blocks (bytes or a uint8 array) of |type| into float32 of |shape| with bp_dequantize.");
  m.def(
      "type_size", [](const py::handle &t) { return bp_type_size(parse_type(t)); }, py::arg("type"),
      "Bytes per block (per element for f32, f16, i32).");
  m.def(
      "block_size", [](const py::handle &t) { return bp_type_block_size(parse_type(t)); }, py::arg("type"),
      "Values per block (1 for f32, f16, i32).");
  m.def(
      "row_size", [](const py::handle &t, int64_t n) { return bp_type_row_size(parse_type(t), n); }, py::arg("type"),
      py::arg("n"), "Bytes of a row of n values.");
  std::vector<std::string> names;
  for (int i = 0; i < BP_TYPE_COUNT; ++i) names.push_back(bp_type_name(static_cast<bp_type>(i)));
  m.attr("TYPES") = py::tuple(py::cast(names));
}

}  // namespace bppy
