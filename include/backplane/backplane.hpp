// backplane.hpp: a thin, header-only C++ layer over backplane.h.
//
// RAII owners for the handles the caller owns (context, graph, backend,
// buffer, event, graph allocator, scheduler) and bp::error, thrown when a C
// call fails, carrying the bp_status and bp_last_error(). Nothing here adds
// behaviour: every call forwards to the C API, so the C documentation holds.
//
//   bp::context ctx;
//   bp_tensor *a = ctx.tensor_2d(BP_TYPE_F32, 4, 3), *b = ctx.tensor_2d(BP_TYPE_F32, 4, 2);
//   bp_tensor *c = bp::check(bp_mul_mat(ctx.get(), a, b));   // throws on NULL
//   bp::graph g(ctx, c);
//   bp::backend be("cpu:threads=2");
//   bp::buffer buf = bp::alloc_ctx_tensors(ctx, be);
//   bp::set(a, a_values); bp::set(b, b_values);
//   be.compute(g);
//   std::vector<float> out = bp::get<float>(c);
#ifndef BACKPLANE_BACKPLANE_HPP_
#define BACKPLANE_BACKPLANE_HPP_

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backplane/backplane.h"

namespace bp {

// A failed Backplane call: the status and the message bp_last_error() gave.
class error : public std::runtime_error {
 public:
  error(bp_status status, const std::string &message)
      : std::runtime_error(std::string(bp_status_name(status)) + ": " + message), status_(status) {}
  bp_status status() const noexcept { return status_; }

 private:
  bp_status status_;
};

// Throws bp::error unless |status| is BP_OK.
inline void check(bp_status status) {
  if (status != BP_OK) throw error(status, bp_last_error());
}
// Throws bp::error if a graph-building call returned NULL.
inline bp_tensor *check(bp_tensor *t) {
  if (!t) throw error(BP_ERR_INVALID_ARGUMENT, bp_last_error());
  return t;
}

// Move-only owner of a C handle released by |Free|.
template <typename T, void (*Free)(T *)>
class handle {
 public:
  handle() = default;
  explicit handle(T *p) noexcept : p_(p) {}
  handle(handle &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  handle &operator=(handle &&o) noexcept {
    if (this != &o) reset(std::exchange(o.p_, nullptr));
    return *this;
  }
  handle(const handle &) = delete;
  handle &operator=(const handle &) = delete;
  ~handle() { reset(); }
  T *get() const noexcept { return p_; }
  T *release() noexcept { return std::exchange(p_, nullptr); }
  void reset(T *p = nullptr) noexcept {
    if (p_) Free(p_);
    p_ = p;
  }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 protected:
  T *p_ = nullptr;
};

class context : public handle<bp_context, bp_context_free> {
 public:
  explicit context(size_t max_tensors = 0) : handle(bp_context_new(max_tensors)) {
    if (!p_) throw error(BP_ERR_OUT_OF_HOST_MEMORY, bp_last_error());
  }
  bp_tensor *tensor_1d(bp_type t, int64_t n0) { return check(bp_new_tensor_1d(p_, t, n0)); }
  bp_tensor *tensor_2d(bp_type t, int64_t n0, int64_t n1) { return check(bp_new_tensor_2d(p_, t, n0, n1)); }
  bp_tensor *tensor_3d(bp_type t, int64_t n0, int64_t n1, int64_t n2) {
    return check(bp_new_tensor_3d(p_, t, n0, n1, n2));
  }
  bp_tensor *tensor_4d(bp_type t, int64_t n0, int64_t n1, int64_t n2, int64_t n3) {
    return check(bp_new_tensor_4d(p_, t, n0, n1, n2, n3));
  }
};

class graph : public handle<bp_graph, bp_graph_free> {
 public:
  explicit graph(context &ctx, size_t max_nodes = 0) : handle(bp_graph_new(ctx.get(), max_nodes)) {
    if (!p_) throw error(BP_ERR_OUT_OF_HOST_MEMORY, bp_last_error());
  }
  graph(context &ctx, bp_tensor *output, size_t max_nodes = 0) : graph(ctx, max_nodes) { build(output); }
  void build(bp_tensor *output) { check(bp_graph_build(p_, check(output))); }
  size_t n_nodes() const { return bp_graph_n_nodes(p_); }
  bp_tensor *node(size_t i) const { return bp_graph_node(p_, i); }
};

class buffer : public handle<bp_buffer, bp_buffer_free> {
 public:
  using handle::handle;
  size_t size() const { return bp_buffer_size(p_); }
  void set_usage(bp_buffer_usage u) { bp_buffer_set_usage(p_, u); }
  void clear(uint8_t value) { check(bp_buffer_clear(p_, value)); }
};

class backend : public handle<bp_backend, bp_backend_free> {
 public:
  explicit backend(const std::string &spec) {
    check(bp_backend_init(spec.c_str(), &p_));
  }
  explicit backend(bp_backend *owned) : handle(owned) {}
  const char *name() const { return bp_backend_name(p_); }
  void compute(const graph &g) { check(bp_backend_graph_compute(p_, g.get())); }
  void synchronize() { check(bp_backend_synchronize(p_)); }
  buffer alloc_buffer(size_t size) {
    bp_buffer *b = nullptr;
    check(bp_backend_alloc_buffer(p_, size, &b));
    return buffer(b);
  }
};

// One backend per spec of a ';' list, in priority order.
inline std::vector<backend> backends(const std::string &list, size_t capacity = 16) {
  std::vector<bp_backend *> raw(capacity);
  size_t n = 0;
  check(bp_backends_init(list.c_str(), raw.data(), raw.size(), &n));
  std::vector<backend> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.emplace_back(raw[i]);
  return out;
}

class event : public handle<bp_event, bp_event_free> {
 public:
  explicit event(bp_device *dev) { check(bp_event_new(dev, &p_)); }
  void record(backend &be) { check(bp_event_record(p_, be.get())); }
  void synchronize() { check(bp_event_synchronize(p_)); }
};

class gallocr : public handle<bp_gallocr, bp_gallocr_free> {
 public:
  explicit gallocr(bp_buffer_type *buft) : handle(bp_gallocr_new(buft)) {
    if (!p_) throw error(BP_ERR_INVALID_ARGUMENT, bp_last_error());
  }
  void reserve(const graph &g) { check(bp_gallocr_reserve(p_, g.get())); }
  void alloc_graph(const graph &g) { check(bp_gallocr_alloc_graph(p_, g.get())); }
  size_t buffer_size() const { return bp_gallocr_get_buffer_size(p_); }
};

class sched : public handle<bp_sched, bp_sched_free> {
 public:
  sched(std::vector<bp_backend *> backends, size_t graph_size = 4096, bool parallel = false)
      : handle(bp_sched_new(backends.data(), nullptr, static_cast<int>(backends.size()), graph_size, parallel)) {
    if (!p_) throw error(BP_ERR_INVALID_ARGUMENT, bp_last_error());
  }
  void reserve(graph &g) { check(bp_sched_reserve(p_, g.get())); }
  void compute(graph &g) { check(bp_sched_graph_compute(p_, g.get())); }
  int n_splits() const { return bp_sched_get_n_splits(p_); }
  int n_copies() const { return bp_sched_get_n_copies(p_); }
};

inline buffer alloc_ctx_tensors(context &ctx, backend &be) {
  bp_buffer *b = nullptr;
  check(bp_alloc_ctx_tensors(ctx.get(), be.get(), &b));
  return buffer(b);
}

// Copies a whole tensor from / to a host vector (sizes must match exactly).
template <typename T>
void set(bp_tensor *t, const std::vector<T> &values) {
  check(bp_tensor_set(t, values.data(), 0, values.size() * sizeof(T)));
}
template <typename T>
std::vector<T> get(const bp_tensor *t) {
  std::vector<T> out(bp_tensor_nbytes(t) / sizeof(T));
  check(bp_tensor_get(t, out.data(), 0, out.size() * sizeof(T)));
  return out;
}

}  // namespace bp

#endif  // BACKPLANE_BACKPLANE_HPP_
