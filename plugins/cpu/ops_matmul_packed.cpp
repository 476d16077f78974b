// ops_matmul_packed.cpp: MUL_MAT for products with enough rows on both
// sides, as a packed outer-product GEMM.
//
// With dst[m, n] = sum_k a[k, m] * b[k, n], a row n of dst is M floats along
// m, so a micro-kernel computes an NR x MR block of dst (NR rows n by MR
// columns m) in registers: for each k it loads MR values of a and broadcasts
// NR values of b. The kernel depends on the ISA (cpu_isa(), chosen at run
// time): 6 x 16 with 8-wide vectors for baseline x86-64 and AVX2 (12 ymm
// accumulators), 12 x 32 with AVX-512 (24 zmm accumulators,
// gemm_avx512.cpp). Operands are packed first, which is also where F16 and
// BF16 a and strided views are converted: a into panels of MR rows (k-major, MR floats
// per k), b into panels of NR rows (k-major, NR floats per k).
//
// Loop order inside a unit of work (GotoBLAS's, with b's block in L2):
//   for each K block (kKC):       pack b's rows of the unit: NC x kKC (L2)
//     for each panel of a (MR):   pack MR x kKC (24 KiB with AVX-512: L1)
//       for each panel of b (NR): micro-kernel, adding into dst
// a panel stays in L1 while every b panel streams past it from L2; each
// operand is packed once per unit and K block.
//
// Threads take units (batch, range of m, range of n). Ranges of n are at
// most kNC rows; ranges of m are the whole M unless there are too few units
// for the threads, then M is cut into as many pieces as that takes (b's
// block is then packed once per piece, a cost of 1/(rows of the piece) per
// multiply-add). Threads share nothing but the disjoint parts of dst they write.
#include <cstring>
#include <memory>
#include <numeric>

#include "f16.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "matmul_dot.hpp"
#include "quant_blocks.hpp"

namespace bp::cpu {
namespace {

constexpr int kMaxMR = 32;
// Block sizes measured on a 2-core AVX-512 VM (bp-bench, 512-2048^3): 192 x
// 768 and 256 x 384 are within the run-to-run noise once rows are copied
// before the transposition (pack_panel); 192 leaves a quarter of a 32 KiB
// L1 to the b panels streaming past the a panel.
constexpr int64_t kKC = 192;  // K block: an AVX-512 a panel is 32 x 192 floats = 24 KiB
constexpr int64_t kNC = 768;  // rows of b per unit: 768 x 192 floats = 576 KiB packed (L2)

// The 8-wide kernel for baseline and AVX2 (one body, two compilations).
constexpr int kMR8 = 16, kNR8 = 6;
typedef float v8f __attribute__((vector_size(32)));

__attribute__((always_inline)) inline void micro8_body(const float *ap, const float *bp, int64_t kc, float *c,
                                                       int64_t ldc, int rows, int cols, bool add) {
  v8f acc[kNR8][2];
#pragma GCC unroll 6
  for (int i = 0; i < kNR8; ++i) acc[i][0] = acc[i][1] = v8f{0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < kc; ++k) {
    v8f a0, a1;
    std::memcpy(&a0, ap + k * kMR8, sizeof a0);
    std::memcpy(&a1, ap + k * kMR8 + 8, sizeof a1);
#pragma GCC unroll 6
    for (int i = 0; i < kNR8; ++i) {
      const float b = bp[k * kNR8 + i];
      acc[i][0] += a0 * b;
      acc[i][1] += a1 * b;
    }
  }
  float tile[kNR8][kMR8];
  std::memcpy(tile, acc, sizeof tile);
  for (int i = 0; i < rows; ++i) {
    float *d = c + i * ldc;
    if (add) {
      for (int j = 0; j < cols; ++j) d[j] += tile[i][j];
    } else {
      std::memcpy(d, tile[i], static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

void micro8_baseline(const float *ap, const float *bp, int64_t kc, float *c, int64_t ldc, int rows, int cols,
                     bool add) {
  micro8_body(ap, bp, kc, c, ldc, rows, cols, add);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void micro8_avx2(const float *ap, const float *bp, int64_t kc, float *c,
                                                     int64_t ldc, int rows, int cols, bool add) {
  micro8_body(ap, bp, kc, c, ldc, rows, cols, add);
}
#endif

struct gemm_kernel {
  int mr, nr;
  void (*run)(const float *ap, const float *bp, int64_t kc, float *c, int64_t ldc, int rows, int cols, bool add);
};

const gemm_kernel &pick_kernel() {
  static const gemm_kernel k = [] {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (plugins::cpu_isa()) {
      case plugins::isa_level::avx512:
        return gemm_kernel{32, 12, gemm_micro_avx512};
      case plugins::isa_level::avx2:
        return gemm_kernel{kMR8, kNR8, micro8_avx2};
      default:
        break;
    }
#endif
    return gemm_kernel{kMR8, kNR8, micro8_baseline};
  }();
  return k;
}

// Element k of row |r| of |t| at batch (i2, i3), as float.
struct row_reader {
  const bp_tensor *t;
  int64_t i2, i3;
  bool dense_f32() const { return rows_dense_as(t, BP_TYPE_F32); }
  const char *row(int64_t r) const { return row_ptr(t, r, i2, i3); }
};

// Packs rows [r0, r0 + count) (count <= width) of |src|, elements
// [k0, k0 + kc), into |dst| k-major: dst[k * width + j] = src[r0 + j][k0 + k];
// rows past |count| are zeros.
void pack_panel(const row_reader &src, int64_t r0, int64_t count, int64_t k0, int64_t kc, int width, float *dst) {
  const bool dense_half = rows_dense_as(src.t, BP_TYPE_F16) || rows_dense_as(src.t, BP_TYPE_BF16);
  if (plugins::cpu_isa() == plugins::isa_level::avx512 && (src.dense_f32() || dense_half)) {
    // Straight from the rows, 16 x 16 blocks transposed in registers: each
    // 64-byte line is read once by one load, so rows 4 KiB apart sharing
    // an L1 set (below) cost nothing, and nothing is copied first. The
    // scalar path below spent 5-8% of a 1024^3 product packing.
    const void *row_ptrs[kMaxMR];
    for (int j = 0; j < count; ++j) row_ptrs[j] = src.row(r0 + j);
    pack_rows_avx512(row_ptrs, src.t->type, static_cast<int>(count), k0, kc, width, dst);
    return;
  }
  const float *rows[kMaxMR];
  // Every row is first copied (F32), widened (F16, BF16) or gathered (strided)
  // into |wide|, then transposed from there. Reading the k-major order
  // straight from 32 rows of a large matrix keeps 32 streams a row stride
  // apart in flight, which the caches and TLB serve badly: copying first
  // took f32 512-1024^3 from 0.62-0.70 to 0.76-0.81 of the FMA peak.
  float wide[kMaxMR][kKC];
  for (int j = 0; j < width; ++j) {
    if (j >= count) {
      rows[j] = nullptr;
      continue;
    }
    const char *row = src.row(r0 + j);
    if (src.dense_f32()) {
      std::memcpy(wide[j], reinterpret_cast<const float *>(row) + k0, static_cast<size_t>(kc) * sizeof(float));
    } else if (src.t->type == BP_TYPE_F16 && src.t->nb[0] == sizeof(uint16_t)) {
      plugins::f16_row_to_f32(reinterpret_cast<const uint16_t *>(row) + k0, kc, wide[j]);
    } else if (src.t->type == BP_TYPE_BF16 && src.t->nb[0] == sizeof(uint16_t)) {
      const uint16_t *h = reinterpret_cast<const uint16_t *>(row) + k0;
      for (int64_t k = 0; k < kc; ++k) wide[j][k] = qblock::bf16_to_f32(h[k]);
    } else {
      const size_t nb0 = src.t->nb[0];
      for (int64_t k = 0; k < kc; ++k) wide[j][k] = load_f32(row + (k0 + k) * nb0, src.t->type);
    }
    rows[j] = wide[j];
  }
  if (count == width) {
    // k-major: |width| reads from L1, one sequential write.
    for (int64_t k = 0; k < kc; ++k)
      for (int j = 0; j < width; ++j) dst[k * width + j] = rows[j][k];
    return;
  }
  for (int64_t k = 0; k < kc; ++k)
    for (int j = 0; j < width; ++j) dst[k * width + j] = j < count ? rows[j][k] : 0.0f;
}

struct unit_plan {
  int64_t m_chunks, m_per_chunk, n_chunks, n_per_chunk, batches;
  int64_t count() const { return batches * m_chunks * n_chunks; }
};

unit_plan plan_units(const bp_tensor *t, int nth, const gemm_kernel &kr) {
  const int64_t M = t->ne[0], N = t->ne[1];
  unit_plan p;
  p.batches = t->ne[2] * t->ne[3];
  p.n_chunks = (N + kNC - 1) / kNC;
  const int64_t per = (N + p.n_chunks - 1) / p.n_chunks;
  p.n_per_chunk = (per + kr.nr - 1) / kr.nr * kr.nr;
  p.m_chunks = 1;
  // Few units, or a count the threads cannot share evenly: cut M so the
  // count becomes a multiple of the threads (each piece at least one panel).
  const int64_t units = p.batches * p.n_chunks;
  if (nth > 1 && units % nth != 0 && units < 8 * nth) {
    const int64_t g = std::gcd(units, static_cast<int64_t>(nth));
    const int64_t panels = (M + kr.mr - 1) / kr.mr;
    p.m_chunks = nth / g < panels ? nth / g : panels;
  }
  const int64_t panels_per = ((M + kr.mr - 1) / kr.mr + p.m_chunks - 1) / p.m_chunks;
  p.m_per_chunk = panels_per * kr.mr;
  return p;
}

}  // namespace

bool mul_mat_packed_suits(const bp_tensor *t) {
  const gemm_kernel &kr = pick_kernel();
  // With AVX-512, and with AVX2 where a's and b's rows are dense, the
  // dot-product (and broadcast) kernels win on thin products: few rows of b
  // use each packed element of a too few times to repay packing it.
  int64_t min_n = kr.nr;
  if (plugins::cpu_isa() == plugins::isa_level::avx512) {
    min_n = kMinPackedNAvx512;
  } else if (plugins::cpu_isa() == plugins::isa_level::avx2 && mul_mat_dot_suits(t)) {
    min_n = kMinPackedNAvx2;
  }
  return t->ne[1] >= min_n && t->ne[0] >= kr.mr && t->nb[0] == sizeof(float);  // dst rows dense (the op table's are)
}

void mul_mat_packed_run(const bp_tensor *t, int ith, int nth) {
  const gemm_kernel &kr = pick_kernel();
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int64_t K = a->ne[0], M = t->ne[0], N = t->ne[1];
  const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  const int64_t ldc = t->nb[1] / static_cast<int64_t>(sizeof(float));
  const unit_plan plan = plan_units(t, nth, kr);
  int64_t u0, u1;
  split_range(plan.count(), ith, nth, &u0, &u1);
  if (u0 >= u1) return;

  // Left uninitialised: pack_panel writes every value the kernel reads, and
  // zeroing the 200-600 KiB of b's block cost 1.6% of a 256^3 product.
  const std::unique_ptr<float[]> apack(new float[static_cast<size_t>(kr.mr * kKC)]);
  const std::unique_ptr<float[]> bpack(new float[static_cast<size_t>(plan.n_per_chunk * kKC)]);

  for (int64_t u = u0; u < u1; ++u) {
    const int64_t nc = u % plan.n_chunks, mc = (u / plan.n_chunks) % plan.m_chunks;
    const int64_t batch = u / (plan.n_chunks * plan.m_chunks);
    const int64_t i2 = batch % t->ne[2], i3 = batch / t->ne[2];
    const row_reader ar{a, i2 / r2, i3 / r3}, br{b, i2, i3};
    const int64_t m0 = mc * plan.m_per_chunk, m1 = m0 + plan.m_per_chunk < M ? m0 + plan.m_per_chunk : M;
    const int64_t n0 = nc * plan.n_per_chunk, n1 = n0 + plan.n_per_chunk < N ? n0 + plan.n_per_chunk : N;
    if (m0 >= m1 || n0 >= n1) continue;
    const int64_t n_panels = (n1 - n0 + kr.nr - 1) / kr.nr;

    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = K - k0 < kKC ? K - k0 : kKC;
      for (int64_t p = 0; p < n_panels; ++p) {
        const int64_t pn = n0 + p * kr.nr;
        pack_panel(br, pn, n1 - pn < kr.nr ? n1 - pn : kr.nr, k0, kc, kr.nr, bpack.get() + p * kr.nr * kc);
      }
      for (int64_t pm = m0; pm < m1; pm += kr.mr) {
        const int cols = static_cast<int>(m1 - pm < kr.mr ? m1 - pm : kr.mr);
        pack_panel(ar, pm, cols, k0, kc, kr.mr, apack.get());
        // The next panel's rows of a, requested while this one is
        // multiplied (a's rows come from L3 or DRAM; b's block is in L2).
        const int64_t next_m = pm + kr.mr, next_rows = m1 - next_m < kr.mr ? m1 - next_m : kr.mr;
        const int64_t lines_per_row = (kc * static_cast<int64_t>(sizeof(float)) + 63) / 64;
        const int64_t lines = next_rows > 0 && ar.dense_f32() ? next_rows * lines_per_row : 0;
        const int64_t per_call = (lines + n_panels - 1) / n_panels;
        int64_t line = 0;
        for (int64_t p = 0; p < n_panels; ++p) {
          for (int64_t e = line + per_call; line < e && line < lines; ++line)
            __builtin_prefetch(ar.row(next_m + line / lines_per_row) + (k0 + (line % lines_per_row) * 16) * 4, 0, 3);
          const int64_t pn = n0 + p * kr.nr;
          const int rows = static_cast<int>(n1 - pn < kr.nr ? n1 - pn : kr.nr);
          float *c = reinterpret_cast<float *>(elem_ptr(t, pm, pn, i2, i3));
          kr.run(apack.get(), bpack.get() + p * kr.nr * kc, kc, c, ldc, rows, cols, k0 > 0);
        }
      }
    }
  }
}

}  // namespace bp::cpu
