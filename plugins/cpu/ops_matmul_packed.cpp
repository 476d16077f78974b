// ops_matmul_packed.cpp: MUL_MAT for products with enough rows on both
// sides (N >= kNR, M >= kMR), as a packed outer-product GEMM.
//
// With dst[m, n] = sum_k a[k, m] * b[k, n], a row n of dst is M floats along
// m, so the micro-kernel computes a kNR x kMR block (6 rows n by 16 columns
// m) of dst in 12 vector accumulators: for each k it loads 16 values of a
// (two 8-wide vectors) and broadcasts 6 values of b, 12 fused multiply-adds.
// Operands are packed first, which is also where F16 a and strided views are
// converted: a into panels of 16 rows of a (k-major, 16 floats per k), b into
// panels of 6 rows of b (k-major). K is cut into blocks of kKC so that a's
// panels stay in L2 and b's panel in L1 while they are reused.
//
// Threads take units of work: (batch, kMC rows of a, a range of b's rows);
// ranges of b are split further only when there are too few units for the
// threads. Each unit packs its own operands, so threads share nothing but
// the (disjoint) parts of dst they write.
#include <cstring>
#include <vector>

#include "kernels.hpp"
#include "plugins/common/f16.hpp"

namespace bp::cpu {
namespace {

constexpr int kMR = 16;       // micro-kernel: columns of dst (rows of a)
constexpr int kNR = 6;        // micro-kernel: rows of dst (rows of b)
constexpr int64_t kMC = 128;  // rows of a per unit (8 panels, 128 KiB packed per K block: fits L2)
constexpr int64_t kKC = 256;  // K block

// c[i][j] = sum_k bp[k*kNR + i] * ap[k*kMR + j] over |kc| steps.
BP_CPU_CLONES
void micro_kernel(const float *ap, const float *bp, int64_t kc, float c[kNR][kMR]) {
  v8f acc[kNR][2];
#pragma GCC unroll 6
  for (int i = 0; i < kNR; ++i) acc[i][0] = acc[i][1] = v8f{0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < kc; ++k) {
    v8f a0, a1;
    std::memcpy(&a0, ap + k * kMR, sizeof a0);
    std::memcpy(&a1, ap + k * kMR + 8, sizeof a1);
#pragma GCC unroll 6
    for (int i = 0; i < kNR; ++i) {
      const float b = bp[k * kNR + i];
      acc[i][0] += a0 * b;
      acc[i][1] += a1 * b;
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kNR; ++i) {
    std::memcpy(&c[i][0], &acc[i][0], sizeof(v8f));
    std::memcpy(&c[i][8], &acc[i][1], sizeof(v8f));
  }
}

// Element k of row |r| of |t| at batch (i2, i3), as float.
struct row_reader {
  const bp_tensor *t;
  int64_t i2, i3;
  bool dense_f32() const { return t->type == BP_TYPE_F32 && (t->ne[0] == 1 || t->nb[0] == sizeof(float)); }
  const char *row(int64_t r) const { return row_ptr(t, r, i2, i3); }
};

// Packs rows [r0, r0 + count) (count <= width) of |src|, elements
// [k0, k0 + kc), into |dst| k-major: dst[k * width + j] = src[r0 + j][k0 + k];
// rows past |count| are zeros.
void pack_panel(const row_reader &src, int64_t r0, int64_t count, int64_t k0, int64_t kc, int width, float *dst) {
  if (src.dense_f32() && count == width) {
    // The common case, k-major: |width| sequential reads, one sequential write.
    const float *rows[kMR];
    for (int j = 0; j < width; ++j) rows[j] = reinterpret_cast<const float *>(src.row(r0 + j)) + k0;
    for (int64_t k = 0; k < kc; ++k)
      for (int j = 0; j < width; ++j) dst[k * width + j] = rows[j][k];
    return;
  }
  for (int j = 0; j < width; ++j) {
    if (j >= count) {
      for (int64_t k = 0; k < kc; ++k) dst[k * width + j] = 0.0f;
      continue;
    }
    const char *row = src.row(r0 + j);
    if (src.dense_f32()) {
      const float *p = reinterpret_cast<const float *>(row) + k0;
      for (int64_t k = 0; k < kc; ++k) dst[k * width + j] = p[k];
    } else if (src.t->type == BP_TYPE_F16 && src.t->nb[0] == sizeof(uint16_t)) {
      float wide[kKC];
      plugins::f16_row_to_f32(reinterpret_cast<const uint16_t *>(row) + k0, kc, wide);
      for (int64_t k = 0; k < kc; ++k) dst[k * width + j] = wide[k];
    } else {
      const size_t nb0 = src.t->nb[0];
      for (int64_t k = 0; k < kc; ++k) dst[k * width + j] = load_f32(row + (k0 + k) * nb0, src.t->type);
    }
  }
}

struct unit_plan {
  int64_t m_chunks, n_splits, n_per_split, batches;
  int64_t count() const { return batches * m_chunks * n_splits; }
};

unit_plan plan_units(const bp_tensor *t, int nth) {
  const int64_t M = t->ne[0], N = t->ne[1];
  unit_plan p;
  p.batches = t->ne[2] * t->ne[3];
  p.m_chunks = (M + kMC - 1) / kMC;
  p.n_splits = 1;
  // Enough units for every thread to have two, while each range of b keeps
  // at least two micro-kernel rows.
  while (p.count() < 2 * static_cast<int64_t>(nth) && N / (p.n_splits * 2) >= 2 * kNR) p.n_splits *= 2;
  const int64_t per = (N + p.n_splits - 1) / p.n_splits;
  p.n_per_split = (per + kNR - 1) / kNR * kNR;
  return p;
}

}  // namespace

bool mul_mat_packed_suits(const bp_tensor *t) {
  return t->ne[1] >= kNR && t->ne[0] >= kMR && t->nb[0] == sizeof(float);  // dst rows dense (the op table's dst is)
}

void mul_mat_packed_run(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int64_t K = a->ne[0], M = t->ne[0], N = t->ne[1];
  const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  const unit_plan plan = plan_units(t, nth);
  int64_t u0, u1;
  split_range(plan.count(), ith, nth, &u0, &u1);
  if (u0 >= u1) return;

  std::vector<float> apack(static_cast<size_t>(kMC * kKC)), bpack(static_cast<size_t>(kNR * kKC));
  float c[kNR][kMR];

  for (int64_t u = u0; u < u1; ++u) {
    const int64_t ns = u % plan.n_splits, mc = (u / plan.n_splits) % plan.m_chunks;
    const int64_t batch = u / (plan.n_splits * plan.m_chunks);
    const int64_t i2 = batch % t->ne[2], i3 = batch / t->ne[2];
    const row_reader ar{a, i2 / r2, i3 / r3}, br{b, i2, i3};
    const int64_t m0 = mc * kMC, m1 = m0 + kMC < M ? m0 + kMC : M;
    const int64_t n_begin = ns * plan.n_per_split;
    const int64_t n_end = n_begin + plan.n_per_split < N ? n_begin + plan.n_per_split : N;
    if (n_begin >= n_end) continue;
    const int64_t panels = (m1 - m0 + kMR - 1) / kMR;

    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = K - k0 < kKC ? K - k0 : kKC;
      for (int64_t p = 0; p < panels; ++p) {
        const int64_t pm = m0 + p * kMR;
        pack_panel(ar, pm, m1 - pm < kMR ? m1 - pm : kMR, k0, kc, kMR, apack.data() + p * kMR * kKC);
      }
      for (int64_t n0 = n_begin; n0 < n_end; n0 += kNR) {
        const int64_t rows = n_end - n0 < kNR ? n_end - n0 : kNR;
        pack_panel(br, n0, rows, k0, kc, kNR, bpack.data());
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t pm = m0 + p * kMR;
          const int64_t cols = m1 - pm < kMR ? m1 - pm : kMR;
          micro_kernel(apack.data() + p * kMR * kKC, bpack.data(), kc, c);
          // The first K block writes dst, later ones add to it.
          for (int64_t i = 0; i < rows; ++i) {
            float *d = reinterpret_cast<float *>(elem_ptr(t, pm, n0 + i, i2, i3));
            if (k0 == 0) {
              std::memcpy(d, c[i], static_cast<size_t>(cols) * sizeof(float));
            } else {
              for (int64_t j = 0; j < cols; ++j) d[j] += c[i][j];
            }
          }
        }
      }
    }
  }
}

}  // namespace bp::cpu
