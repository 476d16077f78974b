// ops_matmul_bf16.cpp: MUL_MAT with BF16 a (dense rows) and F32 b:
// a [K, M, A2, A3] x b [K, N, B2, B3] -> dst [M, N, B2, B3], a repeating
// over b's batch dims as in ops_matmul.cpp.
//
// A bf16 is the top half of an f32, so widening it is a 16-bit shift and
// exact: each product is the f32 product of the weight's exact value and
// b's value, summed in f32 (eight lanes, then the lanes in a fixed order,
// then the K % 8 tail). b is used as it is (no 8-bit rounding as the block
// types' integer dots do).
//
// Threads take ranges of rows of a in units of the tile's rows, so every
// output is written by one thread with one kind of tile and its bits do not
// depend on the thread count. Inside a thread: blocks of kRowBlock rows of
// a against chunks of about kColChunkBytes of b's columns, tiles of
// kTileRows x kTileCols inside. The tiles are compiled twice, for the
// baseline ISA and for AVX2 + FMA (picked by cpu_isa()), from one body of
// GCC vector code.
#include <algorithm>
#include <cstring>
#include <vector>

#include "isa.hpp"
#include "kernels.hpp"
#include "quant.hpp"
#include "quant_blocks.hpp"

namespace bp::cpu {
namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));

constexpr int kTileRows = 4, kTileCols = 2;
constexpr int64_t kRowBlock = 32;
constexpr size_t kColChunkBytes = 256 * 1024;

// out[c * ldo + r] = dot(a[r], b[c]) over K values, r < RM, c < RN.
template <int RM, int RN>
__attribute__((always_inline)) inline void tile_body(const uint16_t *const *a, const float *const *b, int64_t K,
                                                     float *out, int64_t ldo) {
  v8f acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) acc[r][c] = v8f{0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    v8f va[RM], vb[RN];
    for (int r = 0; r < RM; ++r) {
      v8h h;
      std::memcpy(&h, a[r] + k, sizeof h);
      const v8u wide = __builtin_convertvector(h, v8u) << 16;
      std::memcpy(&va[r], &wide, sizeof wide);
    }
    for (int c = 0; c < RN; ++c) std::memcpy(&vb[c], b[c] + k, sizeof(v8f));
    for (int r = 0; r < RM; ++r)
      for (int c = 0; c < RN; ++c) acc[r][c] += va[r] * vb[c];
  }
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) {
      const v8f v = acc[r][c];
      float s = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
      for (int64_t q = k; q < K; ++q) s += qblock::bf16_to_f32(a[r][q]) * b[c][q];
      out[c * ldo + r] = s;
    }
}

using tile_fn = void (*)(const uint16_t *const *, const float *const *, int64_t, float *, int64_t);

template <int RM, int RN>
void tile_baseline(const uint16_t *const *a, const float *const *b, int64_t K, float *out, int64_t ldo) {
  tile_body<RM, RN>(a, b, K, out, ldo);
}

#if defined(__x86_64__) && defined(__GNUC__)
template <int RM, int RN>
__attribute__((target("avx2,fma"))) void tile_avx2(const uint16_t *const *a, const float *const *b, int64_t K,
                                                   float *out, int64_t ldo) {
  tile_body<RM, RN>(a, b, K, out, ldo);
}
#endif

// [0]: kTileRows rows, [1]: one row; by columns - 1.
struct tile_set {
  tile_fn t[2][kTileCols];
};

const tile_set &pick_tiles() {
  static const tile_set baseline = {
      {{tile_baseline<kTileRows, 1>, tile_baseline<kTileRows, 2>}, {tile_baseline<1, 1>, tile_baseline<1, 2>}}};
#if defined(__x86_64__) && defined(__GNUC__)
  static const tile_set avx2 = {
      {{tile_avx2<kTileRows, 1>, tile_avx2<kTileRows, 2>}, {tile_avx2<1, 1>, tile_avx2<1, 2>}}};
  if (plugins::cpu_isa() >= plugins::isa_level::avx2) return avx2;
#endif
  return baseline;
}

}  // namespace

bool mul_mat_bf16_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  if (a->type != BP_TYPE_BF16 || a->nb[0] != sizeof(uint16_t) || b->type != BP_TYPE_F32 || t->type != BP_TYPE_F32)
    return false;
  return t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 && a->ne[0] == b->ne[0] && t->ne[0] == a->ne[1] &&
         t->ne[1] == b->ne[1] && t->ne[2] == b->ne[2] && t->ne[3] == b->ne[3] && b->ne[2] % a->ne[2] == 0 &&
         b->ne[3] % a->ne[3] == 0;
}

void mul_mat_bf16_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  static const tile_set &k = pick_tiles();
  const int64_t K = a->ne[0], M = t->ne[0], N = t->ne[1];
  const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  int64_t u0, u1;
  split_range((M + kTileRows - 1) / kTileRows, ith, nth, &u0, &u1);
  const int64_t m0 = u0 * kTileRows, m1 = std::min(u1 * kTileRows, M);
  if (m0 >= m1) return;

  // Columns of b in place where they are dense F32, else converted once per batch.
  const bool b_dense = f32_rows(b);
  std::vector<float> b_scratch(b_dense ? 0u : static_cast<size_t>(K * N));
  std::vector<const float *> cols(static_cast<size_t>(N));
  const int64_t chunk =
      std::max<int64_t>(kTileCols, static_cast<int64_t>(kColChunkBytes / (static_cast<size_t>(K) * sizeof(float))) /
                                       kTileCols * kTileCols);
  const int64_t ldo = static_cast<int64_t>(t->nb[1] / sizeof(float));
  const size_t lda = a->nb[1];

  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
      for (int64_t n = 0; n < N; ++n) cols[n] = read_row(b, n, i2, i3, b_dense ? nullptr : b_scratch.data() + n * K);
      const char *a0 = row_ptr(a, 0, i2 / r2, i3 / r3);
      float *out = reinterpret_cast<float *>(row_ptr(t, 0, i2, i3));
      for (int64_t rb = m0; rb < m1; rb += kRowBlock) {
        const int64_t re = std::min(rb + kRowBlock, m1);
        for (int64_t cb = 0; cb < N; cb += chunk) {
          const int64_t ce = std::min(cb + chunk, N);
          for (int64_t r = rb; r < re; r += kTileRows) {
            const int rm = static_cast<int>(std::min<int64_t>(kTileRows, re - r));
            const uint16_t *rows[kTileRows];
            for (int i = 0; i < rm; ++i) rows[i] = reinterpret_cast<const uint16_t *>(a0 + (r + i) * lda);
            for (int64_t c = cb; c < ce; c += kTileCols) {
              const int rn = static_cast<int>(std::min<int64_t>(kTileCols, ce - c));
              if (rm == kTileRows) {
                k.t[0][rn - 1](rows, cols.data() + c, K, out + c * ldo + r, ldo);
              } else {
                for (int i = 0; i < rm; ++i) k.t[1][rn - 1](rows + i, cols.data() + c, K, out + c * ldo + r + i, ldo);
              }
            }
          }
        }
      }
    }
}

}  // namespace bp::cpu
