// ops_matmul.cpp: MUL_MAT. a [K, M, A2, A3] (F32/F16) x b [K, N, B2, B3]
// Products with at least 6 rows of b and 16 of a go to the packed GEMM
// (ops_matmul_packed.cpp); this file keeps the dot-product kernel below for
// the thin ones (matrix-vector products and the like), where packing costs
// more than it saves.
//
// -> dst [M, N, B2, B3] with dst[m, n] = sum_k a[k, m] * b[k, n]; a repeats
// over the batch dims (B2 % A2 == 0, B3 % A3 == 0, batch i2 uses a's
// i2 / (B2 / A2)).
//
// Layout of the work: the output is cut into tiles of kMChunk rows of a by
// kNChunk columns of b per batch; threads take contiguous ranges of tiles.
// Inside a tile, K is walked in blocks of kKBlock; rows of a and columns of b
// that are not dense F32 (F16, strided views) are converted once per tile
// into F32 scratch, then a 4x2 register micro-kernel computes partial dot
// products with 8-wide vectors, summed into the tile's accumulator. The
// micro-kernel is compiled twice (baseline x86-64 and x86-64-v3 with
// AVX2/FMA) and picked by cpu_isa() (plugins/common/isa.hpp) at run time,
// so the .so runs on any x86-64 CPU. With AVX-512 or AVX2, thin products
// with dense rows go to the dot-product tiles of matmul_dot.hpp instead
// (gemm_avx512.cpp, gemm_avx2.cpp: larger tiles, F16 widened in registers,
// the next rows of a requested ahead); this kernel keeps baseline x86-64
// and the strided or converted operands.
#include <cstring>
#include <vector>

#include "f16.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "matmul_dot.hpp"
#include "quant.hpp"
#include "repack.hpp"

namespace bp::cpu {
namespace {

constexpr int kMR = 4;  // micro-kernel rows of a
constexpr int kNR = 2;  // micro-kernel columns of b
constexpr int64_t kMChunk = 32;
constexpr int64_t kNChunk = 32;
// K is walked in blocks so the kMChunk rows of a in use (32 KiB) stay in cache
// while every column pair of the tile passes over them.
constexpr int64_t kKBlock = 256;

// out[i][j] = dot(a[i], b[j]) over |k| floats.
__attribute__((always_inline)) inline void micro_body(const float *const *a, const float *const *b, int64_t k,
                                                      float out[kMR][kNR]) {
  v8f acc[kMR][kNR];
  for (int i = 0; i < kMR; ++i)
    for (int j = 0; j < kNR; ++j) acc[i][j] = v8f{0, 0, 0, 0, 0, 0, 0, 0};
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    v8f va[kMR], vb[kNR];
    for (int i = 0; i < kMR; ++i) std::memcpy(&va[i], a[i] + p, sizeof(v8f));
    for (int j = 0; j < kNR; ++j) std::memcpy(&vb[j], b[j] + p, sizeof(v8f));
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < kNR; ++j) acc[i][j] += va[i] * vb[j];
  }
  for (int i = 0; i < kMR; ++i)
    for (int j = 0; j < kNR; ++j) {
      const v8f v = acc[i][j];
      float s = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
      for (int64_t q = p; q < k; ++q) s += a[i][q] * b[j][q];
      out[i][j] = s;
    }
}

void micro_baseline(const float *const *a, const float *const *b, int64_t k, float out[kMR][kNR]) {
  micro_body(a, b, k, out);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void micro_avx2(const float *const *a, const float *const *b, int64_t k,
                                                    float out[kMR][kNR]) {
  micro_body(a, b, k, out);
}
#endif

using micro_fn = void (*)(const float *const *, const float *const *, int64_t, float[kMR][kNR]);

micro_fn pick_micro() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (plugins::cpu_isa() >= plugins::isa_level::avx2) return micro_avx2;
#endif
  return micro_baseline;
}

// Dense F32 data along K can be used in place.
bool dense_f32_k(const bp_tensor *t) { return rows_dense_as(t, BP_TYPE_F32); }

// Pointer to row |r| (along K) of |t| at batch (i2, i3) as F32: in place, or
// converted into |scratch| (K floats).
const float *k_row(const bp_tensor *t, int64_t r, int64_t i2, int64_t i3, float *scratch) {
  const char *p = row_ptr(t, r, i2, i3);
  if (dense_f32_k(t)) return reinterpret_cast<const float *>(p);
  const int64_t k = t->ne[0];
  if (t->type == BP_TYPE_F16 && t->nb[0] == sizeof(uint16_t)) {
    plugins::f16_row_to_f32(reinterpret_cast<const uint16_t *>(p), k, scratch);
  } else if (t->type == BP_TYPE_F16) {
    for (int64_t i = 0; i < k; ++i) {
      uint16_t h;
      std::memcpy(&h, p + i * t->nb[0], sizeof h);
      scratch[i] = bp_fp16_to_fp32(h);
    }
  } else {
    for (int64_t i = 0; i < k; ++i) scratch[i] = load_f32(p + i * t->nb[0], t->type);
  }
  return scratch;
}

// BF16 a: the f32 kernels widen it as they read it, as they do F16 (the
// packed GEMM and the broadcast kernel into their panels, the dot tiles in
// registers), so it runs as fast as F16. ops_matmul_bf16.cpp's tiles keep
// what those do not take (baseline x86-64 below 48 rows of b, strided b);
// they widen each value for 2 columns, which held a 512-column product at
// 0.16 of the FMA peak.
bool bf16_runs_as_f32(const bp_tensor *t) {
  switch (plugins::cpu_isa()) {
    case plugins::isa_level::avx512:
      return mul_mat_packed_suits(t) || mul_mat_bcast_avx512_suits(t) || mul_mat_dot_suits(t);
    case plugins::isa_level::avx2:  // (with dense rows the packed GEMM starts at 48 rows of b)
      return mul_mat_packed_suits(t) || mul_mat_dot_suits(t);
    default:
      return t->ne[1] >= kMinPackedNAvx2 && mul_mat_packed_suits(t);
  }
}

}  // namespace

bool mul_mat_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  if (!has_valid_shape(t) || !has_valid_shape(a) || !has_valid_shape(b)) return false;
  if (is_repacked(a)) return mul_mat_r_supports(t);                 // ops_matmul_repacked.cpp
  if (a->type == BP_TYPE_BF16) return mul_mat_bf16_supports(t);     // ops_matmul_bf16.cpp
  if (bp_type_is_quantized(a->type)) return mul_mat_q_supports(t);  // ops_matmul_quant.cpp
  // The kernel reads any float type and any strides; these are the op
  // table's combinations.
  if (!is_float_type(a->type) || b->type != BP_TYPE_F32 || t->type != BP_TYPE_F32) return false;
  return a->ne[0] == b->ne[0] && t->ne[0] == a->ne[1] && t->ne[1] == b->ne[1] && t->ne[2] == b->ne[2] &&
         t->ne[3] == b->ne[3] && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0;
}

int64_t mul_mat_work(const bp_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] * t->src[0]->ne[0]; }

void mul_mat_run(const bp_tensor *t, int ith, int nth) {
  if (is_repacked(t->src[0])) {
    mul_mat_r_run(t, ith, nth);
    return;
  }
  const bool bf16 = t->src[0]->type == BP_TYPE_BF16;
  if (bf16 && !bf16_runs_as_f32(t)) {
    mul_mat_bf16_run(t, ith, nth);
    return;
  }
  if (!bf16 && bp_type_is_quantized(t->src[0]->type)) {
    mul_mat_q_run(t, ith, nth);
    return;
  }
  if (mul_mat_packed_suits(t)) {
    mul_mat_packed_run(t, ith, nth);
    return;
  }
  if (plugins::cpu_isa() == plugins::isa_level::avx512 && mul_mat_bcast_avx512_suits(t)) {
    mul_mat_bcast_avx512(t, ith, nth);
    return;
  }
  if (plugins::cpu_isa() == plugins::isa_level::avx512 && mul_mat_dot_suits(t)) {
    mul_mat_dot_run(t, ith, nth, dot_kernels_avx512());
    return;
  }
  if (plugins::cpu_isa() == plugins::isa_level::avx2 && mul_mat_dot_suits(t)) {
    mul_mat_dot_run(t, ith, nth, dot_kernels_avx2());
    return;
  }
  static const micro_fn micro_kernel = pick_micro();
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int64_t K = a->ne[0], M = t->ne[0], N = t->ne[1];
  const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  const int64_t m_tiles = (M + kMChunk - 1) / kMChunk, n_tiles = (N + kNChunk - 1) / kNChunk;
  const int64_t tiles_per_batch = m_tiles * n_tiles;
  const int64_t n_tiles_total = tiles_per_batch * t->ne[2] * t->ne[3];

  int64_t t0, t1;
  split_range(n_tiles_total, ith, nth, &t0, &t1);
  if (t0 >= t1) return;

  const bool pack_a = !dense_f32_k(a), pack_b = !dense_f32_k(b);
  std::vector<float> a_scratch(pack_a ? static_cast<size_t>(kMChunk * K) : 0u);
  std::vector<float> b_scratch(pack_b ? static_cast<size_t>(kNChunk * K) : 0u);
  const float *a_rows[kMChunk];
  const float *mk_a[kMR];
  const float *mk_b[kNR];
  float res[kMR][kNR];
  float acc[kMChunk][kNChunk];
  int64_t packed_m0 = -1, packed_a2 = -1, packed_a3 = -1;

  for (int64_t tile = t0; tile < t1; ++tile) {
    const int64_t batch = tile / tiles_per_batch, in_batch = tile % tiles_per_batch;
    const int64_t i2 = batch % t->ne[2], i3 = batch / t->ne[2];
    // Tiles of one batch run m-major so consecutive tiles share rows of a.
    const int64_t mt = in_batch / n_tiles, nt = in_batch % n_tiles;
    const int64_t m0 = mt * kMChunk, m1 = m0 + kMChunk < M ? m0 + kMChunk : M;
    const int64_t n0 = nt * kNChunk, n1 = n0 + kNChunk < N ? n0 + kNChunk : N;
    const int64_t a2 = i2 / r2, a3 = i3 / r3;

    // Consecutive tiles usually share their rows of a: convert them once.
    if (m0 != packed_m0 || a2 != packed_a2 || a3 != packed_a3) {
      for (int64_t m = m0; m < m1; ++m)
        a_rows[m - m0] = k_row(a, m, a2, a3, pack_a ? a_scratch.data() + (m - m0) * K : nullptr);
      packed_m0 = m0;
      packed_a2 = a2;
      packed_a3 = a3;
    }
    if (pack_b) {
      for (int64_t n = n0; n < n1; ++n) k_row(b, n, i2, i3, b_scratch.data() + (n - n0) * K);
    }
    for (int64_t i = 0; i < m1 - m0; ++i)
      for (int64_t j = 0; j < n1 - n0; ++j) acc[i][j] = 0.0f;

    for (int64_t k0 = 0; k0 < K; k0 += kKBlock) {
      const int64_t kb = K - k0 < kKBlock ? K - k0 : kKBlock;
      for (int64_t n = n0; n < n1; n += kNR) {
        for (int j = 0; j < kNR; ++j) {
          // Past the edge, repeat the last column and drop its results.
          const int64_t nn = n + j < n1 ? n + j : n1 - 1;
          mk_b[j] =
              (pack_b ? b_scratch.data() + (nn - n0) * K : reinterpret_cast<const float *>(row_ptr(b, nn, i2, i3))) +
              k0;
        }
        for (int64_t m = m0; m < m1; m += kMR) {
          for (int i = 0; i < kMR; ++i) mk_a[i] = a_rows[(m + i < m1 ? m + i : m1 - 1) - m0] + k0;
          micro_kernel(mk_a, mk_b, kb, res);
          for (int j = 0; j < kNR && n + j < n1; ++j)
            for (int i = 0; i < kMR && m + i < m1; ++i) acc[m + i - m0][n + j - n0] += res[i][j];
        }
      }
    }
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t m = m0; m < m1; ++m) {
        char *p = elem_ptr(t, m, n, i2, i3);
        if (t->type == BP_TYPE_F32) {
          std::memcpy(p, &acc[m - m0][n - n0], sizeof(float));
        } else {
          store_f32(p, t->type, acc[m - m0][n - n0]);
        }
      }
  }
}

}  // namespace bp::cpu
