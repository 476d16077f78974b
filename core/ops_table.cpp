// ops_table.cpp: THE op table: for each bp_op its name, sources, shape rule
// and in-place rule; plus node building, validate_node, op_inplace_src and
// the cost estimates (bp_op_flops, bp_op_bytes). Semantics: docs/ops.md.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/ops_internal.hpp"

namespace bp::core::ops {
namespace {

// Indexed by bp_op; the static_assert below keeps it in step with the enum.
const op_info k_ops[] = {
    {"NONE", "bp_tensor_new", 0, 0, rule_leaf, false},
    {"VIEW", "bp_view", 1, 1, rule_view, false},
    {"RESHAPE", "bp_reshape", 1, 1, rule_view, false},
    {"PERMUTE", "bp_permute", 1, 1, rule_view, false},
    {"TRANSPOSE", "bp_transpose", 1, 1, rule_view, false},
    {"ADD", "bp_add", 2, 2, rule_binary, true},
    {"SUB", "bp_sub", 2, 2, rule_binary, true},
    {"MUL", "bp_mul", 2, 2, rule_binary, true},
    {"DIV", "bp_div", 2, 2, rule_binary, true},
    {"SCALE", "bp_scale", 1, 1, rule_scale, true},
    {"CLAMP", "bp_clamp", 1, 1, rule_clamp, true},
    {"NEG", "bp_neg", 1, 1, rule_unary, true},
    {"ABS", "bp_abs", 1, 1, rule_unary, true},
    {"SQR", "bp_sqr", 1, 1, rule_unary, true},
    {"SQRT", "bp_sqrt", 1, 1, rule_unary, true},
    {"EXP", "bp_exp", 1, 1, rule_unary, true},
    {"RELU", "bp_relu", 1, 1, rule_unary, true},
    {"GELU", "bp_gelu", 1, 1, rule_unary, true},
    {"SILU", "bp_silu", 1, 1, rule_unary, true},
    {"TANH", "bp_tanh", 1, 1, rule_unary, true},
    {"SIGMOID", "bp_sigmoid", 1, 1, rule_unary, true},
    {"SUM_ROWS", "bp_sum_rows", 1, 1, rule_reduce_rows, false},
    {"MEAN", "bp_mean", 1, 1, rule_reduce_rows, false},
    {"ARGMAX", "bp_argmax", 1, 1, rule_argmax, false},
    {"NORM", "bp_norm", 1, 1, rule_norm, true},
    {"RMS_NORM", "bp_rms_norm", 1, 1, rule_norm, true},
    {"SOFT_MAX", "bp_soft_max", 1, 2, rule_soft_max, true},
    {"MUL_MAT", "bp_mul_mat", 2, 2, rule_mul_mat, false},
    {"GET_ROWS", "bp_get_rows", 2, 2, rule_get_rows, false},
    {"CPY", "bp_cpy", 2, 2, rule_cpy, false},
    {"CONT", "bp_cont", 1, 1, rule_cont, false},
    {"CONCAT", "bp_concat", 2, 2, rule_concat, false},
    {"ROPE", "bp_rope", 2, 3, rule_rope, true},
    {"ATTENTION", "bp_attention", 3, 4, rule_attention, false},
    {"SET_ROWS", "bp_set_rows", 3, 3, rule_set_rows, false},
};
static_assert(sizeof k_ops / sizeof k_ops[0] == BP_OP_COUNT, "the op table must list every bp_op in enum order");

bool op_in_range(int op) { return op >= 0 && op < BP_OP_COUNT; }

const bp_tensor *memory_root(const bp_tensor *t) { return t->view_src ? t->view_src : t; }
size_t memory_offset(const bp_tensor *t) { return t->view_src ? t->view_offs : 0; }

// CPY's result is b itself: same memory, shape and strides.
void alias_cpy_destination(bp_tensor *t, const bp_tensor *b) {
  for (int i = 0; i < BP_MAX_DIMS; ++i) t->nb[i] = b->nb[i];
  t->view_src = const_cast<bp_tensor *>(memory_root(b));
  t->view_offs = memory_offset(b);
  alias_view_memory(t);
}

}  // namespace

const op_info &info(bp_op op) { return k_ops[op]; }

const char *op_name(int op) { return op_in_range(op) ? k_ops[op].name : "?"; }

int param_words(bp_op op) {
  switch (op) {
    case BP_OP_SCALE:
    case BP_OP_NORM:
    case BP_OP_RMS_NORM:
    case BP_OP_SOFT_MAX:
    case BP_OP_CONCAT:
    case BP_OP_ATTENTION:
      return 1;
    case BP_OP_CLAMP:
      return 2;
    case BP_OP_ROPE:
      return 4;
    default:
      return 0;
  }
}

bp_tensor *build(bp_context *ctx, bp_op op, bp_tensor *const *src, int n_src, const int32_t *params, const char *fn,
                 int requested_type) {
  const op_info &oi = info(op);
  if (!context_usable(ctx, fn)) return nullptr;
  for (int i = 0; i < oi.n_src_min; ++i) {
    if (src[i] != nullptr) continue;
    static const char *const attention_names[] = {"q", "k", "v"};
    static const char *const set_rows_names[] = {"src", "dst", "ids"};
    const char *name = op == BP_OP_ATTENTION  ? attention_names[i]
                       : op == BP_OP_SET_ROWS ? set_rows_names[i]
                       : i == 0               ? "a"
                       : op == BP_OP_GET_ROWS ? "ids"
                       : op == BP_OP_ROPE     ? "pos"
                                              : "b";
    return null_input(fn, name);
  }
  rule_io io;
  io.fn = fn;
  io.op = op;
  for (int i = 0; i < n_src && i < BP_MAX_SRC; ++i) io.src[i] = src[i];
  int32_t no_params[BP_MAX_OP_PARAMS] = {};
  io.params = params ? params : no_params;
  io.requested_type = requested_type;
  if (oi.rule(io) != BP_OK) return nullptr;
  bp_tensor *t = tensor_create(ctx, io.out_type, io.out_ne, fn);
  if (t == nullptr) return nullptr;
  t->op = op;
  for (int i = 0; i < n_src && i < BP_MAX_SRC; ++i) t->src[i] = src[i];
  if (params) std::memcpy(t->op_params, params, sizeof t->op_params);
  if (op == BP_OP_CPY || op == BP_OP_SET_ROWS) alias_cpy_destination(t, src[1]);
  return t;
}

}  // namespace bp::core::ops

namespace bp::core {

namespace {

// Every check of validate_node; messages start with |fn|.
bp_status check_node(const bp_tensor *t, const char *fn) {
  using namespace bp::core::ops;
  if (t->struct_size != sizeof(bp_tensor)) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: struct_size %u is not %zu: the tensor was not made by this core",
                      fn, t->struct_size, sizeof(bp_tensor));
  }
  if (!op_in_range(enum_value(t->op))) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: unknown op %d", fn, enum_value(t->op));
  }
  const op_info &oi = info(t->op);
  if (check_type_and_dims(t->type, t->ne, fn) != BP_OK) return BP_ERR_INVALID_ARGUMENT;
  for (int i = 0; i < BP_MAX_SRC; ++i) {
    const bool set = t->src[i] != nullptr;
    if (i < oi.n_src_min && !set) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: source %d is NULL: %s needs %d sources", fn, i, oi.name,
                        oi.n_src_min);
    }
    if (i >= oi.n_src_max && set) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: source %d is set but %s takes at most %d", fn, i, oi.name,
                        oi.n_src_max);
    }
    if (set && check_type_and_dims(t->src[i]->type, t->src[i]->ne, fn) != BP_OK) return BP_ERR_INVALID_ARGUMENT;
  }
  rule_io io;
  io.fn = fn;
  io.op = t->op;
  for (int i = 0; i < BP_MAX_SRC; ++i) io.src[i] = t->src[i];
  io.params = t->op_params;
  io.requested_type = enum_value(t->type);
  io.self = t;
  if (oi.rule(io) != BP_OK) return BP_ERR_INVALID_ARGUMENT;
  if (io.out_type != t->type || !std::equal(io.out_ne, io.out_ne + BP_MAX_DIMS, t->ne)) {
    return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: is %s %s but its sources give %s %s: rebuild the node", fn,
                      shape_str(t).c_str(), bp_type_name(t->type), shape_str(io.out_ne).c_str(),
                      bp_type_name(io.out_type));
  }
  if (t->op == BP_OP_CPY || t->op == BP_OP_SET_ROWS) {
    const bp_tensor *b = t->src[1];
    if (memory_root(t) != memory_root(b) || t->view_offs != memory_offset(b) ||
        !std::equal(t->nb, t->nb + BP_MAX_DIMS, b->nb)) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: no longer aliases its destination %s: rebuild it with %s", fn,
                        describe(b).c_str(), oi.builder);
    }
  } else if (t->op == BP_OP_NONE) {
    if (t->view_src != nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: a leaf has a view_src: views must keep their view op", fn);
    }
  } else if (!bp_op_is_view(t->op)) {
    // Backends write op results densely; only views and CPY have strides.
    if (!bp_tensor_is_contiguous(t) || t->view_src != nullptr) {
      return set_errorf(BP_ERR_INVALID_ARGUMENT,
                        "%s: an op result must be contiguous and own its memory (no view_src): rebuild the node", fn);
    }
  }
  return BP_OK;
}

}  // namespace

bp_status validate_node(const bp_tensor *t) {
  if (t == nullptr) return set_error(BP_ERR_INVALID_ARGUMENT, "validate: a node is NULL");
  // Backends validate every node of every compute: keep the passing path
  // free of string building, and name the node only once a check failed.
  if (check_node(t, "node") == BP_OK) return BP_OK;
  std::string who = "node";
  if (t->name[0] != '\0') who += " '" + std::string(t->name, strnlen(t->name, BP_MAX_NAME)) + "'";
  const int op = enum_value(t->op);
  if (ops::op_in_range(op)) who += std::string(" (") + ops::op_name(op) + ")";
  return check_node(t, who.c_str());
}

int op_inplace_src(const bp_tensor *t) {
  if (t == nullptr || !ops::op_in_range(enum_value(t->op)) || !ops::info(t->op).inplace_src0) return -1;
  const bp_tensor *a = t->src[0];
  if (a == nullptr || a->type != t->type || !bp_tensor_same_shape(a, t)) return -1;
  if (!bp_tensor_is_contiguous(a) || !bp_tensor_is_contiguous(t)) return -1;
  return 0;
}

}  // namespace bp::core

namespace {

uint64_t elems(const bp_tensor *t) { return t ? (uint64_t)bp_tensor_nelements(t) : 0; }

// Costs of a NULL or invalid node are 0, with the reason recorded like any
// other failed call (docs/errors.md).
bool cost_input_ok(const bp_tensor *t, const char *fn) {
  if (t == nullptr) {
    bp::core::set_errorf(BP_ERR_INVALID_ARGUMENT, "%s: t is NULL", fn);
    return false;
  }
  return bp::core::validate_node(t) == BP_OK;
}

}  // namespace

extern "C" {

BP_API const char *bp_op_name(bp_op op) { return bp::core::ops::op_name(bp::core::enum_value(op)); }

// Rough counts for planning and tools, not a performance model:
// transcendental functions count as a few flops each.
BP_API uint64_t bp_op_flops(const bp_tensor *t) {
  BP_API_SCOPE();
  if (!cost_input_ok(t, "bp_op_flops")) return 0;
  return bp::core::op_flops(t);
}

BP_API uint64_t bp_op_bytes(const bp_tensor *t) {
  BP_API_SCOPE();
  if (!cost_input_ok(t, "bp_op_bytes") || bp_op_is_view(t->op)) return 0;
  return bp::core::op_bytes(t);
}

}  // extern "C"

uint64_t bp::core::op_flops(const bp_tensor *t) {
  const uint64_t n = elems(t);
  switch (t->op) {
    case BP_OP_ADD:
    case BP_OP_SUB:
    case BP_OP_MUL:
    case BP_OP_DIV:
    case BP_OP_SCALE:
    case BP_OP_NEG:
    case BP_OP_ABS:
    case BP_OP_SQR:
    case BP_OP_RELU:
      return n;
    case BP_OP_CLAMP:
      return 2 * n;
    case BP_OP_SQRT:
    case BP_OP_EXP:
    case BP_OP_TANH:
      return 4 * n;
    case BP_OP_SIGMOID:
    case BP_OP_SILU:
      return 6 * n;
    case BP_OP_GELU:
      return 10 * n;
    case BP_OP_SUM_ROWS:
    case BP_OP_MEAN:
    case BP_OP_ARGMAX:
      return elems(t->src[0]);
    case BP_OP_NORM:
      return 5 * n;
    case BP_OP_RMS_NORM:
      return 3 * n;
    case BP_OP_SOFT_MAX:
      return 8 * n;
    case BP_OP_MUL_MAT:
      return t->src[0] ? 2 * n * (uint64_t)t->src[0]->ne[0] : 0;
    case BP_OP_CPY:
    case BP_OP_CONT:
      return t->src[0] && t->src[0]->type != t->type ? n : 0;
    case BP_OP_SET_ROWS:
      return t->src[0] && t->src[0]->type != t->type ? elems(t->src[0]) : 0;
    case BP_OP_ROPE:
      return 6 * n;
    case BP_OP_ATTENTION: {
      // Per query row and key: a dot product over D, the online softmax
      // (~8), and a multiply-add over Dv; n is Dv x rows.
      const bp_tensor *q = t->src[0], *k = t->src[1];
      if (!q || !k) return 0;
      const uint64_t rows = (uint64_t)q->ne[1] * q->ne[2] * q->ne[3], n_kv = (uint64_t)k->ne[1];
      return rows * n_kv * (2 * (uint64_t)q->ne[0] + 8) + 2 * n * n_kv;
    }
    default:
      return 0;  // leaves, views, GET_ROWS, CONCAT move data only
  }
}

uint64_t bp::core::op_bytes(const bp_tensor *t) {
  if (bp_op_is_view(t->op)) return 0;
  if (t->op == BP_OP_SET_ROWS) {  // reads src and ids, writes one row of dst per row of src
    const bp_tensor *src = t->src[0];
    return bp_tensor_nbytes(src) + bp_tensor_nbytes(t->src[2]) +
           static_cast<uint64_t>(bp_tensor_nrows(src)) * bp_type_row_size(t->type, t->ne[0]);
  }
  uint64_t bytes = bp_tensor_nbytes(t);
  // CPY writes src1's memory but does not read it.
  const int n_read = t->op == BP_OP_CPY ? 1 : BP_MAX_SRC;
  for (int i = 0; i < n_read; ++i) {
    if (t->src[i]) bytes += bp_tensor_nbytes(t->src[i]);
  }
  return bytes;
}
