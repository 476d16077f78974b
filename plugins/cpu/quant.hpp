// quant.hpp: the cpu plugin's quantized weights (GGUF block formats Q8_0,
// Q4_0, Q5_0, Q4_1, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
// MXFP4, and BF16): row (de)quantizers for GET_ROWS
// and CPY, and the integer-dot kernels of MUL_MAT with quantized a and F32 b
// (BF16 a has float kernels of its own, ops_matmul_bf16.cpp).
//
// MUL_MAT quantizes each column of b (a row of b along K) once into blocks
// of 32 int8 with a float scale (act_* below), then multiplies blocks as
// integers: a 32-value block of a times a 32-value block of b is one exact
// int32 sum, scaled by the two blocks' float scales. Every weight format is
// walked in "super-blocks" of 8 blocks of 32 (its own 256-value super-block
// for the K formats and IQ4_XS, 8 consecutive blocks for the 32-value formats), so one
// kernel shape serves them all: per block, lane-wise scales (Q2_K, Q3_K and
// Q6_K have a scale per 16 values); per super-block, one vector of offsets
// (the formats' -4, -8, -16, -32 zero points and the minimums of Q4_1, Q5_1,
// Q2_K, Q4_K and Q5_K) against the blocks' sums of b. The codebook formats
// (IQ4_NL, IQ4_XS, MXFP4) look their 4-bit codes up as int8 values.
#ifndef BP_PLUGIN_CPU_QUANT_HPP_
#define BP_PLUGIN_CPU_QUANT_HPP_

#include <cstddef>
#include <cstdint>

#include "backplane/plugin.h"

namespace bp::cpu {

enum class qtype { q8_0, q4_0, q5_0, q4_k, q6_k, q5_k, bf16, q4_1, q5_1, q2_k, q3_k, iq4_nl, iq4_xs, mxfp4 };
constexpr int kQTypes = 14;

struct qformat {
  int block_values;  // values per block: 32, 256 for the K formats, 1 for BF16
  int block_bytes;   // bytes per block
};
constexpr qformat kQFormats[kQTypes] = {{32, 34}, {32, 18}, {32, 22},  {256, 144}, {256, 210}, {256, 176}, {1, 2},
                                        {32, 20}, {32, 24}, {256, 84}, {256, 110}, {32, 18},   {256, 136}, {32, 17}};
inline const qformat &format_of(qtype q) { return kQFormats[static_cast<int>(q)]; }
inline size_t qrow_bytes(qtype q, int64_t n) {
  return static_cast<size_t>(n / format_of(q).block_values) * static_cast<size_t>(format_of(q).block_bytes);
}

// Row |n| values (a multiple of the block size) of |src| as floats, with
// the formats' reference formulas (bit-equal to the core's bp_dequantize).
void dequantize_row(qtype q, const void *src, float *dst, int64_t n);
// |n| floats (a multiple of the block size) into blocks. Q8_0, Q4_0, Q5_0
// Q4_1, Q5_1 and BF16 follow the reference rounding (bit-equal to
// bp_quantize_rows), as does MXFP4 where the block's largest magnitude is
// between 2^-125 and 2^127 (its scale exponent is clamped, not wrapped,
// outside); the K formats and IQ4 use this plugin's own plain scale
// fits: every value within half a step (plus the rounding of the f16
// scales) of its input, not bit-equal to bp_quantize_rows.
void quantize_row(qtype q, const float *src, void *dst, int64_t n);

// ---- b, quantized for the integer dots ---------------------------------
// One column of K values (a multiple of 32) takes act_col_bytes(K) bytes:
// int8 qs[nb * 32], then float d[nb], lo[nb], hi[nb] with
// nb = act_blocks(K) (K / 32 rounded up to a whole super-block of 8; the
// blocks past K are zeros). Value i of block j is d[j] * qs[32 j + i];
// lo[j] / hi[j] are d[j] times the sum of the block's first / last 16 qs.
inline int64_t act_blocks(int64_t K) { return (K / 32 + 7) / 8 * 8; }
inline size_t act_col_bytes(int64_t K) { return static_cast<size_t>(act_blocks(K)) * (32 + 3 * sizeof(float)); }
// d = max |value| / 127, qs = round(value / d): the column's values may be
// any floats (inf and NaN give a useless but harmless result).
void quantize_act_col(const float *src, int64_t K, void *col);
// One block of 32 values into |q|; returns its scale d.
float quantize_act_block(const float *x, int8_t *q);
// Where the parts of one column are, for the quantizers that fill it; the
// blocks from |full| on (past K) are zeros.
struct act_col_parts {
  int8_t *qs;
  float *d, *lo, *hi;
  int64_t blocks, full;
};
inline act_col_parts act_col_at(void *col, int64_t K) {
  const int64_t nb = act_blocks(K);
  auto *qs = static_cast<int8_t *>(col);
  float *d = reinterpret_cast<float *>(qs + nb * 32);
  return {qs, d, d + nb, d + 2 * nb, nb, K / 32};
}
inline void act_col_zero_block(const act_col_parts &c, int64_t j) {
  for (int i = 0; i < 32; ++i) c.qs[32 * j + i] = 0;
  c.d[j] = c.lo[j] = c.hi[j] = 0.0f;
}

// The column quantizers of this file and repack.hpp for one ISA, bit-equal
// to the portable ones; the three public functions call them when the
// running CPU (capped by BP_CPU_ISA) has it.
struct act_quantizers {
  void (*act_col)(const float *src, int64_t K, void *col);
  void (*ract_col)(const float *src, int64_t K, void *col);
  void (*rkact_col)(const float *src, int64_t K, void *col);
};
// nullptr where AVX2 is not built or not picked (quant_act_avx2.cpp).
const act_quantizers *act_quantizers_avx2();

// out[c * ldo + r] = dot(row r of a, column c of b) for r < rm, c < rn:
// row r at a + r * lda (bytes), column c at b + c * ldb (act_col_bytes).
// Each output is one accumulation in a fixed order whatever the tile's
// size, so any split of the rows gives the same bits.
using qtile_fn = void (*)(const char *a, size_t lda, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo);

// One ISA's tiles. rows(rn): rows of a per tile for rn columns (rn <=
// max_cols). tile(q, rm, rn) handles rm <= rows(rn) rows and rn columns.
struct qkernels {
  const char *name;
  int max_cols;
  int (*rows)(int rn);
  qtile_fn (*tile)(qtype q, int rm, int rn);
};
const qkernels &qkernels_baseline();     // quant_gemm_scalar.cpp
const qkernels &qkernels_avx2();         // quant_gemm_avx2.cpp: call only with AVX2, FMA, F16C
const qkernels &qkernels_avx512();       // quant_gemm_avx512.cpp: call only with AVX-512 F/BW/DQ/VL
const qkernels &qkernels_avx512_vnni();  // quant_gemm_avx512.cpp: and AVX512-VNNI
// Whether the CPU has AVX512-VNNI (quant_gemm_scalar.cpp).
bool cpu_has_vnni();
// The tiles cpu_isa() picks (AVX-512 with VNNI where the CPU has it).
const qkernels &qkernels_for_cpu();

// ---- the ops (ops_matmul_quant.cpp, ops_copy.cpp) -----------------------

// The format of |t|, false when it is not a quantized type.
bool qtype_of(bp_type t, qtype *out);
// True when |t| is quantized with whole blocks per row, blocks dense.
bool quant_rows_dense(const bp_tensor *t, qtype *q);
// MUL_MAT with quantized a (dense blocks, not BF16), F32 b, F32 dst with
// dense rows.
bool mul_mat_q_supports(const bp_tensor *t);
void mul_mat_q_run(const bp_tensor *t, int ith, int nth);
// MUL_MAT with BF16 a (dense rows), F32 b, F32 dst with dense rows
// (ops_matmul_bf16.cpp).
bool mul_mat_bf16_supports(const bp_tensor *t);
void mul_mat_bf16_run(const bp_tensor *t, int ith, int nth);

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_QUANT_HPP_
