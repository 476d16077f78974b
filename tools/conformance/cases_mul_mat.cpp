// cases_mul_mat.cpp: MUL_MAT f32 x f32 and f16 x f32, odd sizes, batches with
// a broadcast over dims 2 and 3, permuted and strided operands (rows dense,
// as the op requires) and transposed operands made dense with bp_cont.

#include "conformance/cases_util.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance {

namespace {

using L = layout_kind;

struct mul_mat_case {
  shape a, b;
  bp_type ta = BP_TYPE_F32;
  L la = L::contiguous, lb = L::contiguous;
};

void add(std::vector<case_desc> &out, const mul_mat_case &s) {
  case_desc c;
  c.op = "MUL_MAT";
  // A transposed operand is passed through bp_cont: MUL_MAT needs dense rows.
  const bool cont_a = s.la == L::transposed, cont_b = s.lb == L::transposed;
  c.name = "MUL_MAT " + operand_name(s.ta, s.a, s.la) + (cont_a ? " (cont)" : "") + " x " +
           operand_name(BP_TYPE_F32, s.b, s.lb) + (cont_b ? " (cont)" : "");
  c.max_nmse = s.ta == BP_TYPE_F16 ? k_tol_f16 : k_tol_f32_complex;
  c.inputs.push_back(operand(s.ta, s.a, s.la, uniform(-1, 1)));
  c.inputs.push_back(operand(BP_TYPE_F32, s.b, s.lb, uniform(-1, 1)));
  c.build = [cont_a, cont_b](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
    return bp_mul_mat(ctx, cont_a ? bp_cont(ctx, in[0]) : in[0], cont_b ? bp_cont(ctx, in[1]) : in[1]);
  };
  c.reference = ref::mul_mat();
  out.push_back(std::move(c));
}

}  // namespace

void add_mul_mat_cases(std::vector<case_desc> &out) {
  const bp_type f32 = BP_TYPE_F32, f16 = BP_TYPE_F16;
  const std::vector<mul_mat_case> cases = {
      {{1, 1, 1, 1}, {1, 1, 1, 1}},
      {{7, 1, 1, 1}, {7, 1, 1, 1}},
      {{33, 7, 1, 1}, {33, 5, 1, 1}},
      {{257, 33, 1, 1}, {257, 7, 1, 1}},
      {{33, 1, 1, 1}, {33, 257, 1, 1}},
      {{7, 257, 1, 1}, {7, 33, 1, 1}},
      {{33, 7, 3, 2}, {33, 5, 3, 2}},  // batched
      {{33, 7, 1, 1}, {33, 5, 3, 2}},  // a broadcast over dims 2 and 3
      {{33, 7, 3, 1}, {33, 5, 6, 2}},  // a repeated twice in dim 2, broadcast in 3
      {{33, 7, 1, 2}, {33, 5, 3, 2}},  // broadcast in dim 2 only
      {{33, 7, 3, 2}, {33, 5, 3, 2}, f32, L::permuted, L::strided},
      {{7, 5, 3, 2}, {7, 4, 3, 2}, f32, L::strided, L::permuted},
      {{33, 7, 1, 1}, {33, 5, 1, 1}, f32, L::transposed, L::contiguous},
      {{33, 7, 2, 1}, {33, 5, 2, 1}, f32, L::contiguous, L::transposed},
      {{257, 67, 1, 1}, {257, 33, 1, 1}},  // big enough to be split over threads
      {{65, 129, 3, 1}, {65, 33, 6, 1}, f32, L::permuted, L::contiguous},
      {{33, 20, 1, 1}, {33, 131, 1, 1}},        // few rows of a, many of b: b's rows split over threads
      {{520, 37, 1, 1}, {520, 13, 1, 1}, f16},  // three K blocks, edge panels on both sides
      {{1, 1, 1, 1}, {1, 1, 1, 1}, f16},
      {{257, 67, 1, 1}, {257, 33, 1, 1}, f16},
      {{65, 129, 1, 2}, {65, 33, 3, 2}, f16, L::strided, L::permuted},
      {{33, 7, 1, 1}, {33, 5, 1, 1}, f16},
      {{257, 33, 1, 1}, {257, 7, 1, 1}, f16},
      {{7, 257, 1, 1}, {7, 33, 1, 1}, f16},
      {{33, 7, 3, 1}, {33, 5, 6, 2}, f16},
      {{33, 7, 3, 2}, {33, 5, 3, 2}, f16, L::permuted, L::contiguous},
      {{33, 7, 1, 1}, {33, 5, 3, 1}, f16, L::strided, L::strided},
      {{33, 7, 1, 1}, {33, 5, 1, 1}, f16, L::transposed, L::transposed},
      // K a multiple of 4, few columns of b: the matrix-vector shaders
      // (Vulkan's mul_mv, mul_mv_wg with mul_mat=gpu), and the tiled ones
      // (mul_mat_nt, mul_mat_shared) past them.
      {{64, 37, 1, 1}, {64, 3, 1, 1}},
      {{256, 70, 2, 1}, {256, 5, 4, 1}, f16},
      {{64, 70, 1, 1}, {64, 33, 1, 1}},
  };
  for (const mul_mat_case &s : cases) add(out, s);
}

}  // namespace bp::conformance
