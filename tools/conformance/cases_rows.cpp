// cases_rows.cpp: the ops that work along dim 0: SUM_ROWS, MEAN, ARGMAX,
// NORM, RMS_NORM and SOFT_MAX (no mask, f32 and f16 masks, masks with more
// rows, broadcast over dims 2 and 3, causal masks with -inf).

#include <cstdio>

#include "conformance/cases_util.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance {

namespace {

using L = layout_kind;

struct row_shape {
  shape ne;
  L lay = L::contiguous;
};

const std::vector<row_shape> &row_shapes() {
  static const std::vector<row_shape> shapes = {
      {{1, 1, 1, 1}},
      {{7, 1, 1, 1}},
      {{257, 3, 1, 1}},
      {{33, 7, 3, 2}},
      {{33, 7, 1, 1}, L::transposed},
      {{7, 5, 3, 2}, L::strided},
      {{7, 5, 3, 2}, L::shuffled},
      {{257, 2, 1, 1}, L::permuted},
      {{7, 257, 1, 1}},
      {{1, 33, 7, 1}},
      {{33, 1, 7, 1}, L::transposed},
      {{257, 67, 1, 1}},
      {{7, 2053, 2, 1}, L::strided},  // > 16k elements: split over threads
  };
  return shapes;
}

void add_reduction(std::vector<case_desc> &out, bp_op op, reference_fn ref, const op_args &args,
                   const std::string &label, fill_spec fill, double tol, bool exact) {
  for (const row_shape &s : row_shapes()) {
    case_desc c;
    c.op = bp_op_name(op);
    c.name = c.op + label + " " + operand_name(BP_TYPE_F32, s.ne, s.lay);
    c.max_nmse = tol;
    c.exact = exact;
    c.inputs.push_back(operand(BP_TYPE_F32, s.ne, s.lay, fill));
    c.args = args;
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
        default:
          return bp_rms_norm(ctx, in[0], a.f[0]);
      }
    };
    c.reference = ref;
    out.push_back(std::move(c));
  }
}

struct soft_max_case {
  shape a;
  L la = L::contiguous;
  bool has_mask = false;
  shape mask{1, 1, 1, 1};
  bp_type mask_type = BP_TYPE_F32;
  L lmask = L::contiguous;
  bool causal = false;
  float scale = 1.0f;
};

void add_soft_max(std::vector<case_desc> &out) {
  const std::vector<soft_max_case> cases = {
      {{1, 1, 1, 1}},
      {{7, 1, 1, 1}},
      {{33, 7, 1, 1}},
      {{257, 5, 1, 1}, L::contiguous, false, {}, BP_TYPE_F32, L::contiguous, false, 0.125f},
      {{33, 7, 3, 2}},
      {{33, 7, 1, 1}, L::transposed},
      {{7, 5, 3, 2}, L::strided, false, {}, BP_TYPE_F32, L::contiguous, false, 0.5f},
      {{33, 7, 1, 1}, L::contiguous, true, {33, 7, 1, 1}},
      {{33, 7, 1, 1}, L::contiguous, true, {33, 7, 1, 1}, BP_TYPE_F16, L::contiguous, false, 0.25f},
      {{33, 7, 3, 2}, L::contiguous, true, {33, 7, 1, 1}},               // broadcast over 2 and 3
      {{33, 7, 3, 2}, L::contiguous, true, {33, 7, 3, 1}, BP_TYPE_F16},  // broadcast over 3
      {{33, 7, 1, 1}, L::contiguous, true, {33, 9, 1, 1}},               // more mask rows than a
      {{33, 7, 1, 1}, L::contiguous, true, {33, 7, 1, 1}, BP_TYPE_F32, L::contiguous, true},
      {{257, 33, 2, 1}, L::contiguous, true, {257, 33, 1, 1}, BP_TYPE_F16, L::contiguous, true, 0.125f},
      {{7, 5, 3, 2}, L::permuted, true, {7, 5, 3, 2}, BP_TYPE_F32, L::strided},
      {{7, 257, 1, 1}, L::contiguous, true, {7, 257, 1, 1}, BP_TYPE_F16},
      {{257, 67, 2, 1}, L::contiguous, true, {257, 67, 1, 1}, BP_TYPE_F32, L::contiguous, true, 0.125f},
      {{7, 2053, 2, 1}, L::strided, false},
      // mask taller than wide: the first rows are fully masked and must give zeros
      {{7, 9, 2, 1}, L::contiguous, true, {7, 9, 1, 1}, BP_TYPE_F32, L::contiguous, true},
      {{7, 9, 1, 1}, L::contiguous, true, {7, 9, 1, 1}, BP_TYPE_F16, L::contiguous, true},
  };
  for (const soft_max_case &s : cases) {
    case_desc c;
    c.op = "SOFT_MAX";
    c.name = "SOFT_MAX " + operand_name(BP_TYPE_F32, s.a, s.la);
    if (s.has_mask)
      c.name += std::string(" mask ") + (s.causal ? "causal " : "") + operand_name(s.mask_type, s.mask, s.lmask);
    char scale[32];
    std::snprintf(scale, sizeof scale, " scale %g", static_cast<double>(s.scale));
    c.name += scale;
    // An f16 mask converts to f32 exactly: no looser bound than an f32 mask.
    c.max_nmse = k_tol_f32_complex;
    c.inputs.push_back(operand(BP_TYPE_F32, s.a, s.la, uniform(-4, 4)));
    if (s.has_mask)
      c.inputs.push_back(operand(s.mask_type, s.mask, s.lmask, s.causal ? causal_mask() : uniform(-2, 0)));
    c.args.f[0] = s.scale;
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) {
      return bp_soft_max(ctx, in[0], in.size() > 1 ? in[1] : nullptr, a.f[0]);
    };
    c.reference = ref::soft_max();
    out.push_back(std::move(c));
  }
}

}  // namespace

void add_row_cases(std::vector<case_desc> &out) {
  add_reduction(out, BP_OP_SUM_ROWS, ref::sum_rows(), {}, "", uniform(-2, 2), k_tol_f32, false);
  add_reduction(out, BP_OP_MEAN, ref::mean(), {}, "", uniform(-2, 2), k_tol_f32, false);
  add_reduction(out, BP_OP_ARGMAX, ref::argmax(), {}, "", distinct(-8, 8), 0, true);
  // Few distinct values: ties everywhere, and the first maximum must win.
  add_reduction(out, BP_OP_ARGMAX, ref::argmax(), {}, " ties", integers(-2, 2), 0, true);
  op_args eps;
  eps.f[0] = 1e-5f;
  add_reduction(out, BP_OP_NORM, ref::norm(), eps, " eps 1e-5", uniform(-3, 5), k_tol_f32_complex, false);
  add_reduction(out, BP_OP_RMS_NORM, ref::rms_norm(), eps, " eps 1e-5", uniform(-3, 5), k_tol_f32_complex, false);
  eps.f[0] = 0.5f;  // large enough to change the result: a dropped eps shows
  add_reduction(out, BP_OP_RMS_NORM, ref::rms_norm(), eps, " eps 0.5", uniform(-1, 1), k_tol_f32_complex, false);
  add_soft_max(out);
}

}  // namespace bp::conformance
