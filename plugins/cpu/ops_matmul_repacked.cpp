// ops_matmul_repacked.cpp: MUL_MAT with a in the repacked layout of a cpu
// weight buffer (repack.hpp) and F32 b: a [K, M, A2, A3] x b [K, N, B2, B3]
// -> dst [M, N, B2, B3], a repeating over b's batch dims.
//
// The work is split by units of one group of 4 rows (plus one unit for the
// rows past a matrix's last group, which stay in the file's layout and go
// through the plain quantized tiles), so every output is written by one
// thread and its bits do not depend on the thread count. Every thread
// quantizes all of b's columns itself, as ops_matmul_quant.cpp does. Inside
// a thread: blocks of kGroupBlock groups against chunks of b's columns of
// about kColChunkBytes, tiles of one group by up to max_cols columns inside.
#include <algorithm>
#include <vector>

#include "kernels.hpp"
#include "quant.hpp"
#include "repack.hpp"

namespace bp::cpu {
namespace {

constexpr int64_t kGroupBlock = 16;
constexpr size_t kColChunkBytes = 256 * 1024;

char *aligned_in(std::vector<char> &v, size_t bytes) {
  v.resize(bytes + 64);
  return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
}

// A last unit of fewer groups than a tile takes: its groups followed by
// zero records (scales 0, so their rows' sums stay 0) in a copy, the tile's
// outputs in a buffer of its own, and only the real rows stored.
class padded_unit {
 public:
  padded_unit(size_t group_bytes, int64_t tile_groups) : group_bytes_(group_bytes), groups_(tile_groups) {}
  void run(rtile_fn tile, const uint8_t *a, int64_t groups, const char *b, size_t ldb, int64_t K, int rn, float *out,
           int64_t ldo) {
    const int64_t rows = groups_ * kPackRows;
    if (a_.empty()) a_.assign(group_bytes_ * static_cast<size_t>(groups_), 0);
    std::copy(a, a + group_bytes_ * static_cast<size_t>(groups), a_.begin());
    if (o_.size() < static_cast<size_t>(rows * rn)) o_.resize(static_cast<size_t>(rows * rn));
    tile(a_.data(), b, ldb, K, o_.data(), rows);
    for (int c = 0; c < rn; ++c)
      std::copy(o_.data() + c * rows, o_.data() + c * rows + groups * kPackRows, out + c * ldo);
  }

 private:
  size_t group_bytes_;
  int64_t groups_;
  std::vector<uint8_t> a_;
  std::vector<float> o_;
};

}  // namespace

bool mul_mat_r_supports(const bp_tensor *t) {
  const bp_tensor *a = t->src[0];
  return a->view_src == nullptr && repacked_layout(a) && mul_mat_q_supports(t);
}

void mul_mat_r_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  qtype q = qtype::q8_0;
  qtype_of(a->type, &q);
  static const rkernels &rk = rkernels_for_cpu();
  const int64_t K = a->ne[0], M = t->ne[0], N = t->ne[1];
  const int64_t groups = packed_rows(M) / kPackRows, tail = M - packed_rows(M);
  const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  // Units of tg groups (one tile's rows), the last perhaps fewer, then one
  // for the rows past the last group.
  const int64_t tg = rk.tile_groups ? rk.tile_groups(q, N) : 1, units = (groups + tg - 1) / tg;
  int64_t u0, u1;
  split_range(units + (tail ? 1 : 0), ith, nth, &u0, &u1);
  if (u0 >= u1) return;
  const int64_t g0 = u0 * tg, g1 = std::min(u1 * tg, groups);
  const bool do_tail = tail && u1 > units;

  const int max_cols = rk.max_cols(q, N);
  const size_t col = rk.col_bytes(q, K, N), tcol = act_col_bytes(K);
  const int64_t padded_n = (N + max_cols - 1) / max_cols * max_cols;
  std::vector<char> cols_v, tcols_v, col_scratch(column_scratch_bytes(K));
  char *bq = aligned_in(cols_v, col * static_cast<size_t>(padded_n));
  char *tq = do_tail ? aligned_in(tcols_v, tcol * static_cast<size_t>(N)) : nullptr;
  std::vector<float> scratch(static_cast<size_t>(K));

  const int64_t chunk = std::max<int64_t>(max_cols, static_cast<int64_t>(kColChunkBytes / col) / max_cols * max_cols);
  const int64_t ldo = static_cast<int64_t>(t->nb[1] / sizeof(float));
  const size_t lda = a->nb[1], group_bytes = lda * kPackRows;
  padded_unit short_unit(group_bytes, tg);

  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
      for (int64_t n = 0; n < N; ++n) {
        const float *x = read_row(b, n, i2, i3, scratch.data());
        rk.quantize_b(q, N, x, K, col_scratch.data(), bq, n);
        if (tq) quantize_act_col(x, K, tq + n * tcol);
      }
      const auto *a0 = reinterpret_cast<const uint8_t *>(row_ptr(a, 0, i2 / r2, i3 / r3));
      float *out = reinterpret_cast<float *>(row_ptr(t, 0, i2, i3));
      for (int64_t gb = g0; gb < g1; gb += kGroupBlock) {
        const int64_t ge = std::min(gb + kGroupBlock, g1);
        for (int64_t cb = 0; cb < N; cb += chunk) {
          const int64_t ce = std::min(cb + chunk, N);
          for (int64_t g = gb; g < ge; g += tg)
            for (int64_t c = cb; c < ce; c += max_cols) {
              const int rn = static_cast<int>(std::min<int64_t>(max_cols, ce - c));
              float *o = out + c * ldo + g * kPackRows;
              if (g + tg <= groups) {
                rk.tile(q, N, rn)(a0 + g * group_bytes, bq + c * col, col, K, o, ldo);
              } else {
                short_unit.run(rk.tile(q, N, rn), a0 + g * group_bytes, groups - g, bq + c * col, col, K, rn, o, ldo);
              }
            }
        }
      }
      if (do_tail) {
        static const qkernels &k = qkernels_for_cpu();
        for (int64_t r = M - tail; r < M; ++r)
          for (int64_t c = 0; c < N; ++c)
            k.tile(q, 1, 1)(reinterpret_cast<const char *>(a0) + r * lda, lda, tq + c * tcol, tcol, K,
                            out + c * ldo + r, ldo);
      }
    }
}

}  // namespace bp::cpu
