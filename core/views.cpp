// views.cpp: tensors that alias another tensor's memory: bp_view_1d..4d,
// bp_reshape*, bp_permute, bp_transpose.
//
// A view is a graph node (op VIEW/RESHAPE/PERMUTE/TRANSPOSE, src[0] = the
// tensor it was made from) whose memory is view_src at view_offs. view_src
// is always the tensor that owns the memory, never another view, so offsets
// accumulate. Backends skip these nodes (bp_op_is_view).
#include <cstdio>
#include <cstring>

#include "core/tensor_util.hpp"

namespace bp::core {

bp_status check_view_inside(const char *fn, bp_type type, const int64_t ne[BP_MAX_DIMS], const size_t nb[BP_MAX_DIMS],
                            size_t offset, const bp_tensor *a) {
  const size_t esize = bp_type_size(type);
  const int64_t blck = bp_type_block_size(type);
  if (blck > 1) {
    // A quantized view starts on a block, holds whole blocks per row, and
    // its rows are dense: a block cannot be split or strided.
    if (offset % esize != 0) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: offset %zu is not on a block boundary: %s stores blocks of %lld values in %zu bytes, so "
                        "the offset must be a multiple of %zu",
                        fn, offset, bp_type_name(type), (long long)blck, esize, esize);
    }
    if (nb[0] != esize) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: stride nb[0] = %zu: the blocks of a %s row must be dense (nb[0] = %zu, one block of %lld "
                        "values)",
                        fn, nb[0], bp_type_name(type), esize, (long long)blck);
    }
  } else if (offset % esize != 0) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: offset %zu is not a multiple of the %s element size %zu", fn,
                      offset, bp_type_name(type), esize);
  }
  for (int i = 0; i < BP_MAX_DIMS; ++i) {
    if (nb[i] == 0 || nb[i] % esize != 0) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: stride nb[%d] = %zu: strides must be non-zero multiples of the %s %s size %zu", fn, i,
                        nb[i], bp_type_name(type), blck > 1 ? "block" : "element", esize);
    }
  }
  // Span of the view from its first byte, computed without wrapping.
  bool overflow = false;
  size_t span = 0;
  if (blck > 1) {
    overflow |= __builtin_mul_overflow((size_t)(ne[0] / blck), nb[0], &span);
  } else {
    size_t step = 0;
    overflow |= __builtin_mul_overflow((size_t)(ne[0] - 1), nb[0], &step);
    overflow |= __builtin_add_overflow(esize, step, &span);
  }
  for (int i = 1; i < BP_MAX_DIMS; ++i) {
    size_t step = 0;
    overflow |= __builtin_mul_overflow((size_t)(ne[i] - 1), nb[i], &step);
    overflow |= __builtin_add_overflow(span, step, &span);
  }
  size_t end = 0;
  overflow |= __builtin_add_overflow(span, offset, &end);
  const size_t limit = bp_tensor_nbytes(a);
  if (overflow || end > limit) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT,
                      "%s: a view %s with strides [%zu,%zu,%zu,%zu] at offset %zu ends at byte %s, past the end of "
                      "its source %s (%zu bytes): shrink the view or its offset",
                      fn, shape_str(ne).c_str(), nb[0], nb[1], nb[2], nb[3], offset,
                      overflow ? "(overflow)" : std::to_string(end).c_str(), describe(a).c_str(), limit);
  }
  return BP_OK;
}

}  // namespace bp::core

namespace {

using bp::core::context_usable;
using bp::core::null_input;
using bp::core::set_errorf;

// Creates the view node: |ne| / |nb| at byte |offset| inside |a|. The caller
// has checked that it fits.
bp_tensor *make_view(bp_context *ctx, bp_tensor *a, bp_op op, const int64_t ne[BP_MAX_DIMS],
                     const size_t nb[BP_MAX_DIMS], size_t offset, const char *fn, const char *suffix) {
  bp_tensor *t = bp::core::tensor_create(ctx, a->type, ne, fn);
  if (t == nullptr) return nullptr;
  for (int i = 0; i < BP_MAX_DIMS; ++i) t->nb[i] = nb[i];
  t->op = op;
  t->src[0] = a;
  t->view_src = a->view_src ? a->view_src : a;
  t->view_offs = (a->view_src ? a->view_offs : 0) + offset;
  bp::core::alias_view_memory(t);
  if (a->name[0] != '\0') {
    // A name helps reading graphs; truncation is fine.
    char name[BP_MAX_NAME + 16];
    std::snprintf(name, sizeof name, "%.*s (%s)", BP_MAX_NAME - 1, a->name, suffix);
    bp_tensor_set_name(t, name);
  }
  return t;
}

// View with explicit strides (nb[0] is the element size).
bp_tensor *view_nd(bp_context *ctx, bp_tensor *a, const int64_t ne[BP_MAX_DIMS], const size_t nb_outer[3],
                   size_t offset, const char *fn) {
  if (!context_usable(ctx, fn)) return nullptr;
  if (a == nullptr) return null_input(fn, "a");
  if (bp::core::check_type_and_dims(a->type, ne, fn) != BP_OK) return nullptr;
  const size_t nb[BP_MAX_DIMS] = {bp_type_size(a->type), nb_outer[0], nb_outer[1], nb_outer[2]};
  if (bp::core::check_view_inside(fn, a->type, ne, nb, offset, a) != BP_OK) return nullptr;
  return make_view(ctx, a, BP_OP_VIEW, ne, nb, offset, fn, "view");
}

}  // namespace

using bp::core::api_guard_ptr;

extern "C" {

BP_API bp_tensor *bp_view_1d(bp_context *ctx, bp_tensor *a, int64_t ne0, size_t offset) {
  return bp::core::build_guard(ctx, [&] {
    const int64_t ne[4] = {ne0, 1, 1, 1};
    const size_t row = a ? bp_type_row_size(a->type, ne0 > 0 ? ne0 : 1) : 1;
    const size_t nb[3] = {row, row, row};
    return view_nd(ctx, a, ne, nb, offset, "bp_view_1d");
  });
}

BP_API bp_tensor *bp_view_2d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
  return bp::core::build_guard(ctx, [&] {
    const int64_t ne[4] = {ne0, ne1, 1, 1};
    const size_t nb2 = nb1 * (size_t)(ne1 > 0 ? ne1 : 1);
    const size_t nb[3] = {nb1, nb2, nb2};
    return view_nd(ctx, a, ne, nb, offset, "bp_view_2d");
  });
}

BP_API bp_tensor *bp_view_3d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                             size_t nb2, size_t offset) {
  return bp::core::build_guard(ctx, [&] {
    const int64_t ne[4] = {ne0, ne1, ne2, 1};
    const size_t nb3 = nb2 * (size_t)(ne2 > 0 ? ne2 : 1);
    const size_t nb[3] = {nb1, nb2, nb3};
    return view_nd(ctx, a, ne, nb, offset, "bp_view_3d");
  });
}

BP_API bp_tensor *bp_view_4d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                             size_t nb1, size_t nb2, size_t nb3, size_t offset) {
  return bp::core::build_guard(ctx, [&] {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const size_t nb[3] = {nb1, nb2, nb3};
    return view_nd(ctx, a, ne, nb, offset, "bp_view_4d");
  });
}

BP_API bp_tensor *bp_reshape(bp_context *ctx, bp_tensor *a, int n_dims, const int64_t *ne_in) {
  return bp::core::build_guard(ctx, [&]() -> bp_tensor * {
    const char *fn = "bp_reshape";
    if (!context_usable(ctx, fn)) return nullptr;
    if (a == nullptr) return null_input(fn, "a");
    if (n_dims < 1 || n_dims > BP_MAX_DIMS || ne_in == nullptr) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: n_dims = %d with ne %s: pass 1..%d sizes", fn, n_dims,
                 ne_in ? "set" : "NULL", BP_MAX_DIMS);
      return nullptr;
    }
    int64_t ne[BP_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; ++i) ne[i] = ne_in[i];
    if (bp::core::check_type_and_dims(a->type, ne, fn) != BP_OK) return nullptr;
    if (!bp_tensor_is_contiguous(a)) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s is not contiguous: reshape bp_cont(a) instead", fn,
                 bp::core::describe(a).c_str());
      return nullptr;
    }
    const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    if (n != bp_tensor_nelements(a)) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: %s has %lld elements but the new shape %s has %lld: they must match", fn,
                 bp::core::describe(a).c_str(), (long long)bp_tensor_nelements(a), bp::core::shape_str(ne).c_str(),
                 (long long)n);
      return nullptr;
    }
    size_t nb[BP_MAX_DIMS];
    nb[0] = bp_type_size(a->type);
    nb[1] = bp_type_row_size(a->type, ne[0]);
    for (int i = 2; i < BP_MAX_DIMS; ++i) nb[i] = nb[i - 1] * (size_t)ne[i - 1];
    return make_view(ctx, a, BP_OP_RESHAPE, ne, nb, 0, fn, "reshaped");
  });
}

BP_API bp_tensor *bp_reshape_2d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1) {
  BP_API_SCOPE();
  const int64_t ne[2] = {ne0, ne1};
  return bp_reshape(ctx, a, 2, ne);
}

BP_API bp_tensor *bp_reshape_3d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
  BP_API_SCOPE();
  const int64_t ne[3] = {ne0, ne1, ne2};
  return bp_reshape(ctx, a, 3, ne);
}

BP_API bp_tensor *bp_reshape_4d(bp_context *ctx, bp_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  BP_API_SCOPE();
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  return bp_reshape(ctx, a, 4, ne);
}

}  // extern "C"

namespace {

bp_tensor *permute_impl(bp_context *ctx, bp_tensor *a, const int axes[BP_MAX_DIMS], bp_op op, const char *fn) {
  if (ctx == nullptr) return null_input(fn, "ctx");
  if (a == nullptr) return null_input(fn, "a");
  bool seen[BP_MAX_DIMS] = {false, false, false, false};
  for (int i = 0; i < BP_MAX_DIMS; ++i) {
    if (axes[i] < 0 || axes[i] >= BP_MAX_DIMS || seen[axes[i]]) {
      set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: axes (%d,%d,%d,%d) are not a permutation of 0,1,2,3", fn, axes[0],
                 axes[1], axes[2], axes[3]);
      return nullptr;
    }
    seen[axes[i]] = true;
  }
  if (bp_type_is_quantized(a->type) && axes[0] != 0) {
    // Dim 0 of a quantized tensor is packed in blocks; moving it would split them.
    set_errorf(BP_ERR_INVALID_ARGUMENT,
               "%s: %s stores dim 0 in blocks of %lld values, so dim 0 must stay first (axis0 = 0): permute only "
               "dims 1..3",
               fn, bp::core::describe(a).c_str(), (long long)bp_type_block_size(a->type));
    return nullptr;
  }
  int64_t ne[BP_MAX_DIMS];
  size_t nb[BP_MAX_DIMS];
  for (int i = 0; i < BP_MAX_DIMS; ++i) {
    ne[axes[i]] = a->ne[i];
    nb[axes[i]] = a->nb[i];
  }
  bp_tensor *t = make_view(ctx, a, op, ne, nb, 0, fn, op == BP_OP_TRANSPOSE ? "transposed" : "permuted");
  if (t != nullptr) {
    for (int i = 0; i < BP_MAX_DIMS; ++i) t->op_params[i] = axes[i];
  }
  return t;
}

}  // namespace

extern "C" {

BP_API bp_tensor *bp_permute(bp_context *ctx, bp_tensor *a, int axis0, int axis1, int axis2, int axis3) {
  return bp::core::build_guard(ctx, [&] {
    const int axes[4] = {axis0, axis1, axis2, axis3};
    return permute_impl(ctx, a, axes, BP_OP_PERMUTE, "bp_permute");
  });
}

BP_API bp_tensor *bp_transpose(bp_context *ctx, bp_tensor *a) {
  return bp::core::build_guard(ctx, [&] {
    const int axes[4] = {1, 0, 2, 3};
    return permute_impl(ctx, a, axes, BP_OP_TRANSPOSE, "bp_transpose");
  });
}

}  // extern "C"
