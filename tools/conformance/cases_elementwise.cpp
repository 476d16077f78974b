// cases_elementwise.cpp: ADD SUB MUL DIV (with src1 broadcast in each dim),
// SCALE, CLAMP and the unary ops, over odd sizes, non-contiguous operands and
// f16.

#include "conformance/cases_util.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance {

namespace {

using L = layout_kind;

struct binary_shape {
  shape a, b;
  L la = L::contiguous, lb = L::contiguous;
  bp_type ta = BP_TYPE_F32, tb = BP_TYPE_F32;
};

const std::vector<binary_shape> &binary_shapes() {
  static const std::vector<binary_shape> shapes = {
      {{1, 1, 1, 1}, {1, 1, 1, 1}},
      {{7, 1, 1, 1}, {7, 1, 1, 1}},
      {{33, 7, 1, 1}, {33, 7, 1, 1}},
      {{257, 3, 1, 1}, {257, 3, 1, 1}},
      {{33, 7, 1, 1}, {33, 1, 1, 1}},  // broadcast in dim 1
      {{33, 7, 1, 1}, {1, 7, 1, 1}},   // dim 0
      {{7, 5, 3, 2}, {7, 5, 1, 2}},    // dim 2
      {{7, 5, 3, 2}, {7, 5, 3, 1}},    // dim 3
      {{7, 5, 3, 2}, {1, 1, 1, 1}},    // scalar
      {{14, 6, 3, 1}, {7, 3, 1, 1}},   // repetition, not only size 1
      {{7, 257, 1, 1}, {7, 1, 1, 1}},  // many rows: crosses thread splits
      {{1, 33, 7, 1}, {1, 33, 1, 1}},
      {{7, 1, 1, 257}, {7, 1, 1, 1}},
      // Big enough (> 16k elements) that a threaded backend splits the rows.
      {{257, 67, 1, 1}, {257, 1, 1, 1}},
      {{7, 2053, 2, 1}, {7, 2053, 1, 1}, L::strided, L::contiguous},
      {{33, 513, 1, 1}, {1, 513, 1, 1}, L::transposed, L::contiguous, BP_TYPE_F16, BP_TYPE_F32},
      {{33, 7, 1, 1}, {33, 7, 1, 1}, L::transposed, L::contiguous},
      {{7, 5, 3, 2}, {7, 5, 3, 2}, L::strided, L::permuted},
      {{7, 5, 3, 2}, {7, 5, 1, 2}, L::shuffled, L::strided},
      {{33, 7, 1, 1}, {33, 1, 1, 1}, L::contiguous, L::transposed},
      {{33, 7, 1, 1}, {33, 7, 1, 1}, L::contiguous, L::contiguous, BP_TYPE_F16, BP_TYPE_F16},
      {{33, 7, 1, 1}, {33, 1, 1, 1}, L::contiguous, L::contiguous, BP_TYPE_F16, BP_TYPE_F32},
      {{7, 5, 3, 2}, {7, 5, 1, 1}, L::permuted, L::contiguous, BP_TYPE_F32, BP_TYPE_F16},
      {{257, 3, 1, 1}, {257, 3, 1, 1}, L::transposed, L::strided, BP_TYPE_F16, BP_TYPE_F16},
  };
  return shapes;
}

bp_tensor *build_binary(bp_op op, bp_context *ctx, bp_tensor *a, bp_tensor *b) {
  switch (op) {
    case BP_OP_ADD:
      return bp_add(ctx, a, b);
    case BP_OP_SUB:
      return bp_sub(ctx, a, b);
    case BP_OP_MUL:
      return bp_mul(ctx, a, b);
    default:
      return bp_div(ctx, a, b);
  }
}

const char *binary_symbol(bp_op op) {
  switch (op) {
    case BP_OP_ADD:
      return "+";
    case BP_OP_SUB:
      return "-";
    case BP_OP_MUL:
      return "*";
    default:
      return "/";
  }
}

void add_binary(std::vector<case_desc> &out, bp_op op) {
  for (const binary_shape &s : binary_shapes()) {
    case_desc c;
    c.op = bp_op_name(op);
    c.name = c.op + " " + operand_name(s.ta, s.a, s.la) + " " + binary_symbol(op) + " " + operand_name(s.tb, s.b, s.lb);
    const bool f16 = s.ta == BP_TYPE_F16 || s.tb == BP_TYPE_F16;
    c.max_nmse = f16 ? k_tol_f16_elementwise : k_tol_f32;
    c.inputs.push_back(operand(s.ta, s.a, s.la, uniform(-2, 2)));
    c.inputs.push_back(operand(s.tb, s.b, s.lb, op == BP_OP_DIV ? away_from_zero(0.5, 2) : uniform(-2, 2)));
    c.build = [op](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
      return build_binary(op, ctx, in[0], in[1]);
    };
    c.reference = ref::binary(op);
    out.push_back(std::move(c));
  }
}

struct unary_shape {
  shape ne;
  L lay = L::contiguous;
  bp_type type = BP_TYPE_F32;
};

const std::vector<unary_shape> &unary_shapes() {
  static const std::vector<unary_shape> shapes = {
      {{1, 1, 1, 1}},
      {{7, 1, 1, 1}},
      {{33, 7, 1, 1}},
      {{257, 3, 2, 1}},
      {{3, 257, 1, 1}},
      {{1, 7, 1, 33}},
      {{257, 67, 1, 1}},  // > 16k elements: split over threads
      {{7, 2053, 2, 1}, L::strided},
      {{33, 513, 1, 1}, L::transposed, BP_TYPE_F16},
      {{7, 5, 3, 2}, L::transposed},
      {{33, 7, 3, 1}, L::strided},
      {{7, 5, 3, 2}, L::shuffled},
      {{33, 7, 1, 1}, L::contiguous, BP_TYPE_F16},
      {{7, 33, 2, 1}, L::transposed, BP_TYPE_F16},
  };
  return shapes;
}

// Input range per op: SQRT needs x >= 0, EXP stays small, the rest cover
// both signs and the curved part of the activations.
fill_spec unary_range(bp_op op) {
  switch (op) {
    case BP_OP_SQRT:
      return uniform(0.01, 4);
    case BP_OP_EXP:
      return uniform(-3, 3);
    default:
      return uniform(-4, 4);
  }
}

}  // namespace

build_fn unary_builder(bp_op op) {
  if (op == BP_OP_SCALE)
    return [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) {
      return bp_scale(ctx, in[0], a.f[0]);
    };
  if (op == BP_OP_CLAMP)
    return [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) {
      return bp_clamp(ctx, in[0], a.f[0], a.f[1]);
    };
  return
      [op](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) { return bp_unary(ctx, in[0], op); };
}

namespace {

void add_unary(std::vector<case_desc> &out, bp_op op, const op_args &args, const std::string &label) {
  for (const unary_shape &s : unary_shapes()) {
    case_desc c;
    c.op = bp_op_name(op);
    c.name = c.op + label + " " + operand_name(s.type, s.ne, s.lay);
    c.max_nmse = s.type == BP_TYPE_F16 ? k_tol_f16_elementwise : k_tol_f32;
    c.inputs.push_back(operand(s.type, s.ne, s.lay, unary_range(op)));
    c.args = args;
    c.build = unary_builder(op);
    c.reference = ref::unary(op);
    out.push_back(std::move(c));
  }
}

}  // namespace

void add_elementwise_cases(std::vector<case_desc> &out) {
  for_each_elementwise_op([&](bp_op op) { add_binary(out, op); },
                          [&](bp_op op, const op_args &a, const char *label) { add_unary(out, op, a, label); });
}

}  // namespace bp::conformance
