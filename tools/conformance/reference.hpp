// reference.hpp: the double-precision reference of every op, written from
// the op semantics (docs/ops.md) with plain loops over logical indices. It
// reads operands as host arrays with their own layouts and shares no code
// with the library or any plugin.
#pragma once

#include "conformance/conformance.hpp"

namespace bp::conformance::ref {

// Elementwise: src1 broadcasts over src0 by repetition (index modulo its dim).
reference_fn binary(bp_op op);
reference_fn unary(bp_op op);  // NEG .. SIGMOID, SCALE (f[0]), CLAMP (f[0], f[1])

// Over dim 0: SUM_ROWS, MEAN, NORM (eps f[0]), RMS_NORM (eps f[0]), ARGMAX.
reference_fn sum_rows();
reference_fn mean();
reference_fn argmax();
reference_fn norm();
reference_fn rms_norm();
// softmax(a * f[0] + mask) over dim 0; mask (input 1, optional) rows i1,
// broadcast over dims 2 and 3.
reference_fn soft_max();

reference_fn mul_mat();
reference_fn get_rows();
// CPY of input 0 into input 1: returns input 1's whole leaf after the copy.
reference_fn cpy_into_leaf();
// SET_ROWS of input 0 into input 1 at rows input 2: input 1's whole leaf after.
reference_fn set_rows_into_leaf();
// CONT / bp_cast: logical copy of input 0 converted to args.type.
reference_fn cont();
reference_fn concat();  // dim = i[0]
reference_fn attention();  // scale f[0]; in = q, k, v[, mask] (bp_attention)
reference_fn rope();    // n_dims i[0], mode i[1], freq_base f[2], freq_scale f[3]; in[2]: freq factors

// Quantized types (reference_quant.cpp), with a bound per element: MUL_MAT
// of a quantized a (mul_mat_quant_bound), CPY into a quantized leaf and
// CONT to a quantized type (quantization_bound per written block; blocks
// the copy does not touch must keep their values exactly).
reference_fn mul_mat_quant();
reference_fn cpy_into_quant_leaf();
reference_fn cont_quant();

// The same references with a bound per element (expected::tol) from the
// stated precision of args.api's API: the special-value cases.
reference_fn unary_special(bp_op op);
reference_fn binary_special(bp_op op);
// SUM_ROWS, MEAN, NORM, RMS_NORM (eps f[0]), SOFT_MAX (no mask, scale f[0]).
reference_fn row_special(bp_op op);

}  // namespace bp::conformance::ref
