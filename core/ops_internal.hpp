// ops_internal.hpp: the op table's types, shared by core/ops_table.cpp (the
// table, validation, in-place rule, cost), core/ops_rules.cpp (shape and type
// rules) and core/ops_build.cpp (the public op builders). Not installed.
//
// One rule per op checks the sources and parameters and computes the output
// type and shape. The builders run it before creating a node and
// validate_node runs it again on an existing node, so a graph edited after
// building is held to the same rule.
#pragma once

#include <cstdint>

#include "core/tensor_util.hpp"

namespace bp::core::ops {

// Input and output of a shape rule.
struct rule_io {
  const char *fn = "";                   // prefix of error messages ("bp_mul_mat")
  bp_op op = BP_OP_NONE;
  const bp_tensor *src[BP_MAX_SRC] = {};  // required ones are non-NULL
  const int32_t *params = nullptr;        // BP_MAX_OP_PARAMS words
  int requested_type = BP_TYPE_F32;       // CONT: the type asked for (unchecked)
  const bp_tensor *self = nullptr;        // validate_node: the node; builders: NULL
  // Outputs.
  bp_type out_type = BP_TYPE_F32;
  int64_t out_ne[BP_MAX_DIMS] = {1, 1, 1, 1};

  float param_f32(int i) const {
    union { int32_t i; float f; } u;
    u.i = params[i];
    return u.f;
  }
};

// Checks io.src / io.params, fills io.out_*. Sets the error and returns it
// otherwise.
using shape_rule = bp_status (*)(rule_io &io);

struct op_info {
  const char *name;     // "MUL_MAT"
  const char *builder;  // "bp_mul_mat": names the op in build errors
  int n_src_min;        // sources that must be set
  int n_src_max;        // sources that may be set (src[n_src_max..] stay NULL)
  shape_rule rule;
  bool inplace_src0;    // the output may overwrite src0 (same type, shape, contiguous)
};

// The entry of |op| (which must be < BP_OP_COUNT).
const op_info &info(bp_op op);

// Shape rules (core/ops_rules.cpp).
bp_status rule_leaf(rule_io &io);
bp_status rule_view(rule_io &io);
bp_status rule_binary(rule_io &io);
bp_status rule_unary(rule_io &io);
bp_status rule_scale(rule_io &io);
bp_status rule_clamp(rule_io &io);
bp_status rule_reduce_rows(rule_io &io);
bp_status rule_argmax(rule_io &io);
bp_status rule_norm(rule_io &io);
bp_status rule_soft_max(rule_io &io);
bp_status rule_mul_mat(rule_io &io);
bp_status rule_get_rows(rule_io &io);
bp_status rule_cpy(rule_io &io);
bp_status rule_cont(rule_io &io);
bp_status rule_concat(rule_io &io);
bp_status rule_rope(rule_io &io);
bp_status rule_attention(rule_io &io);
bp_status rule_set_rows(rule_io &io);

// Builds node |op| from |src| (n_src of them; optional ones may be NULL)
// and |params| (BP_MAX_OP_PARAMS words, or NULL for none). |fn| names the
// public call in errors. NULL with the error set on bad input.
bp_tensor *build(bp_context *ctx, bp_op op, bp_tensor *const *src, int n_src, const int32_t *params, const char *fn,
                 int requested_type = BP_TYPE_F32);

// bp_op_name for any int ("?" outside the enum).
const char *op_name(int op);

// How many op_params words |op| reads (docs/ops.md): bp_op_new refuses more.
int param_words(bp_op op);

}  // namespace bp::core::ops

namespace bp::core {

// Re-checks node |t| against the op table (shape, type, sources); the same
// rule the graph-building calls applied. Sets the error naming the node.
// [core/ops_table.cpp]
bp_status validate_node(const bp_tensor *t);

// Index of the source whose memory node |t|'s output may overwrite (the
// allocator reuses it in place when that source dies at |t|), or -1. Only
// elementwise-shaped ops qualify, and only when the source has t's type and
// shape and both are contiguous. [core/ops_table.cpp]
int op_inplace_src(const bp_tensor *t);

// bp_op_flops and bp_op_bytes of a node already validated (the trace
// recorder's, which must not pay validate_node again per node).
uint64_t op_flops(const bp_tensor *t);
uint64_t op_bytes(const bp_tensor *t);

}  // namespace bp::core
