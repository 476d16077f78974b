// tensor_util.hpp: helpers shared by the core's tensor, view, op and graph
// files (core/context.cpp, views.cpp, ops_*.cpp, graph.cpp). Not installed.
//
// What it is: creating a tensor inside a context, aliasing a view's memory,
// formatting shapes for error messages, and the NULL-input rule of the
// graph-building calls. What it is not: the op table (ops_internal.hpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/internal.hpp"

namespace bp::core {

// The integer behind an enum a C caller passed, read without an enum load:
// C callers may pass any int, and loading an out-of-range value as a C++
// enum is undefined (UBSan's -fsanitize=enum flags it). Validate with this
// before using the value as the enum.
template <typename E>
int enum_value(const E &e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// New tensor in |ctx| with |type|, |ne| (all four dims) and contiguous
// strides, op NONE, no memory. Returns nullptr with the error set (naming
// |fn|) on a bad type, a dim < 1, a byte size that overflows, or the
// context's max_tensors cap (RESOURCE_EXHAUSTED). Borrowed; lives with ctx.
bp_tensor *tensor_create(bp_context *ctx, const bp_type &type, const int64_t ne[BP_MAX_DIMS], const char *fn);

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

// The NULL-input rule of the graph-building calls: a NULL argument usually
// means an earlier call failed and recorded why, so its message is kept. If
// no error is recorded yet, records one naming |fn| and |what|. Returns
// nullptr so callers can `return null_input(...)`.
bp_tensor *null_input(const char *fn, const char *what);

// The same rule for the context argument, plus the handle check: false
// (error recorded) when |ctx| is NULL or not a live context.
bool context_usable(const bp_context *ctx, const char *fn);

}  // namespace bp::core
