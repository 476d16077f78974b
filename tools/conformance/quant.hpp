// quant.hpp: the suite's own reading of the quantized block formats and the
// error bounds its quantized cases compare with (docs/ops.md, "Quantized
// types: tolerances"). Written from the format description (docs/types.md)
// and independent of core/quant, whose dequantizer is under test: the two
// meet only in tests/tools/quant_reference_test.cpp, which checks both
// against llama.cpp's golden data.
#pragma once

#include <cstdint>
#include <vector>

#include "conformance/conformance.hpp"

namespace bp::conformance {

// The |n| values (a multiple of the block size) that |bytes| of |type| hold,
// in double; every value is also exact in f32. Any type: f32 and f16 read as
// such.
std::vector<double> dequantize_blocks(bp_type type, const uint8_t *bytes, int64_t n);

// An upper bound on |dequantize(quantize(x)) - x| per element of |x| (n a
// multiple of the block size), for any quantizer that picks each block's
// scales near the best ones, llama.cpp's reference and the usual GPU
// kernels included. 0 for f32.
std::vector<double> quantization_bound(bp_type type, const double *x, int64_t n);

// The bound on |y - sum_k w[k] b[k]| of one MUL_MAT output of a quantized
// weight row |w| (already dequantized) and an f32 row |b| of length |k|: a
// backend may quantize b to 8 bits per block of the weight's block size
// (scale amax / 127, possibly stored as f16), round w and b to f16, and
// accumulates in f32.
double mul_mat_quant_bound(bp_type weight_type, const double *w, const double *b, int64_t k);

// A leaf of quantized |spec.type|: the seeded floats of |spec.fill|
// quantized row by row with bp_quantize_rows (any valid bytes would do; these
// resemble real weights), and those bytes' values read back by
// dequantize_blocks into |values|.
std::vector<uint8_t> make_quantized_leaf(const input_spec &spec, uint64_t seed, std::vector<double> &values);

}  // namespace bp::conformance
