// cases_util.hpp: small helpers the case lists share: operands in a given
// layout (contiguous, transposed, permuted, a strided window of a bigger
// tensor), shape strings for case names, and the per-family case lists.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "conformance/conformance.hpp"

namespace bp::conformance {

using shape = std::array<int64_t, 4>;

// How an operand's elements sit in memory. Each gives the same logical shape.
enum class layout_kind {
  contiguous,
  transposed,  // leaf [ne1, ne0, ...] then bp_transpose: rows are not dense
  permuted,    // leaf [ne0, ne2, ne1, ne3] then bp_permute(0,2,1,3): dense rows
  shuffled,    // every dim moved (bp_permute(1,3,0,2)): nothing dense
  strided      // a window of a bigger leaf via bp_view_4d, with an offset
};

// An operand of logical shape |ne| laid out as |lay|, filled by |fill|.
input_spec operand(bp_type type, shape ne, layout_kind lay = layout_kind::contiguous, fill_spec fill = {});

// "[33,7,1,1]".
std::string shape_name(const shape &ne);
// "" for contiguous, " transposed" etc. otherwise.
std::string layout_name(layout_kind lay);
// "f32 [33,7,1,1] transposed".
std::string operand_name(bp_type type, const shape &ne, layout_kind lay);

// Ranges.
inline fill_spec uniform(double lo, double hi) { return {fill_kind::uniform, lo, hi}; }
inline fill_spec away_from_zero(double lo, double hi) { return {fill_kind::away_from_zero, lo, hi}; }
inline fill_spec integers(double lo, double hi) { return {fill_kind::integers, lo, hi}; }
inline fill_spec distinct(double lo, double hi) { return {fill_kind::distinct, lo, hi}; }
inline fill_spec causal_mask() { return {fill_kind::causal_mask, 0, 0}; }

// Tolerances (max NMSE).
constexpr double k_tol_f32 = 1e-7;          // elementwise and reductions in f32
constexpr double k_tol_f32_complex = 1e-6;  // softmax, norms, rope, mul_mat f32
constexpr double k_tol_f16 = 5e-4;          // MUL_MAT f16 x f32 (a backend may round b to f16)
// Elementwise ops on f16: the result differs from the rounded reference by an
// ulp at most (NMSE ~1e-7), so a looser bound would hide real errors.
constexpr double k_tol_f16_elementwise = 1e-5;
constexpr double k_tol_convert = 1e-6;  // pure f32 <-> f16 rounding

// The node of SCALE, CLAMP (parameters from op_args) or a unary op on in[0].
build_fn unary_builder(bp_op op);

// Every elementwise op once, with the parameters the suite checks it at: the
// binary ops through |binary|, SCALE, CLAMP and the unary ops through |unary|
// with their op_args and a label for the case name. The ordinary and the
// special-value lists both walk it, so an op added here gets both.
template <typename Binary, typename Unary>
void for_each_elementwise_op(Binary binary, Unary unary) {
  for (bp_op op : {BP_OP_ADD, BP_OP_SUB, BP_OP_MUL, BP_OP_DIV}) binary(op);
  op_args scale;
  scale.f[0] = 0.37f;
  unary(BP_OP_SCALE, scale, " 0.37");
  scale.f[0] = -2.0f;
  unary(BP_OP_SCALE, scale, " -2");
  op_args clamp;
  clamp.f[0] = -1.5f;
  clamp.f[1] = 0.75f;
  unary(BP_OP_CLAMP, clamp, " [-1.5,0.75]");
  for (bp_op op : {BP_OP_NEG, BP_OP_ABS, BP_OP_SQR, BP_OP_SQRT, BP_OP_EXP, BP_OP_RELU, BP_OP_GELU, BP_OP_SILU,
                   BP_OP_TANH, BP_OP_SIGMOID})
    unary(op, op_args{}, "");
}

// The case lists, one per family (cases_*.cpp).
void add_elementwise_cases(std::vector<case_desc> &out);
void add_row_cases(std::vector<case_desc> &out);
void add_mul_mat_cases(std::vector<case_desc> &out);
void add_data_cases(std::vector<case_desc> &out);
void add_rope_cases(std::vector<case_desc> &out);
void add_attention_cases(std::vector<case_desc> &out);
void add_special_cases(std::vector<case_desc> &out);
void add_quant_cases(std::vector<case_desc> &out);  // feature "quant"

}  // namespace bp::conformance
