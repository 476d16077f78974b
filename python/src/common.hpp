// common.hpp: the handle holders of the Python module and the helpers every
// part of it shares. Each C handle lives in one holder owned by shared_ptr;
// Python objects hold the holders, so handles are freed by reference
// counting, in whatever order Python drops them, and a holder that another
// handle borrows from (a backend under a scheduler, a context under the
// tensors of another) is kept alive by the borrower.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backplane/backplane.h"

namespace py = pybind11;

namespace bppy {

// A failed C call: its status and bp_last_error() unchanged. Translated into
// the backplane.Error subclass of the status (errors.cpp).
struct Error {
  bp_status status;
  std::string message;
};

// Throws the status |st| with this thread's bp_last_error(); call right after
// the failing C call.
[[noreturn]] void throw_last(bp_status st);
// Throws bp_last_status() / bp_last_error() (for calls that return NULL).
[[noreturn]] void throw_last();
// Throws an error of the binding itself (a Python argument the C API cannot
// receive), with its own message.
[[noreturn]] void fail(bp_status st, const std::string &message);
inline void check(bp_status st) {
  if (st != BP_OK) throw_last(st);
}
template <typename T>
T *check_ptr(T *p) {
  if (!p) throw_last();
  return p;
}
// Runs |fn| (returning bp_status) with the GIL released and throws its
// failure, the message read before the GIL is taken back.
template <typename F>
void call_nogil(F &&fn) {
  bp_status st;
  std::string msg;
  {
    py::gil_scoped_release release;
    st = fn();
    if (st != BP_OK) msg = bp_last_error();
  }
  if (st != BP_OK) throw Error{st, msg};
}
void register_errors(py::module_ &m);

// Something whose memory tensors of a context use (a buffer, a scheduler's
// compute buffers, loaded weights): kept until the context is freed.
struct Keep {
  virtual ~Keep() = default;
};

struct BackendH {
  bp_backend *be = nullptr;
  std::mutex mu;  // one thread at a time per backend (plugin contract)
  explicit BackendH(bp_backend *b) : be(b) {}
  ~BackendH() { bp_backend_free(be); }
};
using BackendP = std::shared_ptr<BackendH>;

struct BufferH : Keep {
  bp_buffer *buf = nullptr;
  py::object host;  // the NumPy array a zero-copy buffer wraps
  ~BufferH() override {
    bp_buffer_free(buf);
    if (host) {
      py::gil_scoped_acquire gil;
      host = py::object();
    }
  }
};

struct SchedH : Keep {
  bp_sched *s = nullptr;
  std::vector<BackendP> backends;  // borrowed by the scheduler
  ~SchedH() override { bp_sched_free(s); }
};

// A bp_context and what its tensors need: memory owners, the contexts their
// sources live in, and the host data of leaves not yet given memory.
struct Ctx {
  bp_context *ctx = nullptr;
  std::vector<std::shared_ptr<Ctx>> deps;
  std::vector<std::shared_ptr<Keep>> keep;
  std::unordered_map<bp_tensor *, py::object> pending;
  ~Ctx() {
    if (!pending.empty()) {
      py::gil_scoped_acquire gil;
      pending.clear();
    }
    while (!keep.empty()) keep.pop_back();
    bp_context_free(ctx);
  }
  void add_dep(const std::shared_ptr<Ctx> &other);
  void add_keep(const std::shared_ptr<Keep> &k);
};
using CtxP = std::shared_ptr<Ctx>;

// The context new tensors go to: the innermost `with Context()` of this
// thread, else this thread's default context (alive while its tensors are).
CtxP current_ctx();
CtxP new_ctx(size_t max_tensors);
void push_ctx(const CtxP &c);
void pop_ctx(const CtxP &c);

// A tensor as Python sees it: the handle, its context and its NumPy rank
// (Backplane keeps 4 dims; NumPy's shape is ne reversed, cut to ndim).
struct Tensor {
  CtxP ctx;
  bp_tensor *t = nullptr;
  int ndim = 1;
};
// ndim at least |hint| and enough for every dim > 1.
int infer_ndim(const bp_tensor *t, int hint);
Tensor wrap(const CtxP &c, bp_tensor *t, int ndim_hint);

// Locks the striped mutex of a buffer around transfers (one thread at a time
// per buffer, the plugin contract).
std::mutex &buffer_lock(const void *buffer);

// Types by name ("f32", "q4_K") or NumPy dtype; NumPy dtype of a type (uint8
// blocks for the quantized ones).
bp_type parse_type(const py::handle &h);
// The one rule from a NumPy dtype to a type, for a dtype given as a type and
// for the dtype of data alike: float16 is f16, any other float f32, any
// integer i32 (data of another width is converted); bool, complex and the
// rest have none (INVALID_ARGUMENT naming the dtype).
bp_type type_of_dtype(const py::dtype &d);
py::dtype dtype_of(bp_type t);
// The numpy module (imported on first use; later calls find it in sys.modules).
py::module_ np();
std::string type_name(bp_type t);

// Backends from a spec string ("vulkan;cpu"), a Backend, or a list of them.
std::vector<BackendP> backends_from(const py::handle &h);
BackendP backend_from(const py::handle &h);
bp_device *device_from(const py::handle &h, BackendP *keep);

// Sub-registrations, one per source file.
void init_devices(py::module_ &m);
void init_tensor(py::module_ &m);
void init_ops(py::module_ &m);
void init_graph(py::module_ &m);
void init_quant(py::module_ &m);
void init_gguf(py::module_ &m);
void init_model(py::module_ &m);

}  // namespace bppy
