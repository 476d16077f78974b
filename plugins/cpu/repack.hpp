// repack.hpp: quantized weights in the cpu plugin's interleaved layout
// ("repacked"), the one the weight buffer type (weight_buffer.cpp) stores
// and the repacked MUL_MAT (ops_matmul_repacked.cpp) reads.
//
// A GGUF matrix keeps each row's blocks together, so a kernel working on
// several rows streams from several places and decodes each row's scales
// and nibbles on its own. The repacked layout interleaves kPackRows rows
// ("a group"): for each block index j, the group's 4 f16 scales side by
// side, then the quants arranged so one 256-bit load holds a block of two
// rows, already in the order the integer dot wants:
//   Q4_0 (72 bytes per block of the group): d[4] (f16), then for the row
//     pairs (0,1) and (2,3): 32 bytes = row 2p's 16 nibble bytes, then row
//     2p+1's. Low nibbles are values 0-15 of both rows, high ones 16-31.
//   Q8_0 (136 bytes): d[4], then per pair 64 bytes: row 2p values 0-15, row
//     2p+1 values 0-15, row 2p values 16-31, row 2p+1 values 16-31.
//   Q5_0 (88 bytes): d[4], the 4 rows' 32-bit qh words (16 bytes: bit i of
//     row r's word is bit 4 of its value i), then the nibble bytes per row
//     pair as Q4_0's (32 bytes per pair).
//   Q4_K (576 bytes per super-block of the group): d and dmin of the 4 rows
//     (16 bytes), their 12 scale bytes as three 32-bit words per row, word
//     w of the 4 rows side by side (48: one 128-bit load per word decodes
//     the 4 rows' 6-bit scales and minimums at once), then per sub-block pair s (its
//     32 nibble bytes: sub-block 2s in the low nibbles, 2s + 1 in the high)
//     and row pair p: 16 bytes of row 2p, 16 of row 2p+1 (values 0-15 of
//     both sub-blocks), then the same for values 16-31.
//   Q5_K (704 bytes): as Q4_K (d and dmin 16 bytes, scales 48), then the
//     4 rows' 32 qh bytes (128; qh byte i's bit j is bit 4 of value i of
//     sub-block j) per row pair as the nibble bytes are: 16 bytes of row 2p,
//     16 of row 2p+1 (values 0-15), then the same for values 16-31; then
//     the nibble bytes exactly as Q4_K's (512).
//   Q6_K (840 bytes per super-block of the group): the 4 rows' d (8 bytes),
//     their 16 int8 scales (64), then the 4 chunks of 32 ql bytes and the 2
//     chunks of 32 qh bytes, each per row pair as Q4_K's nibble bytes are.
// A group takes exactly the bytes of its 4 rows in the file, at the same
// place (group g starts where row 4g started), so offsets, sizes and the
// rows past the last whole group (kept as they are in the file) do not
// change: repacking is a permutation inside each group's bytes.
#ifndef BP_PLUGIN_CPU_REPACK_HPP_
#define BP_PLUGIN_CPU_REPACK_HPP_

#include <cstddef>
#include <cstdint>

#include "quant.hpp"

namespace bp::cpu {

constexpr int kPackRows = 4;

// Q4_K and Q5_K: where 32-bit word w (< 3) of row r's 12 packed scale bytes
// sits in a super-block's record (the layout above).
constexpr int kscale_word_at(int w, int r) { return 16 + 16 * w + 4 * r; }

// True for the formats with a repacked layout (Q4_0, Q8_0, Q5_0, Q4_K, Q5_K,
// Q6_K).
bool repack_format(qtype q);
// The rows of a tensor of |q| with |k| values per row and |rows| rows per
// matrix that are repacked: the whole groups (rows - rows % kPackRows).
inline int64_t packed_rows(int64_t rows) { return rows - rows % kPackRows; }

// One group: kPackRows rows of |k| values (dense, qrow_bytes(q, k) apart)
// into the repacked layout, and back. |plain| and |packed| do not overlap.
void pack_group(qtype q, const uint8_t *plain, uint8_t *packed, int64_t k);
void unpack_group(qtype q, const uint8_t *packed, uint8_t *plain, int64_t k);

// ---- the weight buffer type (weight_buffer.cpp) --------------------------
// True when |t|'s memory in a weight buffer would be repacked: a format
// of repack_format, whole blocks, dense, at least one group.
bool repacked_layout(const bp_tensor *t);
// True when |t| itself lives in a cpu weight buffer (its buffer_ctx).
bool in_weight_buffer(const bp_tensor *t);
// True when |t|'s bytes are in the repacked layout: in a weight buffer and
// its root (the tensor it views, or itself) has repacked_layout. Only
// MUL_MAT reads such a tensor, as its a, and only unviewed.
bool is_repacked(const bp_tensor *t);
bp_buffer_type_ref weight_buffer_type_ref();
bool is_weight_buffer_type(bp_buffer_type_ref buft);

// MUL_MAT with a repacked (is_repacked, not a view), F32 b, F32 dst with
// dense rows (ops_matmul_repacked.cpp).
bool mul_mat_r_supports(const bp_tensor *t);
void mul_mat_r_run(const bp_tensor *t, int ith, int nth);

// ---- b for the repacked products ---------------------------------------
// One column of K values (a multiple of 32): int8 qs[nb * 32], float
// d[nb], int32 sums[nb * 4], float bsum[nb] with nb = K / 32. Value i of
// block j is d[j] * qs[32 j + i]; sums[4 j + l] = sum of qs[32 j + 4 l + t]
// and qs[32 j + 16 + 4 l + t] over t < 4 (the int32 lane l of a pair's dot),
// which takes Q4_0's and Q5_0's zero points out of the dot exactly; bsum[j] =
// d[j] times the block's sum (Q4_K's and Q5_K's minimums).
inline size_t ract_col_bytes(int64_t K) {
  const size_t nb = static_cast<size_t>(K / 32);
  return (nb * (32 + 2 * sizeof(float) + 4 * sizeof(int32_t)) + 63) / 64 * 64;
}
// Quantizes like quantize_act_col (d = max |value| / 127).
void quantize_ract_col(const float *src, int64_t K, void *col);
// Where the parts of one column are, for the quantizers that fill it.
struct ract_col_parts {
  int8_t *qs;
  float *d;
  int32_t *sums;
  float *bsum;
  int64_t blocks;
};
inline ract_col_parts ract_col_at(void *col, int64_t K) {
  const int64_t nb = K / 32;
  auto *qs = static_cast<int8_t *>(col);
  float *d = reinterpret_cast<float *>(qs + nb * 32);
  int32_t *sums = reinterpret_cast<int32_t *>(d + nb);
  return {qs, d, sums, reinterpret_cast<float *>(sums + 4 * nb), nb};
}

// ---- b for the repacked K-quant products (Q4_K, Q5_K, Q6_K) --------------
// One column of K values (a multiple of 256) with one scale per super-block
// of 256, so a tile sums a whole super-block of a row in integers and
// converts to float once: int8 qs[K], float d[K / 256], int16 sums[K / 16]
// (each 16 values' qs summed: Q4_K's minimums and Q6_K's -32 leave through
// them exactly). Value i is d[i / 256] * qs[i].
inline size_t rkact_col_bytes(int64_t K) {
  const size_t k = static_cast<size_t>(K);
  return (k + k / 256 * sizeof(float) + k / 16 * sizeof(int16_t) + 63) / 64 * 64;
}
// d = max |value| / 127 over each super-block, values rounded to nearest.
void quantize_rkact_col(const float *src, int64_t K, void *col);
// Where the parts of one column are, for the quantizers that fill it.
struct rkact_col_parts {
  int8_t *qs;
  float *d;
  int16_t *sums;
  int64_t supers;
};
inline rkact_col_parts rkact_col_at(void *col, int64_t K) {
  auto *qs = static_cast<int8_t *>(col);
  float *d = reinterpret_cast<float *>(qs + K);
  return {qs, d, reinterpret_cast<int16_t *>(d + K / 256), K / 256};
}
// Whether |q|'s repacked tiles read rkact columns (else ract ones).
inline bool reads_rkact(qtype q) { return q == qtype::q4_k || q == qtype::q5_k || q == qtype::q6_k; }

// out[c * ldo + r] = dot(row r of the group, column c) for r < kPackRows,
// c < rn: the group at |group|, b's columns from |b| in the layout of the
// tile set's quantize_b, |ldb| its col_bytes.
using rtile_fn = void (*)(const uint8_t *group, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo);

// One ISA's tiles, and the layout of b they read, for a product of N
// columns of b.
struct rkernels {
  const char *name;
  // The widest tile.
  int (*max_cols)(qtype q, int64_t N);
  // b's quantized buffer: column n starts n times this many bytes in. A
  // layout that interleaves columns in groups counts a group's bytes per
  // column, and then reads N rounded up to max_cols columns, zeroed.
  size_t (*col_bytes)(qtype q, int64_t K, int64_t N);
  // Quantizes column n, K values at x, into |cols|; |scratch| holds
  // column_scratch_bytes(K).
  void (*quantize_b)(qtype q, int64_t N, const float *x, int64_t K, char *scratch, char *cols, int64_t n);
  rtile_fn (*tile)(qtype q, int64_t N, int rn);
  // How many groups one tile covers (its rows over kPackRows): the product
  // deals out rows in units of that many groups, and a last unit of fewer
  // groups is padded with zero records. Null: 1.
  int (*tile_groups)(qtype q, int64_t N) = nullptr;
};
// The b layout of every tile set but the AVX-512 VNNI ones' wide tiles:
// one ract column (rkact for reads_rkact formats) after another.
size_t column_bytes(qtype q, int64_t K, int64_t N);
void quantize_column(qtype q, int64_t N, const float *x, int64_t K, char *scratch, char *cols, int64_t n);
inline size_t column_scratch_bytes(int64_t K) {
  return ract_col_bytes(K) > rkact_col_bytes(K) ? ract_col_bytes(K) : rkact_col_bytes(K);
}
const rkernels &rkernels_baseline();  // repack_gemm_scalar.cpp: the reference
const rkernels &rkernels_avx2();      // repack_gemm_avx2.cpp: call only with AVX2, FMA, F16C
// repack_gemm_avx512.cpp: call only with AVX-512 (F, BW, DQ, VL) and VNNI.
const rkernels &rkernels_avx512_vnni();
// repack_gemm_avx512_k.cpp: the same for the K-quants only (reads_rkact),
// which rkernels_avx512_vnni hands them to.
const rkernels &rkernels_avx512_vnni_k();
// repack_gemm_amx.cpp: AMX int8 tiles of 16 rows for Q4_0, Q8_0, Q5_0, Q4_K
// and Q5_K with many columns, the AVX-512 VNNI tiles for the rest; call only where
// plugins::cpu_amx() and VNNI.
const rkernels &rkernels_amx();
// repack_gemm_amx_k.cpp: the AMX tiles for Q4_K and Q5_K with 16 or more
// columns, which rkernels_amx hands them to.
const rkernels &rkernels_amx_k();
// AMX where plugins::cpu_amx() (and VNNI), else AVX-512 VNNI where the CPU
// has it and cpu_isa() allows AVX-512, else AVX2 where it has that (AVX-512
// CPUs without VNNI run the AVX2 tiles), else baseline.
const rkernels &rkernels_for_cpu();

}  // namespace bp::cpu

#endif  // BP_PLUGIN_CPU_REPACK_HPP_
