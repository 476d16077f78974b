// tensor_util.hpp: helpers shared by the core's tensor, view, op and graph
// files (core/context.cpp, views.cpp, ops_*.cpp, graph.cpp). Not installed.
//
// What it is: creating a tensor inside a context, aliasing a view's memory,
// formatting shapes for error messages, and the NULL-input rule of the
// graph-building calls. What it is not: the op table (ops_internal.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "backplane/backplane.h"
#include "core/enum_value.hpp"
#include "core/errors.hpp"
#include "core/handles.hpp"

namespace bp::core {

// New tensor in |ctx| with |type|, |ne| (all four dims) and contiguous
// strides, op NONE, no memory. Returns nullptr with the error set (naming
// |fn|) on a bad type, a dim < 1, a byte size that overflows, or the
// context's max_tensors cap (RESOURCE_EXHAUSTED). Borrowed; lives with ctx.
bp_tensor *tensor_create(bp_context *ctx, const bp_type &type, const int64_t ne[BP_MAX_DIMS], const char *fn);

// bp_tensor_new's body: |n_dims| sizes from |ne|, the rest 1. |type| is
// taken by reference and read as an int until checked, so the 0.2 entry
// points and the 0.1 forwarders (core/deprecated.cpp) share it without ever
// loading an out-of-range value as the enum. Borrowed; lives with ctx.
bp_tensor *new_tensor(bp_context *ctx, const bp_type &type, int n_dims, const int64_t *ne);

// Checks |type|, each ne >= 1 and that the byte size fits; sets the error
// naming |fn| otherwise.
bp_status check_type_and_dims(const bp_type &type, const int64_t ne[BP_MAX_DIMS], const char *fn);

// Points |t| at the memory of t->view_src (at t->view_offs) when the view
// source already has memory; leaves it alone otherwise (the buffer code
// places views later).
void alias_view_memory(bp_tensor *t);

// Checks that a view of |type| with |ne| and byte strides |nb| at byte
// |offset| from the start of |a| lies inside |a| (bp_tensor_nbytes), with
// strides and offset that are non-zero multiples of the element size (the
// offset may be 0). Sets the error naming |fn| otherwise.
bp_status check_view_inside(const char *fn, bp_type type, const int64_t ne[BP_MAX_DIMS], const size_t nb[BP_MAX_DIMS],
                            size_t offset, const bp_tensor *a);

// "[64,32,1,1]" for error messages.
std::string shape_str(const bp_tensor *t);
std::string shape_str(const int64_t ne[BP_MAX_DIMS]);
// "'name' [64,32,1,1] f32" (name part only when the tensor has one).
std::string describe(const bp_tensor *t);

// The NULL-input rule of the graph-building calls (docs/errors.md): a NULL
// tensor or context is usually the result of a call that failed, so that
// failure becomes this call's status and message: the previous call on this
// thread if it failed, else the first graph-building failure recorded in the
// context being built on. Otherwise records INVALID_ARGUMENT naming |fn| and
// |what|. Returns nullptr so callers can `return null_input(...)`.
bp_tensor *null_input(const char *fn, const char *what);
// The same for a call that knows its context some other way (bp_graph_build
// with the graph's context); |ctx| may be NULL or dead.
bp_tensor *null_input_in(const bp_context *ctx, const char *fn, const char *what);

// Makes |ctx| the context of the graph-building call running on this thread
// (for null_input) and records its first failure in the context.
class build_scope {
 public:
  explicit build_scope(bp_context *ctx) noexcept;
  ~build_scope();
  build_scope(const build_scope &) = delete;
  build_scope &operator=(const build_scope &) = delete;
  // Records the thread's failure in the context when |t| is NULL and the
  // context has none yet. Returns |t|.
  bp_tensor *result(bp_tensor *t) noexcept;

 private:
  bp_context *ctx_;
  const bp_context *saved_;
};

// api_guard_ptr for the builders: the API scope plus a build_scope on |ctx|.
template <typename Body>
bp_tensor *build_guard(bp_context *ctx, Body &&body) noexcept {
  build_scope scope(ctx);
  return scope.result(api_guard_ptr<bp_tensor>(std::forward<Body>(body)));
}

// The same rule for the context argument, plus the handle check: false
// (error recorded) when |ctx| is NULL or not a live context.
bool context_usable(const bp_context *ctx, const char *fn);

}  // namespace bp::core
