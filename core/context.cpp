// context.cpp: tensor contexts and leaf tensors (bp_context_*, bp_tensor_new*,
// bp_tensor_set_name, bp_tensor_set_flags) plus the tensor helpers of tensor_util.hpp.
//
// A context only holds tensor metadata; memory comes from buffers. Tensors
// live in a deque so their addresses never move while the context grows.
#include <cstdio>
#include <cstring>
#include <new>

#include "core/tensor_util.hpp"

namespace bp::core {

bp_status check_type_and_dims(const bp_type &type, const int64_t ne[BP_MAX_DIMS], const char *fn) {
  const int type_value = enum_value(type);
  if (type_value < 0 || type_value >= BP_TYPE_COUNT) {
    return set_errorf(
        BP_ERR_INVALID_ARGUMENT,
        "%s: unknown type %d: use a BP_TYPE_* value below BP_TYPE_COUNT (f32, f16, i32, q8_0, q4_0, q5_0, q4_K, q6_K, "
        "q5_K, bf16, q4_1, q5_1, q2_K, q3_K, iq4_nl, iq4_xs, mxfp4)",
        fn, type_value);
  }
  // Every dim must hold at least one element: empty tensors would force every
  // op and backend to special-case them, and no supported op needs one.
  int64_t elements = 1;
  for (int i = 0; i < BP_MAX_DIMS; ++i) {
    if (ne[i] < 1) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: ne[%d] = %lld in %s: every dimension must be >= 1", fn, i,
                        (long long)ne[i], shape_str(ne).c_str());
    }
    if (__builtin_mul_overflow(elements, ne[i], &elements)) elements = INT64_MAX;
  }
  // A quantized row is stored as whole blocks: a partial block has no layout.
  const int64_t blck = bp_type_block_size(type);
  if (ne[0] % blck != 0) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT,
                      "%s: %s rows hold whole blocks of %lld values; ne[0] = %lld is not a multiple of %lld (pad the "
                      "rows or use f32/f16)",
                      fn, bp_type_name(type), (long long)blck, (long long)ne[0], (long long)blck);
  }
  // Keep the byte count (and any byte offset inside it) representable as a
  // signed 64-bit value so stride arithmetic never wraps.
  if (elements > INT64_MAX / 8) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: shape %s has too many elements: the byte size overflows", fn,
                      shape_str(ne).c_str());
  }
  return BP_OK;
}

bp_tensor *tensor_create(bp_context *ctx, const bp_type &type, const int64_t ne[BP_MAX_DIMS], const char *fn) {
  if (!context_usable(ctx, fn)) return nullptr;  // every tensor is made here: one check covers all
  if (check_type_and_dims(type, ne, fn) != BP_OK) return nullptr;
  if (ctx->max_tensors != 0 && ctx->tensors.size() >= ctx->max_tensors) {
    set_errorf(BP_ERR_RESOURCE_EXHAUSTED,
               "%s: the context is full (max_tensors = %zu): create it with a larger max_tensors or 0 for no cap", fn,
               ctx->max_tensors);
    return nullptr;
  }
  bp_tensor &t = ctx->tensors.emplace_back();
  std::memset(&t, 0, sizeof t);
  t.struct_size = sizeof(bp_tensor);
  t.type = type;
  t.op = BP_OP_NONE;
  // nb[0] is one element or one block; nb[1] one row of whole blocks.
  t.ne[0] = ne[0];
  t.nb[0] = bp_type_size(type);
  size_t stride = bp_type_row_size(type, ne[0]);
  for (int i = 1; i < BP_MAX_DIMS; ++i) {
    t.ne[i] = ne[i];
    t.nb[i] = stride;
    stride *= (size_t)ne[i];
  }
  return &t;
}

void alias_view_memory(bp_tensor *t) {
  const bp_tensor *src = t->view_src;
  if (src == nullptr || src->data == nullptr) return;
  t->data = static_cast<char *>(src->data) + t->view_offs;
  t->buffer = src->buffer;
  t->buffer_ctx = src->buffer_ctx;
}

std::string shape_str(const int64_t ne[BP_MAX_DIMS]) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "[%lld,%lld,%lld,%lld]", (long long)ne[0], (long long)ne[1], (long long)ne[2],
                (long long)ne[3]);
  return buf;
}

std::string shape_str(const bp_tensor *t) { return shape_str(t->ne); }

std::string describe(const bp_tensor *t) {
  std::string s;
  if (t->name[0] != '\0') s = "'" + std::string(t->name, strnlen(t->name, BP_MAX_NAME)) + "' ";
  return s + shape_str(t) + " " + bp_type_name(t->type);
}

namespace {
// The context of the graph-building call running on this thread.
thread_local const bp_context *t_build_ctx = nullptr;

bool context_live(const bp_context *ctx) { return ctx != nullptr && ctx->live.live() && ctx->tag == TAG_CONTEXT; }
}  // namespace

build_scope::build_scope(bp_context *ctx) noexcept : ctx_(ctx), saved_(t_build_ctx) {
  if (t_build_ctx == nullptr) t_build_ctx = ctx;
}

build_scope::~build_scope() { t_build_ctx = saved_; }

bp_tensor *build_scope::result(bp_tensor *t) noexcept {
  if (t == nullptr && last_status() != BP_OK && context_live(ctx_) &&
      (ctx_->build_status == BP_OK || ctx_->build_epoch != clear_epoch())) {
    try {
      ctx_->build_message = bp_last_error();
      ctx_->build_status = last_status();
      ctx_->build_epoch = clear_epoch();
    } catch (...) {
    }
  }
  return t;
}

bp_tensor *null_input_in(const bp_context *ctx, const char *fn, const char *what) {
  // A NULL from a failed builder: report that failure, not "is NULL", so a
  // caller may check once at the end of a chain (docs/errors.md).
  if (restore_previous_failure()) return nullptr;
  if (context_live(ctx) && ctx->build_status != BP_OK && ctx->build_epoch == clear_epoch()) {
    set_error(ctx->build_status, ctx->build_message);
    return nullptr;
  }
  set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
  return nullptr;
}

bp_tensor *null_input(const char *fn, const char *what) { return null_input_in(t_build_ctx, fn, what); }

bool context_usable(const bp_context *ctx, const char *fn) {
  if (ctx == nullptr) {
    null_input(fn, "ctx");
    return false;
  }
  if (ctx->tag != TAG_CONTEXT) {
    bad_handle(fn, "ctx", ctx, TAG_CONTEXT);
    return false;
  }
  return true;
}

}  // namespace bp::core

using bp::core::api_guard_ptr;
using bp::core::handle_ok;
using bp::core::TAG_CONTEXT;
using bp::core::TAG_DEAD;

extern "C" {

BP_API bp_context *bp_context_new(size_t max_tensors) {
  BP_API_SCOPE();
  auto *ctx = new (std::nothrow) bp_context();
  if (ctx == nullptr) {
    bp::core::set_error(BP_ERR_OUT_OF_HOST_MEMORY, "bp_context_new: out of host memory");
    return nullptr;
  }
  ctx->max_tensors = max_tensors;
  return ctx;
}

BP_API void bp_context_free(bp_context *ctx) {
  BP_API_SCOPE();
  if (ctx == nullptr) return;
  if (!bp::core::free_check(ctx, TAG_CONTEXT, "bp_context_free", "ctx")) return;
  bp::core::retire_handle(ctx);
}

BP_API size_t bp_context_tensor_count(const bp_context *ctx) {
  BP_API_SCOPE();
  if (!handle_ok(ctx, TAG_CONTEXT))
    return (void)bp::core::bad_handle("bp_context_tensor_count", "ctx", ctx, TAG_CONTEXT), 0;
  return ctx->tensors.size();
}

BP_API bp_tensor *bp_context_tensor(const bp_context *ctx, size_t i) {
  BP_API_SCOPE();
  if (!handle_ok(ctx, TAG_CONTEXT)) {
    bp::core::bad_handle("bp_context_tensor", "ctx", ctx, TAG_CONTEXT);
    return nullptr;
  }
  if (i >= ctx->tensors.size()) return nullptr;  // the end of an iteration, not an error
  return const_cast<bp_tensor *>(&ctx->tensors[i]);
}

BP_API bp_status bp_context_find_tensor(const bp_context *ctx, const char *name, bp_tensor **out) {
  BP_API_SCOPE();
  if (out) *out = nullptr;
  if (!handle_ok(ctx, TAG_CONTEXT)) return bp::core::bad_handle("bp_context_find_tensor", "ctx", ctx, TAG_CONTEXT);
  if (name == nullptr || out == nullptr)
    return bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_context_find_tensor: %s is NULL", name ? "out" : "name");
  for (const bp_tensor &t : ctx->tensors) {
    if (std::strncmp(t.name, name, BP_MAX_NAME) == 0) {
      *out = const_cast<bp_tensor *>(&t);
      return BP_OK;
    }
  }
  return bp::core::set_errorf(BP_ERR_NOT_FOUND, "bp_context_find_tensor: the context has no tensor named '%.64s'",
                              name);
}

}  // extern "C"

namespace bp::core {
// |type| by reference: it is only read as an int until validated.
bp_tensor *new_tensor(bp_context *ctx, const bp_type &type, int n_dims, const int64_t *ne) {
  return build_guard(ctx, [&]() -> bp_tensor * {
    if (!context_usable(ctx, "bp_tensor_new")) return nullptr;
    if (n_dims < 1 || n_dims > BP_MAX_DIMS) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "bp_tensor_new: n_dims = %d: it must be 1..%d", n_dims, BP_MAX_DIMS);
      return nullptr;
    }
    if (ne == nullptr) {
      set_error(BP_ERR_INVALID_ARGUMENT, "bp_tensor_new: ne is NULL: pass n_dims sizes");
      return nullptr;
    }
    int64_t full[BP_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; ++i) full[i] = ne[i];
    return tensor_create(ctx, type, full, "bp_tensor_new");
  });
}
}  // namespace bp::core

extern "C" {

BP_API bp_tensor *bp_tensor_new(bp_context *ctx, bp_type type, int n_dims, const int64_t *ne) {
  BP_API_SCOPE();
  return bp::core::new_tensor(ctx, type, n_dims, ne);
}

BP_API bp_tensor *bp_tensor_new_1d(bp_context *ctx, bp_type type, int64_t ne0) {
  BP_API_SCOPE();
  const int64_t ne[1] = {ne0};
  return bp::core::new_tensor(ctx, type, 1, ne);
}

BP_API bp_tensor *bp_tensor_new_2d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1) {
  BP_API_SCOPE();
  const int64_t ne[2] = {ne0, ne1};
  return bp::core::new_tensor(ctx, type, 2, ne);
}

BP_API bp_tensor *bp_tensor_new_3d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
  BP_API_SCOPE();
  const int64_t ne[3] = {ne0, ne1, ne2};
  return bp::core::new_tensor(ctx, type, 3, ne);
}

BP_API bp_tensor *bp_tensor_new_4d(bp_context *ctx, bp_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  BP_API_SCOPE();
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  return bp::core::new_tensor(ctx, type, 4, ne);
}

BP_API bp_tensor *bp_tensor_set_name(bp_tensor *t, const char *name) {
  BP_API_SCOPE();
  if (t == nullptr) return bp::core::null_input("bp_tensor_set_name", "t");
  if (name == nullptr) name = "";  // documented: clears the name
  std::snprintf(t->name, BP_MAX_NAME, "%s", name);
  return t;
}

BP_API bp_tensor *bp_tensor_set_flags(bp_tensor *t, uint32_t flags) {
  BP_API_SCOPE();
  if (t == nullptr) return bp::core::null_input("bp_tensor_set_flags", "t");
  t->flags |= flags;
  return t;
}

}  // extern "C"
