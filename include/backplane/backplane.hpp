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
// Returns |p|, or throws bp::error when it is NULL. When the last Backplane
// call on this thread failed, the NULL is taken to be its result and the
// error carries that call's status and message (e.g. RESOURCE_EXHAUSTED for
// a full context). When it succeeded, the NULL came from somewhere else (a
// lookup that found nothing, a pointer never set): INVALID_ARGUMENT naming
// |what|, the caller's description of the value, and no earlier failure.
template <typename T>
T *check(T *p, const char *what = "pointer") {
  if (!p) {
    const bp_status st = bp_last_status();
    if (st != BP_OK) throw error(st, bp_last_error());
    throw error(BP_ERR_INVALID_ARGUMENT, std::string("bp::check: the ") + (what ? what : "pointer") +
                                             " is NULL, and the last Backplane call on this thread succeeded, so "
                                             "the NULL did not come from it: check where the value was made");
  }
  return p;
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
  explicit context(size_t max_tensors = 0) : handle(check(bp_context_new(max_tensors))) {}
  bp_tensor *tensor_1d(bp_type t, int64_t n0) { return check(bp_tensor_new_1d(p_, t, n0)); }
  bp_tensor *tensor_2d(bp_type t, int64_t n0, int64_t n1) { return check(bp_tensor_new_2d(p_, t, n0, n1)); }
  bp_tensor *tensor_3d(bp_type t, int64_t n0, int64_t n1, int64_t n2) {
    return check(bp_tensor_new_3d(p_, t, n0, n1, n2));
  }
  bp_tensor *tensor_4d(bp_type t, int64_t n0, int64_t n1, int64_t n2, int64_t n3) {
    return check(bp_tensor_new_4d(p_, t, n0, n1, n2, n3));
  }
};

class graph : public handle<bp_graph, bp_graph_free> {
 public:
  explicit graph(context &ctx, size_t max_nodes = 0) : handle(check(bp_graph_new(ctx.get(), max_nodes))) {}
  graph(context &ctx, bp_tensor *output, size_t max_nodes = 0) : graph(ctx, max_nodes) { build(output); }
  void build(bp_tensor *output) { check(bp_graph_build(p_, check(output, "output tensor passed to bp::graph"))); }
  size_t n_nodes() const { return bp_graph_node_count(p_); }
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
  explicit backend(const std::string &spec) { check(bp_backend_new(spec.c_str(), &p_)); }
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
  check(bp_backend_new_list(list.c_str(), raw.data(), raw.size(), &n));
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
  explicit gallocr(bp_buffer_type *buft) : handle(check(bp_gallocr_new(buft))) {}
  void reserve(const graph &g) { check(bp_gallocr_reserve(p_, g.get())); }
  void alloc_graph(const graph &g) { check(bp_gallocr_alloc_graph(p_, g.get())); }
  size_t buffer_size() const { return bp_gallocr_buffer_size(p_); }
};

// The scheduler over backends in priority order, the last one the fallback
// that runs every op (e.g. bp::backends("vulkan;cpu")). Borrows them: they
// must outlive the scheduler.
class sched : public handle<bp_sched, bp_sched_free> {
 public:
  sched(std::vector<backend> &backends, size_t graph_size = 4096, bool parallel = false)
      : sched(raw(backends), graph_size, parallel) {}
  sched(std::vector<bp_backend *> backends, size_t graph_size = 4096, bool parallel = false)
      : handle(check(bp_sched_new(backends.data(), nullptr, backends.size(), graph_size, parallel))) {}
  void reserve(graph &g) { check(bp_sched_reserve(p_, g.get())); }
  // Assigns, splits and allocates |g|: after it, inputs may be set.
  void alloc_graph(graph &g) { check(bp_sched_alloc_graph(p_, g.get())); }
  void compute(graph &g) { check(bp_sched_graph_compute(p_, g.get())); }
  void compute_async(graph &g) { check(bp_sched_graph_compute_async(p_, g.get())); }
  void synchronize() { check(bp_sched_synchronize(p_)); }
  void reset() { bp_sched_reset(p_); }
  void set_tensor_backend(bp_tensor *node, backend &be) { check(bp_sched_set_tensor_backend(p_, node, be.get())); }
  // The backend |node| runs on (borrowed), or nullptr when not assigned.
  bp_backend *tensor_backend(const bp_tensor *node) const { return bp_sched_get_tensor_backend(p_, node); }
  void set_eval_callback(bp_sched_eval_callback cb, void *user_data) { bp_sched_set_eval_callback(p_, cb, user_data); }
  void set_graph_plans(bool enable) { check(bp_sched_set_graph_plans(p_, enable)); }
  size_t n_backends() const { return bp_sched_backend_count(p_); }
  size_t n_splits() const { return bp_sched_split_count(p_); }
  size_t n_copies() const { return bp_sched_copy_count(p_); }
  size_t buffer_size(backend &be) const { return bp_sched_buffer_size(p_, be.get()); }
  bp_sched_split_info split(size_t i) const {
    bp_sched_split_info info{};
    info.struct_size = sizeof info;
    check(bp_sched_split_describe(p_, i, &info));
    return info;
  }

 private:
  static std::vector<bp_backend *> raw(std::vector<backend> &backends) {
    std::vector<bp_backend *> out;
    out.reserve(backends.size());
    for (backend &be : backends) out.push_back(be.get());
    return out;
  }
};

inline buffer alloc_ctx_tensors(context &ctx, backend &be) {
  bp_buffer *b = nullptr;
  check(bp_context_alloc_tensors(ctx.get(), be.get(), &b));
  return buffer(b);
}

// Copies a whole tensor from / to a host vector. set() throws
// INVALID_ARGUMENT unless the vector holds exactly bp_tensor_nbytes(t) bytes.
template <typename T>
void set(bp_tensor *t, const std::vector<T> &values) {
  check(t, "tensor passed to bp::set");
  const size_t want = bp_tensor_nbytes(t), got = values.size() * sizeof(T);
  if (got != want)
    throw error(BP_ERR_INVALID_ARGUMENT, "bp::set: tensor '" + std::string(t->name) + "' holds " +
                                             std::to_string(want) + " bytes but the vector holds " +
                                             std::to_string(got) + ": pass a vector of exactly the tensor's size");
  check(bp_tensor_set(t, values.data(), 0, got));
}
template <typename T>
std::vector<T> get(const bp_tensor *t) {
  check(t, "tensor passed to bp::get");
  std::vector<T> out(bp_tensor_nbytes(t) / sizeof(T));
  check(bp_tensor_get(t, out.data(), 0, out.size() * sizeof(T)));
  return out;
}

}  // namespace bp

#endif  // BACKPLANE_BACKPLANE_HPP_
