// ops_matmul_dot.cpp: the driver of the thin products' dot-product tiles
// (matmul_dot.hpp): units of rows of a per thread, b's rows interleaved
// once per batch, tiles of rows of a by groups of rows of b.
#include <cstring>
#include <memory>
#include <new>

#include "matmul_dot.hpp"

namespace bp::cpu {
namespace {

// Rows |rows| (|rn| <= group) of b interleaved for the tiles: |lanes| values
// of each row in turn, dst[(k / lanes * rn + j) * lanes + k % lanes] =
// rows[j][k], with zeros from K up to the next multiple of |lanes|.
void pack_dot_group(const float *const *rows, int rn, int64_t K, int lanes, float *dst) {
  for (int64_t k0 = 0; k0 < K; k0 += lanes) {
    const int64_t n = K - k0 < lanes ? K - k0 : lanes;
    for (int j = 0; j < rn; ++j, dst += lanes) {
      std::memcpy(dst, rows[j] + k0, static_cast<size_t>(n) * sizeof(float));
      if (n < lanes) std::memset(dst + n, 0, static_cast<size_t>(lanes - n) * sizeof(float));
    }
  }
}

constexpr int kMaxGroup = 8, kMaxTileRows = 8;  // dot_kernels' limits (matmul_dot.hpp)

}  // namespace

bool mul_mat_dot_suits(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  return (rows_dense_as(a, BP_TYPE_F32) || rows_dense_as(a, BP_TYPE_F16) || rows_dense_as(a, BP_TYPE_BF16)) &&
         rows_dense_as(b, BP_TYPE_F32) && t->nb[0] == sizeof(float);
}

void mul_mat_dot_run(const bp_tensor *t, int ith, int nth, const dot_kernels &kern) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int64_t K = a->ne[0], N = t->ne[1];
  const int group = kern.group;
  const thin_units units(t, ith, nth);
  if (units.begin >= units.end) return;
  // b's rows of one batch, interleaved per group (see pack_dot_group):
  // group n0 at bp + n0 * k_padded, zeros past K (a tile's tail step gives
  // zeros there from a; these keep the panel's loads whole and defined).
  const int64_t k_padded = (K + kern.lanes - 1) / kern.lanes * kern.lanes;
  const size_t panel_bytes = (static_cast<size_t>(N * k_padded) * sizeof(float) + 63) / 64 * 64;
  std::unique_ptr<float, free_deleter> panel(static_cast<float *>(std::aligned_alloc(64, panel_bytes)));
  if (!panel) throw std::bad_alloc();  // the pool reports it, as it does for the packed GEMM's vectors
  float *bp = panel.get();
  int64_t packed_batch = -1;
  float res[kMaxGroup * kMaxTileRows];
  const void *ar[kMaxTileRows], *next[kMaxTileRows];
  const float *br[kMaxGroup];
  const int rm = kern.rows_for(static_cast<int>(N > group ? group : N));
  for (int64_t u = units.begin; u < units.end; ++u) {
    const thin_unit w = units.at(u);
    if (w.batch != packed_batch) {
      for (int64_t n0 = 0; n0 < N; n0 += group) {
        const int rn = static_cast<int>(N - n0 < group ? N - n0 : group);
        for (int j = 0; j < rn; ++j) br[j] = reinterpret_cast<const float *>(row_ptr(b, n0 + j, w.i2, w.i3));
        pack_dot_group(br, rn, K, kern.lanes, bp + n0 * k_padded);
      }
      packed_batch = w.batch;
    }
    for (int64_t m0 = w.m_begin; m0 < w.m_end;) {
      const int rows = w.m_end - m0 < rm ? 1 : rm;
      for (int i = 0; i < rows; ++i) ar[i] = row_ptr(a, m0 + i, w.a2, w.a3);
      // The next tile's rows, fetched during the first pass over b's rows
      // (a's rows are in cache for the passes after it); past the unit's
      // end, the current rows again (the prefetches then hit in L1).
      for (int i = 0; i < rows; ++i) next[i] = m0 + rows + i < w.m_end ? row_ptr(a, m0 + rows + i, w.a2, w.a3) : ar[i];
      for (int64_t n0 = 0; n0 < N; n0 += group) {
        const int rn = static_cast<int>(N - n0 < group ? N - n0 : group);
        kern.tile(a->type, rows, rn)(ar, bp + n0 * k_padded, K, res, kMaxTileRows, n0 == 0 ? next : nullptr);
        for (int j = 0; j < rn; ++j) {
          float *d = reinterpret_cast<float *>(elem_ptr(t, m0, n0 + j, w.i2, w.i3));
          std::memcpy(d, res + j * kMaxTileRows, static_cast<size_t>(rows) * sizeof(float));
        }
      }
      m0 += rows;
    }
  }
}

}  // namespace bp::cpu
