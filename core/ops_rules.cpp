// ops_rules.cpp: the shape and type rule of every op (see docs/ops.md).
//
// Each rule reads rule_io.src / params, checks them, and writes the output
// type and shape. Messages name the call, the tensors' shapes and the fix.
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/ops_internal.hpp"

namespace bp::core::ops {
namespace {

const char *const k_src_names[BP_MAX_SRC] = {"a", "b", "src2", "src3"};

// Names source |i| as the builder calls it ("ids" reads better than "b").
const char *src_name(const rule_io &io, int i) {
  if (i == 1) {
    switch (io.op) {
      case BP_OP_SOFT_MAX:
        return "mask";
      case BP_OP_GET_ROWS:
        return "ids";
      case BP_OP_ROPE:
        return "pos";
      default:
        break;
    }
  }
  if (i == 2 && io.op == BP_OP_ROPE) return "freq_factors";
  if (io.op == BP_OP_SET_ROWS) {
    static const char *const names[BP_MAX_SRC] = {"src", "dst", "ids", "src3"};
    return names[i];
  }
  if (io.op == BP_OP_ATTENTION) {
    static const char *const names[BP_MAX_SRC] = {"q", "k", "v", "mask"};
    return names[i];
  }
  return k_src_names[i];
}

std::string desc(const rule_io &io, int i) { return std::string(src_name(io, i)) + " " + describe(io.src[i]); }

bp_status fail(const rule_io &io, const std::string &what) {
  return set_error(BP_ERR_INVALID_ARGUMENT, std::string(io.fn) + ": " + what);
}

// Requires src[small]'s dims 2 and 3 to divide src[big]'s (the batch dims
// an operand repeats over); |hint| is appended to a dim-2 failure.
bp_status need_broadcast(const rule_io &io, int small, int big, const char *hint = "") {
  const bp_tensor *s = io.src[small], *b = io.src[big];
  for (int i = 2; i < BP_MAX_DIMS; ++i) {
    if (b->ne[i] % s->ne[i] != 0) {
      return fail(io, desc(io, small) + " does not broadcast over " + desc(io, big) + " in dim " + std::to_string(i) +
                          ": " + std::to_string(s->ne[i]) + " does not divide " + std::to_string(b->ne[i]) +
                          (i == 2 ? hint : ""));
    }
  }
  return BP_OK;
}

// Requires src[i] to have one of the listed types.
template <class List>
bp_status need_type(const rule_io &io, int i, const List &allowed) {
  const bp_type t = io.src[i]->type;
  std::string names;
  for (bp_type a : allowed) {
    if (a == t) return BP_OK;
    names += names.empty() ? "" : " or ";
    names += bp_type_name(a);
  }
  std::string hint;
  if (bp_type_is_quantized(t)) {
    hint =
        " (quantized tensors are read only by MUL_MAT as a, GET_ROWS as the table, and written by CPY and CONT "
        "from f32)";
  }
  return fail(io, desc(io, i) + ": the type must be " + names + hint);
}

bp_status need_type(const rule_io &io, int i, std::initializer_list<bp_type> allowed) {
  return need_type<std::initializer_list<bp_type>>(io, i, allowed);
}

// The types a weight may have (f32, f16, every quantized type; and i32 for
// GET_ROWS' tables): one list, so a new quantized type needs no edit here.
// Built once: the rules also run when graphs are computed, where nothing
// may allocate per node.
std::vector<bp_type> make_weight_types(bool with_i32) {
  std::vector<bp_type> out = {BP_TYPE_F32, BP_TYPE_F16};
  if (with_i32) out.push_back(BP_TYPE_I32);
  for (int t = 0; t < BP_TYPE_COUNT; ++t) {
    if (bp_type_is_quantized(static_cast<bp_type>(t))) out.push_back(static_cast<bp_type>(t));
  }
  return out;
}
const std::vector<bp_type> &weight_types(bool with_i32) {
  static const std::vector<bp_type> with = make_weight_types(true), without = make_weight_types(false);
  return with_i32 ? with : without;
}

bool is_float(bp_type t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16; }

void copy_shape(rule_io &io, const bp_tensor *t) {
  for (int i = 0; i < BP_MAX_DIMS; ++i) io.out_ne[i] = t->ne[i];
}

}  // namespace

bp_status rule_leaf(rule_io &io) {
  // A leaf has no rule beyond a valid type and shape, checked by the caller.
  io.out_type = io.self ? io.self->type : static_cast<bp_type>(io.requested_type);
  if (io.self) copy_shape(io, io.self);
  return BP_OK;
}

// Only validate_node reaches this: views are built in core/views.cpp.
bp_status rule_view(rule_io &io) {
  const bp_tensor *t = io.self, *a = io.src[0];
  if (t == nullptr) return set_errorf(BP_ERR_INTERNAL, "%s: view rule called without a node", io.fn);
  const bp_tensor *root = a->view_src ? a->view_src : a;
  if (t->view_src != root) {
    return fail(io, "view_src is not the tensor whose memory a " + describe(a) +
                        " uses: rebuild the view with bp_view_*/bp_reshape*/bp_permute");
  }
  if (t->type != a->type) {
    return fail(io, std::string("a view of ") + describe(a) + " has type " + bp_type_name(t->type) +
                        ": views keep their source's type (use bp_cast to convert)");
  }
  const size_t base = a->view_src ? a->view_offs : 0;
  if (t->view_offs < base) return fail(io, "view_offs lies before the start of its source " + describe(a));
  if (check_view_inside(io.fn, t->type, t->ne, t->nb, t->view_offs - base, a) != BP_OK) return BP_ERR_INVALID_ARGUMENT;
  if (io.op != BP_OP_VIEW && bp_tensor_nelements(t) != bp_tensor_nelements(a)) {
    return fail(io, "a " + describe(t) + " made from " + describe(a) + " must have the same number of elements");
  }
  if (io.op == BP_OP_RESHAPE && (!bp_tensor_is_contiguous(a) || !bp_tensor_is_contiguous(t))) {
    return fail(io, "a reshape and its source " + describe(a) + " must both be contiguous");
  }
  io.out_type = t->type;
  copy_shape(io, t);
  return BP_OK;
}

bp_status rule_binary(rule_io &io) {
  const bp_tensor *a = io.src[0], *b = io.src[1];
  if (need_type(io, 0, {BP_TYPE_F32, BP_TYPE_F16}) || need_type(io, 1, {BP_TYPE_F32, BP_TYPE_F16})) {
    return BP_ERR_INVALID_ARGUMENT;
  }
  for (int i = 0; i < BP_MAX_DIMS; ++i) {
    if (a->ne[i] % b->ne[i] != 0) {
      return fail(io, desc(io, 1) + " does not broadcast over " + desc(io, 0) + ": in dim " + std::to_string(i) + ", " +
                          std::to_string(b->ne[i]) + " does not divide " + std::to_string(a->ne[i]) +
                          " (each dim of b must divide a's)");
    }
  }
  io.out_type = a->type;
  copy_shape(io, a);
  return BP_OK;
}

bp_status rule_unary(rule_io &io) {
  if (need_type(io, 0, {BP_TYPE_F32, BP_TYPE_F16})) return BP_ERR_INVALID_ARGUMENT;
  io.out_type = io.src[0]->type;
  copy_shape(io, io.src[0]);
  return BP_OK;
}

bp_status rule_scale(rule_io &io) {
  const float s = io.param_f32(0);
  if (!std::isfinite(s)) return fail(io, "scale " + std::to_string(s) + " is not finite");
  return rule_unary(io);
}

bp_status rule_clamp(rule_io &io) {
  const float lo = io.param_f32(0), hi = io.param_f32(1);
  if (!(lo <= hi)) {
    return fail(io, "min " + std::to_string(lo) + " and max " + std::to_string(hi) +
                        ": min must be <= max and neither may be NaN");
  }
  return rule_unary(io);
}

bp_status rule_reduce_rows(rule_io &io) {
  if (need_type(io, 0, {BP_TYPE_F32})) return BP_ERR_INVALID_ARGUMENT;
  const bp_tensor *a = io.src[0];
  io.out_type = BP_TYPE_F32;
  io.out_ne[0] = 1;
  io.out_ne[1] = a->ne[1];
  io.out_ne[2] = a->ne[2];
  io.out_ne[3] = a->ne[3];
  return BP_OK;
}

bp_status rule_argmax(rule_io &io) {
  if (need_type(io, 0, {BP_TYPE_F32})) return BP_ERR_INVALID_ARGUMENT;
  const bp_tensor *a = io.src[0];
  io.out_type = BP_TYPE_I32;
  io.out_ne[0] = a->ne[1];
  io.out_ne[1] = a->ne[2];
  io.out_ne[2] = a->ne[3];
  io.out_ne[3] = 1;
  return BP_OK;
}

bp_status rule_norm(rule_io &io) {
  const float eps = io.param_f32(0);
  if (!(eps >= 0.0f) || !std::isfinite(eps)) {
    return fail(io, "eps " + std::to_string(eps) + ": it must be finite and >= 0");
  }
  if (need_type(io, 0, {BP_TYPE_F32})) return BP_ERR_INVALID_ARGUMENT;
  io.out_type = BP_TYPE_F32;
  copy_shape(io, io.src[0]);
  return BP_OK;
}

bp_status rule_soft_max(rule_io &io) {
  const bp_tensor *a = io.src[0], *mask = io.src[1];
  const float scale = io.param_f32(0);
  if (!std::isfinite(scale)) return fail(io, "scale " + std::to_string(scale) + " is not finite");
  if (need_type(io, 0, {BP_TYPE_F32})) return BP_ERR_INVALID_ARGUMENT;
  if (mask != nullptr) {
    if (need_type(io, 1, {BP_TYPE_F32, BP_TYPE_F16})) return BP_ERR_INVALID_ARGUMENT;
    if (mask->ne[0] != a->ne[0]) {
      return fail(io, desc(io, 1) + " and " + desc(io, 0) + " differ in dim 0 (" + std::to_string(mask->ne[0]) +
                          " vs " + std::to_string(a->ne[0]) + "): a mask row must be as long as a row");
    }
    if (mask->ne[1] < a->ne[1]) {
      return fail(io, desc(io, 1) + " has " + std::to_string(mask->ne[1]) + " rows but " + desc(io, 0) + " has " +
                          std::to_string(a->ne[1]) + ": the mask needs at least as many rows (dim 1)");
    }
    if (need_broadcast(io, 1, 0)) return BP_ERR_INVALID_ARGUMENT;
  }
  io.out_type = BP_TYPE_F32;
  copy_shape(io, a);
  return BP_OK;
}

bp_status rule_mul_mat(rule_io &io) {
  const bp_tensor *a = io.src[0], *b = io.src[1];
  if (need_type(io, 0, weight_types(false)) || need_type(io, 1, {BP_TYPE_F32})) {
    return BP_ERR_INVALID_ARGUMENT;
  }
  if (a->ne[0] != b->ne[0]) {
    return fail(io, desc(io, 0) + " and " + desc(io, 1) + " differ in dim 0 (" + std::to_string(a->ne[0]) + " vs " +
                        std::to_string(b->ne[0]) + "): the inner dimensions must match");
  }
  if (need_broadcast(io, 0, 1)) return BP_ERR_INVALID_ARGUMENT;
  for (int i = 0; i < 2; ++i) {
    if (!bp_tensor_rows_contiguous(io.src[i])) {
      return fail(io, desc(io, i) + " has rows that are not dense (nb[0] = " + std::to_string(io.src[i]->nb[0]) +
                          "): pass bp_cont() of it");
    }
  }
  io.out_type = BP_TYPE_F32;
  io.out_ne[0] = a->ne[1];
  io.out_ne[1] = b->ne[1];
  io.out_ne[2] = b->ne[2];
  io.out_ne[3] = b->ne[3];
  return BP_OK;
}

bp_status rule_get_rows(rule_io &io) {
  const bp_tensor *a = io.src[0], *ids = io.src[1];
  if (need_type(io, 0, weight_types(true)) || need_type(io, 1, {BP_TYPE_I32})) {
    return BP_ERR_INVALID_ARGUMENT;
  }
  if (ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3] || ids->ne[3] != 1) {
    return fail(io, desc(io, 1) + " does not fit " + desc(io, 0) + ": ids must be [N," + std::to_string(a->ne[2]) +
                        "," + std::to_string(a->ne[3]) + ",1] (one list of row numbers per matrix of a)");
  }
  io.out_type = a->type == BP_TYPE_I32 ? BP_TYPE_I32 : BP_TYPE_F32;
  io.out_ne[0] = a->ne[0];
  io.out_ne[1] = ids->ne[0];
  io.out_ne[2] = a->ne[2];
  io.out_ne[3] = a->ne[3];
  return BP_OK;
}

namespace {
// CPY and CONT convert f32 <-> f16, copy i32 unchanged and quantize f32.
bp_status check_conversion(const rule_io &io, bp_type from, bp_type to) {
  if ((is_float(from) && is_float(to)) || (from == BP_TYPE_I32 && to == BP_TYPE_I32)) return BP_OK;
  if (from == BP_TYPE_F32 && bp_type_is_quantized(to)) return BP_OK;
  return fail(io, std::string("cannot convert ") + bp_type_name(from) + " to " + bp_type_name(to) +
                      ": only f32 <-> f16, i32 -> i32 and f32 -> quantized (any type from q8_0 on: docs/types.md) "
                      "copies are supported");
}

// Quantizing works row by row: each row must fill whole blocks of |to|.
bp_status check_quantized_rows(const rule_io &io, int64_t ne0, bp_type to) {
  const int64_t blck = bp_type_block_size(to);
  if (ne0 % blck == 0) return BP_OK;
  return fail(io, desc(io, 0) + ": " + bp_type_name(to) + " rows hold whole blocks of " + std::to_string(blck) +
                      " values; ne[0] = " + std::to_string(ne0) + " is not a multiple of " + std::to_string(blck));
}
}  // namespace

bp_status rule_cpy(rule_io &io) {
  const bp_tensor *a = io.src[0], *b = io.src[1];
  if (bp_tensor_nelements(a) != bp_tensor_nelements(b)) {
    return fail(io, desc(io, 0) + " has " + std::to_string(bp_tensor_nelements(a)) + " elements but " + desc(io, 1) +
                        " has " + std::to_string(bp_tensor_nelements(b)) + ": the counts must match");
  }
  if (check_conversion(io, a->type, b->type)) return BP_ERR_INVALID_ARGUMENT;
  if (bp_type_is_quantized(b->type) && a->ne[0] != b->ne[0]) {
    return fail(io, desc(io, 0) + " and " + desc(io, 1) + " differ in dim 0 (" + std::to_string(a->ne[0]) + " vs " +
                        std::to_string(b->ne[0]) + "): a copy into a quantized tensor quantizes whole rows, so " +
                        "the row lengths must match");
  }
  io.out_type = b->type;
  copy_shape(io, b);
  return BP_OK;
}

bp_status rule_cont(rule_io &io) {
  if ((int)io.requested_type < 0 || (int)io.requested_type >= BP_TYPE_COUNT) {
    return fail(io, "unknown type " + std::to_string((int)io.requested_type));
  }
  const bp_type to = static_cast<bp_type>(io.requested_type);
  if (check_conversion(io, io.src[0]->type, to)) return BP_ERR_INVALID_ARGUMENT;
  if (check_quantized_rows(io, io.src[0]->ne[0], to)) return BP_ERR_INVALID_ARGUMENT;
  io.out_type = to;
  copy_shape(io, io.src[0]);
  return BP_OK;
}

bp_status rule_concat(rule_io &io) {
  const bp_tensor *a = io.src[0], *b = io.src[1];
  const int dim = io.params[0];
  if (dim < 0 || dim >= BP_MAX_DIMS) return fail(io, "dim = " + std::to_string(dim) + ": it must be 0..3");
  if (a->type != b->type) {
    return fail(io, desc(io, 0) + " and " + desc(io, 1) + " differ in type: cast one with bp_cast");
  }
  if (bp_type_is_quantized(a->type)) {
    return fail(io, desc(io, 0) + ": CONCAT does not take quantized tensors (quantized tensors are read only by " +
                        "MUL_MAT as a and GET_ROWS as the table)");
  }
  for (int i = 0; i < BP_MAX_DIMS; ++i) {
    if (i != dim && a->ne[i] != b->ne[i]) {
      return fail(io, desc(io, 0) + " and " + desc(io, 1) + " differ in dim " + std::to_string(i) + " (" +
                          std::to_string(a->ne[i]) + " vs " + std::to_string(b->ne[i]) +
                          "): all dims but the concatenated one (" + std::to_string(dim) + ") must match");
    }
  }
  io.out_type = a->type;
  copy_shape(io, a);
  io.out_ne[dim] = a->ne[dim] + b->ne[dim];
  return BP_OK;
}

bp_status rule_rope(rule_io &io) {
  const bp_tensor *a = io.src[0], *pos = io.src[1];
  const int n_dims = io.params[0], mode = io.params[1];
  const float base = io.param_f32(2), scale = io.param_f32(3);
  if (need_type(io, 0, {BP_TYPE_F32}) || need_type(io, 1, {BP_TYPE_I32})) return BP_ERR_INVALID_ARGUMENT;
  if (pos->ne[0] != a->ne[2] || pos->ne[1] != 1 || pos->ne[2] != 1 || pos->ne[3] != 1) {
    return fail(io, desc(io, 1) + " does not fit " + desc(io, 0) + ": pos must be [" + std::to_string(a->ne[2]) +
                        "], one position per entry of a's dim 2");
  }
  if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) {
    return fail(io, "n_dims = " + std::to_string(n_dims) + " for " + desc(io, 0) +
                        ": it must be even, > 0 and <= " + std::to_string(a->ne[0]));
  }
  if (mode != BP_ROPE_NORMAL && mode != BP_ROPE_NEOX) {
    return fail(io, "mode = " + std::to_string(mode) + ": use BP_ROPE_NORMAL (0) or BP_ROPE_NEOX (2)");
  }
  if (!(base > 0.0f) || !std::isfinite(base)) {
    return fail(io, "freq_base = " + std::to_string(base) + ": it must be finite and > 0 (10000 is common)");
  }
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    return fail(io, "freq_scale = " + std::to_string(scale) + ": it must be finite and > 0 (1 means no scaling)");
  }
  if (const bp_tensor *ff = io.src[2]) {
    if (need_type(io, 2, {BP_TYPE_F32})) return BP_ERR_INVALID_ARGUMENT;
    if (ff->ne[1] != 1 || ff->ne[2] != 1 || ff->ne[3] != 1) {
      return fail(io, desc(io, 2) + ": freq_factors must be 1-D, one factor per rotated pair (reshape it to [" +
                          std::to_string(ff->ne[0] * ff->ne[1] * ff->ne[2] * ff->ne[3]) + "])");
    }
    if (ff->ne[0] < n_dims / 2) {
      return fail(io, desc(io, 2) + " is too short for n_dims = " + std::to_string(n_dims) +
                          ": freq_factors needs at least n_dims/2 = " + std::to_string(n_dims / 2) +
                          " elements, one per rotated pair");
    }
    if (!bp_tensor_is_contiguous(ff)) {
      return fail(io, desc(io, 2) + ": freq_factors must be contiguous: copy it with bp_cont first");
    }
  }
  io.out_type = BP_TYPE_F32;
  copy_shape(io, a);
  return BP_OK;
}

bp_status rule_set_rows(rule_io &io) {
  const bp_tensor *src = io.src[0], *dst = io.src[1], *ids = io.src[2];
  if (need_type(io, 0, {BP_TYPE_F32}) || need_type(io, 1, {BP_TYPE_F32, BP_TYPE_F16}) ||
      need_type(io, 2, {BP_TYPE_I32})) {
    return BP_ERR_INVALID_ARGUMENT;
  }
  if (src->ne[0] != dst->ne[0] || src->ne[2] != dst->ne[2] || src->ne[3] != dst->ne[3]) {
    return fail(
        io, desc(io, 0) + " does not fit " + desc(io, 1) + ": src needs dst's row length (dim 0) and its dims 2 and 3");
  }
  if (ids->ne[0] != src->ne[1] || ids->ne[1] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1) {
    return fail(io, desc(io, 2) + " does not fit " + desc(io, 0) + ": ids must be [" + std::to_string(src->ne[1]) +
                        "], one row index per row of src");
  }
  if (!bp_tensor_rows_contiguous(dst)) {
    return fail(io, desc(io, 1) + " has rows that are not dense: set_rows writes whole dense rows");
  }
  if (!bp_tensor_is_contiguous(ids)) {
    return fail(io, desc(io, 2) + " is not contiguous: pass bp_cont() of it");
  }
  io.out_type = dst->type;
  copy_shape(io, dst);
  return BP_OK;
}

bp_status rule_attention(rule_io &io) {
  const bp_tensor *q = io.src[0], *k = io.src[1], *v = io.src[2], *mask = io.src[3];
  const float scale = io.param_f32(0);
  if (!std::isfinite(scale)) return fail(io, "scale " + std::to_string(scale) + " is not finite");
  if (need_type(io, 0, {BP_TYPE_F32}) || need_type(io, 1, {BP_TYPE_F32, BP_TYPE_F16}) ||
      need_type(io, 2, {BP_TYPE_F32, BP_TYPE_F16})) {
    return BP_ERR_INVALID_ARGUMENT;
  }
  if (k->type != v->type) {
    return fail(io, desc(io, 1) + " and " + desc(io, 2) + " differ in type: k and v must both be f32 or both f16");
  }
  if (k->ne[0] != q->ne[0]) {
    return fail(io, desc(io, 0) + " and " + desc(io, 1) + " differ in dim 0 (" + std::to_string(q->ne[0]) + " vs " +
                        std::to_string(k->ne[0]) + "): a key row must be as long as a query row");
  }
  if (v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3]) {
    return fail(io, desc(io, 2) + " does not fit " + desc(io, 1) +
                        ": v needs k's dims 1 to 3 (one value row per key, the same heads and batch)");
  }
  if (need_broadcast(io, 1, 0, " (query heads share key heads in equal groups)")) return BP_ERR_INVALID_ARGUMENT;
  for (int i = 0; i < 3; ++i) {
    if (!bp_tensor_rows_contiguous(io.src[i])) {
      return fail(io, desc(io, i) + " has rows that are not dense (nb[0] = " + std::to_string(io.src[i]->nb[0]) +
                          "): pass bp_cont() of it");
    }
  }
  if (mask != nullptr) {
    if (need_type(io, 3, {BP_TYPE_F32})) return BP_ERR_INVALID_ARGUMENT;
    if (mask->ne[0] != k->ne[1]) {
      return fail(io, desc(io, 3) + " and " + desc(io, 1) + " differ in length (" + std::to_string(mask->ne[0]) +
                          " vs " + std::to_string(k->ne[1]) + "): a mask row holds one value per key");
    }
    if (mask->ne[1] < q->ne[1]) {
      return fail(io, desc(io, 3) + " has " + std::to_string(mask->ne[1]) + " rows but " + desc(io, 0) + " has " +
                          std::to_string(q->ne[1]) + " tokens: the mask needs a row per token (dim 1)");
    }
    if (need_broadcast(io, 3, 0)) return BP_ERR_INVALID_ARGUMENT;
    if (!bp_tensor_rows_contiguous(mask)) {
      return fail(io, desc(io, 3) + " has rows that are not dense: pass bp_cont() of it");
    }
  }
  io.out_type = BP_TYPE_F32;
  io.out_ne[0] = v->ne[0];
  io.out_ne[1] = q->ne[2];
  io.out_ne[2] = q->ne[1];
  io.out_ne[3] = q->ne[3];
  return BP_OK;
}

}  // namespace bp::core::ops
