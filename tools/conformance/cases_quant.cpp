// cases_quant.cpp: the quantized types Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, Q5_K,
// BF16, Q4_1, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4: MUL_MAT of quantized weights by f32 (K of 1, 2 and 7 blocks,
// or of 37 values for BF16, whose blocks are single values; odd M and N, batches, broadcasts, block-aligned windows and
// permuted weights, non-contiguous b), GET_ROWS of a quantized table, and CPY / CONT from f32 into each type. All carry
// the feature "quant".
//
// Tolerances (docs/ops.md): MUL_MAT per element by mul_mat_quant_bound (a
// backend may quantize b to 8 bits per block); GET_ROWS exact (each
// dequantized value is one f32 rounding of its exact value); CPY / CONT compare the dequantized
// result with the f32 source within each block's quantization bound, not
// bytes, so any good quantizer passes and llama.cpp's bytes are not required
// of a GPU.

#include "conformance/cases_util.hpp"
#include "conformance/reference.hpp"

namespace bp::conformance {

namespace {

using L = layout_kind;
constexpr bp_type f32 = BP_TYPE_F32, i32 = BP_TYPE_I32;
const bp_type k_quant_types[] = {BP_TYPE_Q8_0, BP_TYPE_Q4_0,   BP_TYPE_Q5_0,   BP_TYPE_Q4_K, BP_TYPE_Q6_K,
                                 BP_TYPE_Q5_K, BP_TYPE_BF16,   BP_TYPE_Q4_1,   BP_TYPE_Q5_1, BP_TYPE_Q2_K,
                                 BP_TYPE_Q3_K, BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS, BP_TYPE_MXFP4};

// The unit of the cases' row lengths: a block, or for BF16 (a block of one
// value) 37 values, so K has a tail past any vector width.
int64_t unit_of(bp_type t) { return bp_type_block_size(t) > 1 ? bp_type_block_size(t) : 37; }

case_desc quant_case(const char *op, std::string name) {
  case_desc c;
  c.op = op;
  c.name = std::move(name);
  c.feature = "quant";
  return c;
}

void add_mul_mat(std::vector<case_desc> &out, bp_type t) {
  const int64_t B = unit_of(t);
  struct mm {
    shape a, b;
    L la = L::contiguous, lb = L::contiguous;
  };
  const std::vector<mm> cases = {
      {{B, 7, 1, 1}, {B, 5, 1, 1}},                                      // one block, odd tails
      {{2 * B, 33, 1, 1}, {2 * B, 13, 1, 1}},                            // two blocks
      {{7 * B, 17, 1, 1}, {7 * B, 3, 1, 1}},                             // seven blocks
      {{2 * B, 9, 1, 1}, {2 * B, 1, 1, 1}},                              // a vector
      {{B, 1, 1, 1}, {B, 7, 1, 1}},                                      // one weight row
      {{2 * B, 7, 3, 2}, {2 * B, 5, 3, 2}},                              // batched
      {{2 * B, 7, 1, 1}, {2 * B, 5, 3, 2}},                              // a broadcast over dims 2 and 3
      {{B, 7, 3, 1}, {B, 5, 6, 2}},                                      // a repeated in dim 2, broadcast in 3
      {{2 * B, 7, 2, 1}, {2 * B, 5, 2, 1}, L::strided, L::contiguous},   // a block-aligned window
      {{B, 7, 3, 2}, {B, 5, 3, 2}, L::permuted, L::strided},             // non-contiguous a and b
      {{2 * B, 9, 1, 1}, {2 * B, 5, 3, 1}, L::contiguous, L::permuted},  // non-contiguous b
      {{2 * B, 67, 1, 1}, {2 * B, 33, 1, 1}},                            // split over threads
  };
  for (const mm &s : cases) {
    case_desc c = quant_case("MUL_MAT", "MUL_MAT " + operand_name(t, s.a, s.la) + " x " + operand_name(f32, s.b, s.lb));
    c.inputs.push_back(operand(t, s.a, s.la, uniform(-1, 1)));
    c.inputs.push_back(operand(f32, s.b, s.lb, uniform(-1, 1)));
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
      return bp_mul_mat(ctx, in[0], in[1]);
    };
    c.reference = ref::mul_mat_quant();
    // The weights as a model loads them: the same product from the weight
    // buffer type, where the device has one (an unviewed a only).
    if (s.la == L::contiguous) {
      case_desc w = c;
      w.name += " (weight buffer)";
      w.weight_buffer = true;
      out.push_back(std::move(w));
    }
    out.push_back(std::move(c));
  }
}

void add_get_rows(std::vector<case_desc> &out, bp_type t) {
  const int64_t B = unit_of(t);
  struct gr {
    shape a;
    int64_t n;
    L la = L::contiguous;
  };
  const std::vector<gr> cases = {
      {{2 * B, 9, 1, 1}, 7},
      {{B, 5, 3, 2}, 4},
      {{2 * B, 9, 2, 1}, 7, L::strided},
      {{B, 5, 3, 2}, 4, L::permuted},
  };
  for (const gr &s : cases) {
    const shape ids{s.n, s.a[2], s.a[3], 1};
    case_desc c = quant_case(
        "GET_ROWS", "GET_ROWS " + operand_name(t, s.a, s.la) + " ids " + operand_name(i32, ids, L::contiguous));
    // Each dequantized value is one f32 rounding of its exact value
    // (docs/types.md): every f32 dequantizer gives the same floats.
    c.exact = true;
    c.max_nmse = 0;
    c.inputs.push_back(operand(t, s.a, s.la, uniform(-2, 2)));
    c.inputs.push_back(operand(i32, ids, L::contiguous, integers(0, static_cast<double>(s.a[1] - 1))));
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
      return bp_get_rows(ctx, in[0], in[1]);
    };
    c.reference = ref::get_rows();
    out.push_back(std::move(c));
  }
}

void add_cpy(std::vector<case_desc> &out, bp_type t) {
  const int64_t B = unit_of(t);
  struct cp {
    shape ne;
    L ls, ld;
  };
  const std::vector<cp> cases = {
      {{2 * B, 7, 1, 1}, L::contiguous, L::contiguous},
      {{B, 5, 3, 2}, L::permuted, L::contiguous},
      {{B, 7, 2, 1}, L::transposed, L::strided},  // into a window: the blocks around it must not change
      {{7 * B, 3, 1, 1}, L::strided, L::contiguous},
  };
  for (const cp &s : cases) {
    case_desc c = quant_case("CPY", "CPY " + operand_name(f32, s.ne, s.ls) + " -> " + operand_name(t, s.ne, s.ld));
    c.inputs.push_back(operand(f32, s.ne, s.ls, uniform(-3, 3)));
    c.inputs.push_back(operand(t, s.ne, s.ld, uniform(-3, 3)));
    c.readback_input = 1;
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &) {
      return bp_cpy(ctx, in[0], in[1]);
    };
    c.reference = ref::cpy_into_quant_leaf();
    out.push_back(std::move(c));
  }
}

void add_cont(std::vector<case_desc> &out, bp_type t) {
  const int64_t B = unit_of(t);
  struct ct {
    shape ne;
    L lay;
  };
  const std::vector<ct> cases = {{{2 * B, 7, 1, 1}, L::contiguous}, {{B, 5, 3, 2}, L::shuffled}};
  for (const ct &s : cases) {
    case_desc c =
        quant_case("CONT", "CONT cast to " + std::string(bp_type_name(t)) + " " + operand_name(f32, s.ne, s.lay));
    c.inputs.push_back(operand(f32, s.ne, s.lay, uniform(-3, 3)));
    c.args.type = t;
    c.build = [](bp_context *ctx, const std::vector<bp_tensor *> &in, const op_args &a) {
      return bp_cast(ctx, in[0], a.type);
    };
    c.reference = ref::cont_quant();
    out.push_back(std::move(c));
  }
}

}  // namespace

void add_quant_cases(std::vector<case_desc> &out) {
  for (bp_type t : k_quant_types) {
    add_mul_mat(out, t);
    add_get_rows(out, t);
    add_cpy(out, t);
    add_cont(out, t);
  }
}

}  // namespace bp::conformance
