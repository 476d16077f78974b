// module.cpp: the extension module _backplane (imported by backplane/__init__.py):
// contexts, the shared helpers, and the registration of every part.
#include <algorithm>
#include <cstring>

#include "backplane/version.h"
#include "common.hpp"

namespace bppy {
namespace {

thread_local std::vector<CtxP> t_stack;
thread_local std::weak_ptr<Ctx> t_default;
std::mutex g_buffer_locks[64];

}  // namespace

void Ctx::add_dep(const CtxP &other) {
  if (!other || other.get() == this) return;
  for (const auto &d : deps)
    if (d == other) return;
  deps.push_back(other);
}

void Ctx::add_keep(const std::shared_ptr<Keep> &k) {
  for (const auto &x : keep)
    if (x == k) return;
  keep.push_back(k);
}

CtxP new_ctx(size_t max_tensors) {
  auto c = std::make_shared<Ctx>();
  c->ctx = check_ptr(bp_context_new(max_tensors));
  return c;
}

CtxP current_ctx() {
  if (!t_stack.empty()) return t_stack.back();
  CtxP c = t_default.lock();
  if (!c) {
    c = new_ctx(0);
    t_default = c;
  }
  return c;
}

void push_ctx(const CtxP &c) { t_stack.push_back(c); }
void pop_ctx(const CtxP &c) {
  auto it = std::find(t_stack.rbegin(), t_stack.rend(), c);
  if (it != t_stack.rend()) t_stack.erase(std::next(it).base());
}

int infer_ndim(const bp_tensor *t, int hint) {
  int n = std::max(1, std::min(hint, BP_MAX_DIMS));
  for (int i = BP_MAX_DIMS - 1; i >= n; --i)
    if (t->ne[i] != 1) return i + 1;
  return n;
}

Tensor wrap(const CtxP &c, bp_tensor *t, int ndim_hint) { return Tensor{c, check_ptr(t), infer_ndim(t, ndim_hint)}; }

std::mutex &buffer_lock(const void *buffer) { return g_buffer_locks[(reinterpret_cast<uintptr_t>(buffer) >> 4) % 64]; }

std::string type_name(bp_type t) { return bp_type_name(t); }

bp_type parse_type(const py::handle &h) {
  if (py::isinstance<py::str>(h)) {
    std::string s = h.cast<std::string>();
    for (int i = 0; i < BP_TYPE_COUNT; ++i) {
      std::string n = bp_type_name(static_cast<bp_type>(i));
      if (n == s || (s.size() == n.size() && std::equal(s.begin(), s.end(), n.begin(), [](char a, char b) {
                       return std::tolower(a) == std::tolower(b);
                     })))
        return static_cast<bp_type>(i);
    }
    std::string all;
    for (int i = 0; i < BP_TYPE_COUNT; ++i) all += std::string(i ? ", " : "") + bp_type_name(static_cast<bp_type>(i));
    fail(BP_ERR_INVALID_ARGUMENT, "unknown type '" + s + "': one of " + all);
  }
  return type_of_dtype(py::dtype::from_args(py::reinterpret_borrow<py::object>(h)));
}

bp_type type_of_dtype(const py::dtype &d) {
  const char kind = d.kind();
  if (kind == 'f') return d.itemsize() == 2 ? BP_TYPE_F16 : BP_TYPE_F32;
  if (kind == 'i' || kind == 'u') return BP_TYPE_I32;
  fail(BP_ERR_INVALID_ARGUMENT, "no Backplane type for NumPy dtype " + py::str(py::handle(d)).cast<std::string>() +
                                    ": use a float or integer dtype, or a type name (f32, f16, i32, q8_0, ...)");
}

py::module_ np() { return py::module_::import("numpy"); }

py::dtype dtype_of(bp_type t) {
  switch (t) {
    case BP_TYPE_F32:
      return py::dtype::of<float>();
    case BP_TYPE_F16:
      return py::dtype("float16");
    case BP_TYPE_I32:
      return py::dtype::of<int32_t>();
    default:
      return py::dtype::of<uint8_t>();
  }
}

}  // namespace bppy

using namespace bppy;

namespace {

struct Context {
  CtxP c;
};

}  // namespace

PYBIND11_MODULE(_backplane, m) {
  m.doc() = "Backplane's C API for Python (see docs/python.md); import it as `backplane`.";
  register_errors(m);
  m.attr("__version__") = bp_version_string();
  m.def("version", &bp_version_string, "The version of the libbackplane.so in use, e.g. '0.2.0'.");
  m.attr("BINDING_VERSION") = BP_VERSION_STRING;

  py::class_<Context>(m, "Context",
                      "Holds tensors (a bp_context). `with Context():` makes it the place new tensors go on this "
                      "thread; it is freed when neither it nor any of its tensors is referenced.")
      .def(py::init([](size_t max_tensors) { return Context{new_ctx(max_tensors)}; }), py::arg("max_tensors") = 0)
      .def("__enter__",
           [](py::object self) {
             push_ctx(self.cast<Context &>().c);
             return self;
           })
      .def("__exit__", [](Context &self, py::args) { pop_ctx(self.c); })
      .def_property_readonly("tensor_count", [](const Context &self) { return bp_context_tensor_count(self.c->ctx); })
      .def(
          "find",
          [](const Context &self, const std::string &name) -> py::object {
            bp_tensor *t = nullptr;
            if (bp_context_find_tensor(self.c->ctx, name.c_str(), &t) == BP_ERR_NOT_FOUND) return py::none();
            check_ptr(t);
            return py::cast(wrap(self.c, t, 1));
          },
          py::arg("name"), "The first tensor named |name|, or None.")
      .def_property_readonly("tensors", [](const Context &self) {
        std::vector<Tensor> out;
        for (size_t i = 0; i < bp_context_tensor_count(self.c->ctx); ++i)
          out.push_back(wrap(self.c, bp_context_tensor(self.c->ctx, i), 1));
        return out;
      });
  m.def(
      "current_context", []() { return Context{current_ctx()}; }, "The context new tensors go to on this thread.");

  init_devices(m);
  init_tensor(m);
  init_ops(m);
  init_graph(m);
  init_quant(m);
  init_model(m);
  py::module_ g = m.def_submodule("gguf", "GGUF files: reading, loading and writing.");
  init_gguf(g);
}
