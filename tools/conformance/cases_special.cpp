// cases_special.cpp: every unary, elementwise and row op on the special
// values (special_values(): +-0, +-inf, NaN, denormals, magnitudes 1e4 to
// FLT_MAX, the edges of exp's range), on every backend. Compared element by
// element: NaN where the reference is NaN, the same infinity, else within the
// bound the API under test states (ref::*_special, docs/ops.md "Special
// values and tolerances").

#include "conformance/cases_util.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance {

namespace {

using L = layout_kind;

// 36 specials: a [36, n] operand filled with fill_kind::special holds each
// once per row.
constexpr int64_t k_s = 36;

fill_spec special_fill(fill_kind kind) {
  fill_spec f;
  f.kind = kind;
  return f;
}

void add_binary_special(std::vector<case_desc> &out, bp_op op) {
  struct shape_case {
    shape a, b;
    L la, lb;
  };
  // Every pair (a special, b special): a's element i0 is special i0, b's
  // rows are one special each. Dense (the vector paths), broadcast, strided.
  const shape_case shapes[] = {
      {{k_s, k_s, 1, 1}, {k_s, k_s, 1, 1}, L::contiguous, L::contiguous},
      {{k_s, k_s, 1, 1}, {1, k_s, 1, 1}, L::contiguous, L::contiguous},
      {{k_s, k_s, 1, 1}, {k_s, k_s, 1, 1}, L::strided, L::transposed},
  };
  for (const shape_case &s : shapes) {
    case_desc c;
    c.op = bp_op_name(op);
    c.name = c.op + " specials " + operand_name(BP_TYPE_F32, s.a, s.la) + " , " + operand_name(BP_TYPE_F32, s.b, s.lb);
    c.inputs.push_back(operand(BP_TYPE_F32, s.a, s.la, special_fill(fill_kind::special)));
    // Transposed: the leaf is [ne1, ne0], so "by row" of the leaf is by
    // column of the operand; special (by element) gives the pairs there.
    c.inputs.push_back(operand(BP_TYPE_F32, s.b, s.lb,
                               special_fill(s.lb == L::transposed ? fill_kind::special : fill_kind::special_by_row)));
    c.denormals_may_flush = true;
    c.build = [op](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) -> bp_tensor * {
      switch (op) {
        case BP_OP_ADD:
          return bp_add(ctx, in[0], in[1]);
        case BP_OP_SUB:
          return bp_sub(ctx, in[0], in[1]);
        case BP_OP_MUL:
          return bp_mul(ctx, in[0], in[1]);
        default:
          return bp_div(ctx, in[0], in[1]);
      }
    };
    c.reference = ref::binary_special(op);
    out.push_back(std::move(c));
  }
}

void add_unary_special(std::vector<case_desc> &out, bp_op op, const op_args &args, const std::string &label) {
  struct shape_case {
    shape ne;
    L lay;
  };
  // Dense (with a vector body and a tail), strided, transposed.
  const shape_case shapes[] = {
      {{k_s, 3, 1, 1}, L::contiguous},
      {{k_s + 5, 2, 1, 1}, L::contiguous},
      {{k_s, 2, 1, 1}, L::strided},
      {{7, k_s, 1, 1}, L::transposed},
  };
  for (const shape_case &s : shapes) {
    case_desc c;
    c.op = bp_op_name(op);
    c.name = c.op + label + " specials " + operand_name(BP_TYPE_F32, s.ne, s.lay);
    c.inputs.push_back(operand(BP_TYPE_F32, s.ne, s.lay, special_fill(fill_kind::special)));
    c.args = args;
    c.denormals_may_flush = true;
    c.build = unary_builder(op);
    c.reference = ref::unary_special(op);
    out.push_back(std::move(c));
  }
}

// Rows of moderate values with one special each, row r holding special r.
void add_row_special(std::vector<case_desc> &out, bp_op op, const op_args &args, const std::string &label,
                     double max_abs) {
  for (const shape &ne : {shape{37, k_s, 1, 1}, shape{64, k_s, 1, 1}, shape{33, k_s, 1, 1}}) {
    const L lay = ne[0] == 33 ? L::strided : L::contiguous;
    case_desc c;
    c.op = bp_op_name(op);
    c.name = c.op + label + " specials " + operand_name(BP_TYPE_F32, ne, lay);
    fill_spec f = special_fill(fill_kind::special_in_rows);
    f.lo = -2;
    f.hi = 2;
    f.max_abs = max_abs;
    if (op == BP_OP_ARGMAX) {
      f.lo = -8;
      f.hi = 8;
      f.no_nan = true;  // ARGMAX of a row with NaN is unspecified
      c.exact = true;
    }
    c.inputs.push_back(operand(BP_TYPE_F32, ne, lay, f));
    c.args = args;
    c.denormals_may_flush = true;
    c.build = [op](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) -> bp_tensor * {
      switch (op) {
        case BP_OP_SUM_ROWS:
          return bp_sum_rows(ctx, in[0]);
        case BP_OP_MEAN:
          return bp_mean(ctx, in[0]);
        case BP_OP_ARGMAX:
          return bp_argmax(ctx, in[0]);
        case BP_OP_NORM:
          return bp_norm(ctx, in[0], a.f[0]);
        case BP_OP_RMS_NORM:
          return bp_rms_norm(ctx, in[0], a.f[0]);
        default:
          return bp_soft_max(ctx, in[0], nullptr, a.f[0]);
      }
    };
    c.reference = op == BP_OP_ARGMAX ? ref::argmax() : ref::row_special(op);
    out.push_back(std::move(c));
  }
}

}  // namespace

void add_special_cases(std::vector<case_desc> &out) {
  for_each_elementwise_op([&](bp_op op) { add_binary_special(out, op); },
                          [&](bp_op op, const op_args &a, const char *label) { add_unary_special(out, op, a, label); });

  add_row_special(out, BP_OP_SUM_ROWS, {}, "", 0);
  add_row_special(out, BP_OP_MEAN, {}, "", 0);
  add_row_special(out, BP_OP_ARGMAX, {}, "", 0);
  // NORM and RMS_NORM square the row in f32: defined while the sum of
  // squares is finite there (docs/ops.md), so magnitudes up to 1e18.
  op_args eps;
  eps.f[0] = 1e-5f;
  add_row_special(out, BP_OP_NORM, eps, " eps 1e-5", 1e18);
  add_row_special(out, BP_OP_RMS_NORM, eps, " eps 1e-5", 1e18);
  op_args sm;
  sm.f[0] = 1.0f;
  add_row_special(out, BP_OP_SOFT_MAX, sm, " scale 1", 0);
  sm.f[0] = 0.125f;
  add_row_special(out, BP_OP_SOFT_MAX, sm, " scale 0.125", 0);
}

}  // namespace bp::conformance
