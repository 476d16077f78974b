// gguf.cpp: backplane.gguf: File (bp_gguf: metadata, tensors as NumPy
// arrays, loading onto a device) and Writer (bp_gguf_writer_*).
#include "backplane/gguf.h"

#include "tensor_io.hpp"

namespace bppy {
namespace {

struct FileH {
  bp_gguf *f = nullptr;
  ~FileH() { bp_gguf_close(f); }
};
struct File {
  std::shared_ptr<FileH> h;
  bp_gguf *get() const {
    if (!h) fail(BP_ERR_FAILED_PRECONDITION, "this gguf File was closed");
    return h->f;
  }
};

struct WeightsH : Keep {
  bp_gguf_weights *w = nullptr;
  ~WeightsH() override { bp_gguf_weights_free(w); }
};

struct WriterH {
  bp_gguf_writer *w = nullptr;
  std::vector<py::object> hold;  // data borrowed until write returns
  ~WriterH() { bp_gguf_writer_free(w); }
};
struct Writer {
  std::shared_ptr<WriterH> h;
  bp_gguf_writer *get() const {
    if (!h) fail(BP_ERR_FAILED_PRECONDITION, "this gguf Writer was closed");
    return h->w;
  }
};

struct TensorInfo {
  std::string name, type;
  std::vector<int64_t> shape;
  uint32_t file_type = 0;
  bool supported = false;
  uint64_t offset = 0, nbytes = 0;
};

bp_gguf_tensor_info info_of(bp_gguf *f, size_t i) {
  bp_gguf_tensor_info info{};
  info.struct_size = sizeof info;
  check(bp_gguf_tensor_describe(f, i, &info));
  return info;
}

py::object scalar(bp_gguf *f, size_t i, uint64_t e, bp_gguf_kind kind) {
  switch (kind) {
    case BP_GGUF_F32:
    case BP_GGUF_F64: {
      double v;
      check(bp_gguf_kv_read_float(f, i, e, &v));
      return py::float_(v);
    }
    case BP_GGUF_STRING: {
      const char *d;
      uint64_t n;
      check(bp_gguf_kv_read_string(f, i, e, &d, &n));
      PyObject *s = PyUnicode_DecodeUTF8(d, static_cast<py::ssize_t>(n), nullptr);
      if (s) return py::reinterpret_steal<py::object>(s);
      PyErr_Clear();
      return py::bytes(d, n);  // not UTF-8: the bytes as they are
    }
    case BP_GGUF_U64: {
      uint64_t v;
      check(bp_gguf_kv_read_uint(f, i, e, &v));
      return py::int_(v);
    }
    case BP_GGUF_BOOL: {
      int64_t v;
      check(bp_gguf_kv_read_int(f, i, e, &v));
      return py::bool_(v != 0);
    }
    default: {
      int64_t v;
      check(bp_gguf_kv_read_int(f, i, e, &v));
      return py::int_(v);
    }
  }
}

py::object value(bp_gguf *f, size_t i) {
  bp_gguf_value_info vi{};
  vi.struct_size = sizeof vi;
  check(bp_gguf_kv_describe(f, i, &vi));
  if (vi.kind != BP_GGUF_ARRAY) return scalar(f, i, 0, vi.kind);
  py::list out;
  for (uint64_t e = 0; e < vi.count; ++e) out.append(scalar(f, i, e, vi.elem_kind));
  return out;
}

py::array tensor_array(const File &file, const std::string &name, bool deq) {
  bp_gguf *f = file.get();
  size_t i = 0;
  check(bp_gguf_find_tensor(f, name.c_str(), &i));
  bp_gguf_tensor_info info = info_of(f, i);
  const void *data = nullptr;
  uint64_t size = 0;
  check(bp_gguf_tensor_data(f, i, &data, &size));
  std::vector<py::ssize_t> shape;
  for (int d = static_cast<int>(info.n_dims) - 1; d >= 0; --d) shape.push_back(info.ne[d]);
  if (!info.supported) {
    if (deq) fail(BP_ERR_UNIMPLEMENTED, name + ": Backplane does not hold type " + info.type_name);
    py::array_t<uint8_t> raw(static_cast<py::ssize_t>(size));
    std::memcpy(raw.mutable_data(), data, size);
    return raw;
  }
  bp_type t = info.type;
  if (bp_type_is_quantized(t)) {
    if (deq) {
      py::array_t<float> out(shape);
      float *dst = out.mutable_data();
      int64_t n = static_cast<int64_t>(out.size());
      call_nogil([&] { return bp_dequantize(t, data, dst, n); });
      return out;
    }
    shape.back() = static_cast<py::ssize_t>(bp_type_row_size(t, shape.back()));
  }
  py::array out(dtype_of(t), shape);
  std::memcpy(out.mutable_data(), data, size);
  if (deq && t != BP_TYPE_F32) return py::array(out.attr("astype")(py::dtype::of<float>()));
  return out;
}

py::dict load(const File &file, const py::object &device, const py::object &filter, const std::string &mode) {
  bp_gguf *f = file.get();
  BackendP keep;
  bp_device *dev = device_from(device, &keep);
  bp_gguf_load_options opts{};
  opts.struct_size = sizeof opts;
  opts.mode = mode == "map" ? BP_GGUF_LOAD_MAP : mode == "copy" ? BP_GGUF_LOAD_COPY : BP_GGUF_LOAD_AUTO;
  if (mode != "auto" && mode != "map" && mode != "copy")
    fail(BP_ERR_INVALID_ARGUMENT, "mode must be 'auto', 'map' or 'copy', not '" + mode + "'");
  std::string pat = filter.is_none() ? "" : filter.cast<std::string>();
  opts.name_filter = pat.c_str();
  CtxP c = current_ctx();
  auto w = std::make_shared<WeightsH>();
  call_nogil([&] { return bp_gguf_load(f, c->ctx, dev, &opts, &w->w); });
  c->add_keep(w);
  py::dict out;
  for (size_t i = 0; i < bp_gguf_tensor_count(f); ++i) {
    bp_gguf_tensor_info info = info_of(f, i);
    bp_tensor *t = nullptr;
    if (bp_context_find_tensor(c->ctx, info.name, &t) != BP_OK) continue;  // left out by the name filter
    if (t && t->data) out[py::str(info.name)] = Tensor{c, t, static_cast<int>(info.n_dims)};
  }
  return out;
}

bp_gguf_kind parse_kind(const std::string &k) {
  for (int i = 0; i <= BP_GGUF_F64; ++i)
    if (k == bp_gguf_kind_name(static_cast<bp_gguf_kind>(i))) return static_cast<bp_gguf_kind>(i);
  fail(BP_ERR_INVALID_ARGUMENT, "unknown gguf kind '" + k + "' (u8 i8 u16 i16 u32 i32 f32 bool string u64 i64 f64)");
}

const char *np_kind(bp_gguf_kind k) {
  switch (k) {
    case BP_GGUF_U8:
      return "uint8";
    case BP_GGUF_I8:
      return "int8";
    case BP_GGUF_U16:
      return "uint16";
    case BP_GGUF_I16:
      return "int16";
    case BP_GGUF_U32:
      return "uint32";
    case BP_GGUF_I32:
      return "int32";
    case BP_GGUF_F32:
      return "float32";
    case BP_GGUF_BOOL:
      return "uint8";
    case BP_GGUF_U64:
      return "uint64";
    case BP_GGUF_I64:
      return "int64";
    case BP_GGUF_F64:
      return "float64";
    default:
      return nullptr;
  }
}

bp_gguf_kind guess_kind(const py::handle &v) {
  if (py::isinstance<py::bool_>(v)) return BP_GGUF_BOOL;
  if (py::isinstance<py::int_>(v)) return BP_GGUF_I64;
  if (py::isinstance<py::float_>(v)) return BP_GGUF_F32;
  if (py::isinstance<py::str>(v) || py::isinstance<py::bytes>(v)) return BP_GGUF_STRING;
  fail(BP_ERR_INVALID_ARGUMENT,
       "cannot store a " + py::str(py::type::of(v)).cast<std::string>() + " in gguf metadata: pass kind=");
}

std::string string_bytes(const py::handle &v) {
  if (py::isinstance<py::bytes>(v)) return v.cast<std::string>();
  return py::str(v).cast<std::string>();
}

void add_value(const Writer &wr, const std::string &key, const py::object &v, const py::object &kind_arg) {
  bp_gguf_writer *w = wr.get();
  bool is_array = py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v) || py::isinstance<py::array>(v);
  if (!is_array) {
    bp_gguf_kind k = kind_arg.is_none() ? guess_kind(v) : parse_kind(kind_arg.cast<std::string>());
    if (k == BP_GGUF_STRING) {
      std::string s = string_bytes(v);
      check(bp_gguf_writer_add_string(w, key.c_str(), s.data(), s.size()));
      return;
    }
    if (!np_kind(k)) fail(BP_ERR_INVALID_ARGUMENT, "kind '" + kind_arg.cast<std::string>() + "' is not a single value");
    py::array a = np().attr("array")(py::make_tuple(v), np_kind(k));
    check(bp_gguf_writer_add_value(w, key.c_str(), k, a.data()));
    return;
  }
  bp_gguf_kind k;
  if (!kind_arg.is_none()) {
    k = parse_kind(kind_arg.cast<std::string>());
  } else if (py::isinstance<py::array>(v)) {
    std::string dt = py::str(py::array(v).dtype()).cast<std::string>();
    k = static_cast<bp_gguf_kind>(-1);
    for (int i = 0; i <= BP_GGUF_F64; ++i) {
      const char *n = np_kind(static_cast<bp_gguf_kind>(i));
      if (n && dt == n && i != BP_GGUF_BOOL) k = static_cast<bp_gguf_kind>(i);
    }
    if (dt == "bool") k = BP_GGUF_BOOL;
    if (k == static_cast<bp_gguf_kind>(-1)) fail(BP_ERR_INVALID_ARGUMENT, "no gguf kind for NumPy dtype " + dt);
  } else {
    k = py::len(v) ? guess_kind(v[py::int_(0)]) : BP_GGUF_I32;
  }
  uint64_t n = py::len(v);
  if (k == BP_GGUF_STRING) {
    std::vector<std::string> ss;
    for (auto x : v) ss.push_back(string_bytes(x));
    std::vector<const char *> ptrs;
    for (auto &s : ss) ptrs.push_back(s.c_str());
    check(bp_gguf_writer_add_array(w, key.c_str(), k, ptrs.data(), n));
    return;
  }
  if (!np_kind(k)) fail(BP_ERR_INVALID_ARGUMENT, "an array of arrays cannot be stored");
  py::array a = np().attr("ascontiguousarray")(v, np_kind(k));
  check(bp_gguf_writer_add_array(w, key.c_str(), k, a.data(), n));
}

void add_tensor(const Writer &wr, const std::string &name, const py::object &data, const py::object &type_arg,
                const py::object &shape_arg, const py::object &file_type) {
  bp_gguf_writer *w = wr.get();
  if (py::isinstance<Tensor>(data)) {
    const Tensor &x = data.cast<const Tensor &>();
    if (name != x.t->name) bp_tensor_set_name(x.t, name.c_str());
    check(bp_gguf_writer_add_tensor(w, x.t));
    wr.h->hold.push_back(data);
    return;
  }
  std::vector<int64_t> shape, want;
  py::array a;
  uint32_t ft;
  if (!file_type.is_none()) {  // raw bytes of any type the format defines
    if (shape_arg.is_none()) fail(BP_ERR_INVALID_ARGUMENT, "file_type= needs shape=");
    shape = shape_arg.cast<std::vector<int64_t>>();
    a = np().attr("ascontiguousarray")(np().attr("frombuffer")(data, "uint8"));
    ft = file_type.cast<uint32_t>();
  } else {
    bp_type t = type_arg.is_none() ? BP_TYPE_COUNT : parse_type(type_arg);
    if (!shape_arg.is_none()) want = shape_arg.cast<std::vector<int64_t>>();
    a = host_bytes(data, t, shape_arg.is_none() ? nullptr : &want, &shape, true);
    ft = bp_gguf_file_type_of(t);
  }
  int64_t ne[BP_MAX_DIMS] = {1, 1, 1, 1};
  int n = static_cast<int>(shape.size());
  if (n > BP_MAX_DIMS) fail(BP_ERR_INVALID_ARGUMENT, "a gguf tensor has at most 4 dimensions");
  for (int i = 0; i < n; ++i) ne[i] = shape[n - 1 - i];
  check(bp_gguf_writer_add_tensor_data(w, name.c_str(), ft, n, ne, a.data(), static_cast<uint64_t>(a.nbytes())));
  wr.h->hold.push_back(a);
}

}  // namespace

void init_gguf(py::module_ &m) {
  py::class_<TensorInfo>(m, "TensorInfo", "A tensor of a GGUF file: name, NumPy-order shape, type, bytes.")
      .def_readonly("name", &TensorInfo::name)
      .def_readonly("shape", &TensorInfo::shape)
      .def_readonly("type", &TensorInfo::type)
      .def_readonly("file_type", &TensorInfo::file_type)
      .def_readonly("supported", &TensorInfo::supported)
      .def_readonly("offset", &TensorInfo::offset)
      .def_readonly("nbytes", &TensorInfo::nbytes)
      .def("__repr__", [](const TensorInfo &t) { return "TensorInfo('" + t.name + "', " + t.type + ")"; });

  py::class_<File>(m, "File", "An open GGUF file (bp_gguf); `with` or close() releases it.")
      .def_property_readonly("version", [](const File &f) { return bp_gguf_version(f.get()); })
      .def_property_readonly("alignment", [](const File &f) { return bp_gguf_alignment(f.get()); })
      .def_property_readonly("data_offset", [](const File &f) { return bp_gguf_data_offset(f.get()); })
      .def_property_readonly("file_size", [](const File &f) { return bp_gguf_file_size(f.get()); })
      .def_property_readonly("metadata",
                             [](const File &f) {
                               py::dict d;
                               for (size_t i = 0; i < bp_gguf_kv_count(f.get()); ++i)
                                 d[py::str(bp_gguf_kv_key(f.get(), i))] = value(f.get(), i);
                               return d;
                             })
      .def(
          "kind",
          [](const File &f, const std::string &key) {
            size_t i = 0;
            check(bp_gguf_find_key(f.get(), key.c_str(), &i));
            bp_gguf_value_info vi{};
            vi.struct_size = sizeof vi;
            check(bp_gguf_kv_describe(f.get(), i, &vi));
            return py::make_tuple(bp_gguf_kind_name(vi.kind), bp_gguf_kind_name(vi.elem_kind), vi.count);
          },
          py::arg("key"), "(kind, element kind, count) of a key.")
      .def_property_readonly("tensors",
                             [](const File &f) {
                               std::vector<TensorInfo> out;
                               for (size_t i = 0; i < bp_gguf_tensor_count(f.get()); ++i) {
                                 bp_gguf_tensor_info in = info_of(f.get(), i);
                                 TensorInfo t;
                                 t.name = in.name;
                                 // Backplane's name where it holds the type ("q4_K", as bp.TYPES and
                                 // Tensor.type say), the format's own otherwise ("q4_k" is gguf.h's).
                                 t.type = in.supported ? bp_type_name(in.type) : in.type_name;
                                 for (int d = static_cast<int>(in.n_dims) - 1; d >= 0; --d) t.shape.push_back(in.ne[d]);
                                 t.file_type = in.file_type;
                                 t.supported = in.supported;
                                 t.offset = in.offset;
                                 t.nbytes = in.nbytes;
                                 out.push_back(t);
                               }
                               return out;
                             })
      .def("tensor", &tensor_array, py::arg("name"), py::kw_only(), py::arg("dequantize") = false,
           "A copy of the tensor's data: f32/f16/i32 values, raw uint8 blocks for a quantized type, or float32 "
           "with dequantize=True.")
      .def("load", &load, py::arg("device") = "cpu", py::kw_only(), py::arg("filter") = py::none(),
           py::arg("mode") = "auto",
           "Creates the file's tensors in the current context with memory on |device| (bp_gguf_load): a dict "
           "name -> Tensor.")
      .def("close", [](File &f) { f.h.reset(); })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](File &f, py::args) { f.h.reset(); });

  m.def(
      "open",
      [](const std::string &path) {
        auto h = std::make_shared<FileH>();
        call_nogil([&] { return bp_gguf_open(path.c_str(), &h->f); });
        return File{h};
      },
      py::arg("path"), "Opens and checks a GGUF file (bp_gguf_open).");

  py::class_<Writer>(m, "Writer", "Builds a GGUF file (bp_gguf_writer_*): add metadata and tensors, then write().")
      .def(py::init([]() {
        auto h = std::make_shared<WriterH>();
        check(bp_gguf_writer_new(&h->w));
        return Writer{h};
      }))
      .def("set_alignment", [](const Writer &w, uint32_t a) { check(bp_gguf_writer_set_alignment(w.get(), a)); })
      .def("add", &add_value, py::arg("key"), py::arg("value"), py::arg("kind") = py::none(),
           "Adds a metadata value: bool, int (i64 unless kind=), float (f32 unless kind=), str or bytes, or a "
           "list / NumPy array of them.")
      .def("add_tensor", &add_tensor, py::arg("name"), py::arg("data"), py::arg("type") = py::none(), py::kw_only(),
           py::arg("shape") = py::none(), py::arg("file_type") = py::none(),
           "Adds a tensor from a NumPy array (converted or quantized to |type|), raw blocks, or a Tensor.")
      .def(
          "write",
          [](const Writer &w, const std::string &path) {
            bp_gguf_writer *p = w.get();
            call_nogil([&] { return bp_gguf_writer_write(p, path.c_str()); });
          },
          py::arg("path"))
      .def("close", [](Writer &w) { w.h.reset(); })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Writer &w, py::args) { w.h.reset(); });
}

}  // namespace bppy
