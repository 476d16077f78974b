// gemm_avx512.cpp: the AVX-512 kernels of MUL_MAT (see ops_matmul.cpp and
// ops_matmul_packed.cpp for the drivers and the layout of the product).
//
// The kernels, all compiled for x86-64-v4 through target attributes and
// called only when cpu_isa() (plugins/common/isa.hpp) says avx512, so the
// .so still loads on any x86-64:
//
//  - gemm_micro_avx512: the packed GEMM's 12 x 32 outer-product kernel.
//    Per k it loads 32 values of a (two zmm) and broadcasts 12 values of b
//    (fused into the FMAs as {1to16} memory operands): 24 FMAs into 24 zmm
//    accumulators, 2 loads + 12 broadcasts. 24 accumulators cover the FMA
//    latency (4 cycles) x 2 pipes three times over, and 24 + 2 + spare fit
//    the 32 registers with no spill.
//
//  - the dot-product tiles (dot_kernels_avx512, driven by mul_mat_dot_run
//    in ops_matmul_dot.cpp): products with few rows of b (a decoder's 1..23
//    tokens, and F16 weights up to 47), as dot products along K with no
//    packing: a tile of RM rows of a by RN rows of b keeps RM x RN zmm
//    accumulators and reads a straight from its rows, converting F16 on the
//    fly (vcvtph2ps), so an F16 weight costs half the memory traffic of an
//    F32 one. Packing a would cost as much as the product itself here: a's
//    elements are each used only N times.
//
//  - mul_mat_bcast_avx512: F32, F16 or BF16 a with 24..47 rows of b (and 9..16 on CPUs
//    that split 512-bit FMAs in halves, below). The dot kernel reloads b
//    for every RM rows of a (3 x 8 tiles: 11 loads per 24 FMAs, half of
//    them from L2) and stalls near half of the FMA peak; here b's rows are
//    transposed once per thread into a k-major panel (N padded to NV x 16
//    lanes) and each a[m][k] is broadcast into NV FMAs, so the kernel has
//    the packed GEMM's mix (NV loads + RM broadcasts per RM x NV FMAs)
//    without packing a. Measured on a 2-core Zen 4 VM with a standalone
//    loop over the same tiles (4096 x 4096 weights, 2 threads): 12 x 2 at
//    N = 32 ran at 0.85 of the FMA peak where the 3 x 8 dot tile ran at
//    0.55, and 8 x 3 (N = 48) at 0.96. With one 512-bit vector of b
//    (N <= 16) the broadcasts equal the FMAs and it lost to the dot kernel
//    (80 against 107 GFLOP/s at N = 16), hence kMinBcastN; on CPUs that
//    run 512-bit FMAs in halves it wins (bcast_rows).

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "isa.hpp"
#include "kernels.hpp"
#include "matmul_dot.hpp"
#include "simd.hpp"

namespace bp::cpu {

namespace {

// Lanes [0, n) of a 16-lane mask (n clamped to [0, 16]).
BP_AVX512 inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Sum of the 16 lanes, through memory: called once per tile (not per k),
// and GCC 12's 512-to-256-bit casts and extracts warn -Wuninitialized inside
// their own header.
BP_AVX512 inline float hsum(__m512 v) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  float s[8];
  for (int i = 0; i < 8; ++i) s[i] = f[i] + f[i + 8];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// The sums of v[0..16), as one vector in that order: a network that adds
// pairs of vectors after interleaving them (15 adds, 30 shuffles in all),
// where hsum costs about 30 operations per vector. For a dot tile's 24
// accumulators at K = 256 it took a standalone 3 x 8 loop from 0.47 to
// 0.53-0.58 of one core's peak (K = 1024 +6%, K = 4096 +1-2%).
BP_AVX512 inline __m512 sum16(const __m512 *v) {
  __m512 t[8], u[4], w[2];
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p)  // per 128-bit lane: v[2p] and v[2p+1], two partial sums each
    t[p] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * p], v[2 * p + 1]), _mm512_unpackhi_ps(v[2 * p], v[2 * p + 1]));
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p)  // per 128-bit lane: v[4p..4p+3], one partial sum each
    u[p] =
        _mm512_add_ps(_mm512_shuffle_ps(t[2 * p], t[2 * p + 1], 0x44), _mm512_shuffle_ps(t[2 * p], t[2 * p + 1], 0xEE));
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p)  // lanes of two 128-bit lanes added: v[8p..8p+7] in two halves
    w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], 0x88),
                         _mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
}

// Bytes per element of a row of a (F32, F16 or BF16).
template <bp_type T>
constexpr int64_t kElemBytes = T == BP_TYPE_F32 ? 4 : 2;

// A bf16 is the top half of an f32: widening 16 of them is a zero-extension
// to 32 bits and a shift, exact.
BP_AVX512 inline __m512 widen_bf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// 16 values of row |p| at k (F32, or F16 / BF16 widened), |m| the lanes to load.
template <bp_type T>
BP_AVX512 inline __m512 load_a(const void *p, int64_t k, __mmask16 m) {
  if constexpr (T == BP_TYPE_F16) {
    return _mm512_maskz_cvtph_ps(m, _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t *>(p) + k));
  } else if constexpr (T == BP_TYPE_BF16) {
    return widen_bf16(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t *>(p) + k));
  } else {
    return _mm512_maskz_loadu_ps(m, static_cast<const float *>(p) + k);
  }
}
template <bp_type T>
BP_AVX512 inline __m512 load_a_full(const void *p, int64_t k) {
  if constexpr (T == BP_TYPE_F32) {
    return _mm512_loadu_ps(static_cast<const float *>(p) + k);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(static_cast<const uint16_t *>(p) + k));
    if constexpr (T == BP_TYPE_F16) return _mm512_maskz_cvtph_ps(0xffff, h);
    return widen_bf16(h);
  }
}

// out[j * ldo + i] = dot(a[i], b[j]) over K for i < RM, j < RN, with b's
// rows interleaved in |bp| (see matmul_dot.hpp): the RN vectors of one
// k are one run of RN x 64 bytes, so b streams from L2 as a single sequence
// the L1 prefetcher follows, where RN separate rows left the tile's loads
// waiting on L2 (b's 8 rows at K = 4096 are 128 KiB, past L1). While it
// streams its rows of a, the tile requests the same lines of the next
// tile's rows |next| into L2 (nullptr: none), so twice as many rows are in
// flight from DRAM: with 3 rows per tile (N = 8) the hardware's prefetchers
// alone kept the weights at about 21 GB/s where N = 1's 8 rows reach 40.
template <int RM, int RN, bp_type T>
BP_AVX512 void dot_tile(const void *const *a, const float *bp, int64_t K, float *out, int64_t ldo,
                        const void *const *next) {
  constexpr int64_t kElem = kElemBytes<T>;
  __m512 acc[RM][RN];
#pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 va[RM];
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) va[i] = load_a_full<T>(a[i], k);
    if (next && (k * kElem) % 64 == 0) {
#pragma GCC unroll 8
      for (int i = 0; i < RM; ++i) _mm_prefetch(static_cast<const char *>(next[i]) + k * kElem, _MM_HINT_T1);
    }
    const float *bk = bp + k * RN;
#pragma GCC unroll 8
    for (int j = 0; j < RN; ++j) {
      const __m512 vb = _mm512_load_ps(bk + j * 16);
#pragma GCC unroll 8
      for (int i = 0; i < RM; ++i) acc[i][j] = _mm512_fmadd_ps(va[i], vb, acc[i][j]);
    }
  }
  if (k < K) {  // the tail as one masked step: a's zeros past K add nothing
    const __mmask16 m = lanes(K - k);
    __m512 va[RM];
    for (int i = 0; i < RM; ++i) va[i] = load_a<T>(a[i], k, m);
    const float *bk = bp + k * RN;
    for (int j = 0; j < RN; ++j) {
      const __m512 vb = _mm512_load_ps(bk + j * 16);
      for (int i = 0; i < RM; ++i) acc[i][j] = _mm512_fmadd_ps(va[i], vb, acc[i][j]);
    }
  }
  if constexpr (RM * RN >= 8) {
    // Through sum16, in groups of 16 accumulators (zeros pad the last).
    constexpr int kSums = RM * RN, kGroups = (kSums + 15) / 16;
    __m512 flat[kGroups * 16];
    for (int j = 0; j < RN; ++j)
      for (int i = 0; i < RM; ++i) flat[j * RM + i] = acc[i][j];
    for (int q = kSums; q < kGroups * 16; ++q) flat[q] = _mm512_setzero_ps();
    alignas(64) float sums[kGroups * 16];
    for (int g = 0; g < kGroups; ++g) _mm512_store_ps(sums + 16 * g, sum16(flat + 16 * g));
    for (int j = 0; j < RN; ++j)
      for (int i = 0; i < RM; ++i) out[j * ldo + i] = sums[j * RM + i];
  } else {
    for (int j = 0; j < RN; ++j)
      for (int i = 0; i < RM; ++i) out[j * ldo + i] = hsum(acc[i][j]);
  }
}

// Rows of a per tile for RN rows of b: RM x RN <= 24 accumulators, and more
// rows of a when b is thin (more independent loads in flight from memory).
constexpr int rows_for(int rn) { return rn == 1 ? 8 : rn == 2 ? 6 : rn == 3 ? 6 : rn == 4 ? 5 : rn <= 6 ? 4 : 3; }
// Rows of a per tile when b has more than 8 rows: every block of 8 rows of b
// then passes over the same rows of a while they are still in L1/L2, so a
// (the weights, from DRAM) is read once whatever N is; rows_for(8) keeps the
// full blocks at 24 accumulators.
constexpr int kWideRows = rows_for(8);

template <int RN, bp_type T>
constexpr dot_fn full_tile() {
  return dot_tile<rows_for(RN), RN, T>;
}

// Tiles for |rows| rows of a (rows_for(rn), kWideRows or 1) by |rn| rows of b.
template <bp_type T>
dot_fn tile_fn(int rows, int rn) {
  static const dot_fn own[8] = {full_tile<1, T>(), full_tile<2, T>(), full_tile<3, T>(), full_tile<4, T>(),
                                full_tile<5, T>(), full_tile<6, T>(), full_tile<7, T>(), full_tile<8, T>()};
  static const dot_fn wide[8] = {dot_tile<kWideRows, 1, T>, dot_tile<kWideRows, 2, T>, dot_tile<kWideRows, 3, T>,
                                 dot_tile<kWideRows, 4, T>, dot_tile<kWideRows, 5, T>, dot_tile<kWideRows, 6, T>,
                                 dot_tile<kWideRows, 7, T>, dot_tile<kWideRows, 8, T>};
  static const dot_fn single[8] = {dot_tile<1, 1, T>, dot_tile<1, 2, T>, dot_tile<1, 3, T>, dot_tile<1, 4, T>,
                                   dot_tile<1, 5, T>, dot_tile<1, 6, T>, dot_tile<1, 7, T>, dot_tile<1, 8, T>};
  if (rows == 1) return single[rn - 1];
  return rows == rows_for(rn) ? own[rn - 1] : wide[rn - 1];
}

// rows_for as a function, for dot_kernels.
int rows_for_fn(int rn) { return rows_for(rn); }
dot_fn tile_for(bp_type type, int rows, int rn) {
  return type == BP_TYPE_F16    ? tile_fn<BP_TYPE_F16>(rows, rn)
         : type == BP_TYPE_BF16 ? tile_fn<BP_TYPE_BF16>(rows, rn)
                                : tile_fn<BP_TYPE_F32>(rows, rn);
}

}  // namespace

const dot_kernels &dot_kernels_avx512() {
  static const dot_kernels k{16, 8, rows_for_fn, tile_for};
  return k;
}

namespace {

// c[i * L + n] = sum over k in [k0, k0 + kc) of a[i][k] * bp[(k - k0) * L + n]
// for i < RM, L = NV x 16: RM rows of a (dense along k, F32, F16 or BF16) by the
// packed panel of b.
constexpr int64_t kCopy = 256;  // values of each row of a copied at once

// Where the block |ahead| blocks after the one at |kb| starts: later in this
// tile's rows |a|, else early in the next tile's rows |a_next| (null: none).
struct block_ref {
  const void *const *rows;
  int64_t k;
};
inline block_ref block_after(const void *const *a, const void *const *a_next, int64_t k0, int64_t kc, int64_t kb,
                             int ahead) {
  const int64_t blocks = (kc + kCopy - 1) / kCopy, j = kb / kCopy + ahead;
  if (j < blocks) return {a, k0 + j * kCopy};
  if (a_next && j - blocks < blocks) return {a_next, k0 + (j - blocks) * kCopy};
  return {nullptr, 0};
}

template <int RM, int NV, bp_type T>
BP_AVX512 void bcast_tile(const void *const *a, const void *const *a_next, int64_t k0, int64_t kc, const float *bp,
                          float *c) {
  constexpr int64_t kPanelLanes = NV * 16;
  constexpr int64_t kElem = kElemBytes<T>, kLineElems = 64 / kElem;
  // Rows whose length in bytes is a multiple of 4 KiB (K = 1024, 4096, ...)
  // map the same k of all RM rows to one L1 set, so they would evict each
  // other: blocks of kCopy floats of the RM rows are first copied to rows
  // kStride floats apart (one load and one store per 16 floats, against
  // 16 x NV FMAs per row that read them). F16 and BF16 rows are widened on the way,
  // so the FMAs see f32 either way and the weights cost half the traffic.
  constexpr int64_t kStride = kCopy + 16;
  alignas(64) float copy[RM * kStride];
  __m512 acc[RM][NV];
#pragma GCC unroll 12
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t kb = 0; kb < kc; kb += kCopy) {
    const int64_t n = kc - kb < kCopy ? kc - kb : kCopy;
#pragma GCC unroll 1
    for (int i = 0; i < RM; ++i) {
      const void *src = a[i];
      float *dst = copy + i * kStride;
      int64_t k = 0;
      for (; k + 16 <= n; k += 16) _mm512_store_ps(dst + k, load_a_full<T>(src, k0 + kb + k));
      if (k < n) _mm512_store_ps(dst + k, load_a<T>(src, k0 + kb + k, lanes(n - k)));
    }
    const float *bk = bp + kb * kPanelLanes;
    // The rows of a come from DRAM (each value is used only N times): while
    // this block is multiplied, the next block's lines are requested into
    // L1, one line of one row per k, so the copy above finds them there, and
    // the block after it into L2, so that DRAM's latency is hidden behind
    // two blocks of FMAs, not one; past the tile's last block, the next
    // tile's first blocks, so a new tile starts without a DRAM stall.
    const block_ref next = block_after(a, a_next, k0, kc, kb, 1), after = block_after(a, a_next, k0, kc, kb, 2);
    constexpr int64_t kLinesPerRow = kCopy / kLineElems;
    for (int64_t k = 0; k < n; ++k) {
      if (next.rows && k < RM * kLinesPerRow)
        _mm_prefetch(
            static_cast<const char *>(next.rows[k / kLinesPerRow]) + (next.k + (k % kLinesPerRow) * kLineElems) * kElem,
            _MM_HINT_T0);
      if (after.rows && k < RM * kLinesPerRow)
        _mm_prefetch(static_cast<const char *>(after.rows[k / kLinesPerRow]) +
                         (after.k + (k % kLinesPerRow) * kLineElems) * kElem,
                     _MM_HINT_T1);
      __m512 vb[NV];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) vb[v] = _mm512_load_ps(bk + k * kPanelLanes + v * 16);
#pragma GCC unroll 12
      for (int i = 0; i < RM; ++i) {
        const __m512 x = _mm512_set1_ps(copy[i * kStride + k]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(vb[v], x, acc[i][v]);
      }
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) _mm512_store_ps(c + i * kPanelLanes + v * 16, acc[i][v]);
}

using bcast_fn = void (*)(const void *const *, const void *const *, int64_t, int64_t, const float *, float *);

// Rows of a per tile for NV vectors of 16 lanes of b: 24 accumulators for
// NV = 2 and 3. With one vector (N = 9..16, used only where 512-bit FMAs
// run in halves) each a[m][k] feeds one FMA, as a {1to16} memory operand
// (one load and one FMA, no separate broadcast); 12 rows keep 12
// accumulators, 3x the FMA latency at one 512-bit FMA per cycle, and
// measured best against 16 and 24. A 256-bit tile would broadcast each
// a[m][k] into two FMAs, one broadcast per two FMAs instead of none, which
// is why the 512-bit memory-operand form is used.
constexpr int bcast_rows(int nv) { return nv == 3 ? 8 : 12; }

template <bp_type T>
bcast_fn bcast_tile_for(int nv) {
  return nv == 1   ? bcast_tile<bcast_rows(1), 1, T>
         : nv == 2 ? bcast_tile<bcast_rows(2), 2, T>
                   : bcast_tile<bcast_rows(3), 3, T>;
}
constexpr int kMaxBcastRows = 12, kMaxBcastLanes = 48;
// b's panel per K block: half of a 1 MiB L2, so it stays there while the
// rows of a stream past (K = 4096 at N = 32 is one block).
constexpr int64_t kBcastPanelBytes = 512 * 1024;

}  // namespace

bool mul_mat_bcast_avx512_suits(const bp_tensor *t) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int64_t N = t->ne[1];
  return (rows_dense_as(a, BP_TYPE_F32) || rows_dense_as(a, BP_TYPE_F16) || rows_dense_as(a, BP_TYPE_BF16)) &&
         b->type == BP_TYPE_F32 && t->nb[0] == sizeof(float) &&
         ((N >= kMinBcastN && N < kMinPackedNAvx512) ||
          (N >= kMinBcastNHalves && N <= kMaxBcastNHalves && plugins::avx512_runs_in_halves()));
}

void mul_mat_bcast_avx512(const bp_tensor *t, int ith, int nth) {
  const bp_tensor *a = t->src[0], *b = t->src[1];
  const int64_t K = a->ne[0], N = t->ne[1];
  const int nv = static_cast<int>((N + 15) / 16);
  const int64_t lanes_n = nv * 16;
  const int rm = bcast_rows(nv);
  const bcast_fn tile_fn = a->type == BP_TYPE_F16    ? bcast_tile_for<BP_TYPE_F16>(nv)
                           : a->type == BP_TYPE_BF16 ? bcast_tile_for<BP_TYPE_BF16>(nv)
                                                     : bcast_tile_for<BP_TYPE_F32>(nv);
  const thin_units units(t, ith, nth);
  if (units.begin >= units.end) return;
  int64_t kcb = kBcastPanelBytes / (lanes_n * static_cast<int64_t>(sizeof(float)));
  if (kcb > K) kcb = K;
  const size_t panel_bytes = (static_cast<size_t>(kcb * lanes_n) * sizeof(float) + 63) / 64 * 64;
  std::unique_ptr<float, free_deleter> panel(static_cast<float *>(std::aligned_alloc(64, panel_bytes)));
  if (!panel) throw std::bad_alloc();  // the pool reports it, as it does for the packed GEMM's vectors
  float *bp = panel.get();
  alignas(64) float tile[kMaxBcastRows * kMaxBcastLanes];
  const void *ar[kMaxBcastRows], *ar_next[kMaxBcastRows];

  for (int64_t k0 = 0; k0 < K; k0 += kcb) {
    const int64_t kc = K - k0 < kcb ? K - k0 : kcb;
    int64_t packed_batch = -1;
    for (int64_t u = units.begin; u < units.end; ++u) {
      const thin_unit w = units.at(u);
      if (w.batch != packed_batch) {  // b's block, k-major: bp[k * lanes_n + n], zeros past N
        for (int64_t n = 0; n < lanes_n; ++n) {
          if (n >= N) {
            for (int64_t k = 0; k < kc; ++k) bp[k * lanes_n + n] = 0.0f;
            continue;
          }
          const char *row = row_ptr(b, n, w.i2, w.i3) + k0 * b->nb[0];
          for (int64_t k = 0; k < kc; ++k) bp[k * lanes_n + n] = *reinterpret_cast<const float *>(row + k * b->nb[0]);
        }
        packed_batch = w.batch;
      }
      for (int64_t m0 = w.m_begin; m0 < w.m_end; m0 += rm) {
        const int rows = static_cast<int>(w.m_end - m0 < rm ? w.m_end - m0 : rm);
        // A short last tile repeats its first row: computed, never stored.
        for (int i = 0; i < rm; ++i) ar[i] = row_ptr(a, m0 + (i < rows ? i : 0), w.a2, w.a3);
        // The next tile's rows, whose first blocks are requested during this
        // tile's last ones (a short tile repeats its first row here too).
        const int64_t next_m = m0 + rm;
        const int next_rows = static_cast<int>(w.m_end - next_m < rm ? w.m_end - next_m : rm);
        for (int i = 0; i < rm && next_rows > 0; ++i)
          ar_next[i] = row_ptr(a, next_m + (i < next_rows ? i : 0), w.a2, w.a3);
        tile_fn(ar, next_rows > 0 ? ar_next : nullptr, k0, kc, bp, tile);
        for (int64_t n = 0; n < N; ++n) {
          float *d = reinterpret_cast<float *>(elem_ptr(t, m0, n, w.i2, w.i3));
          for (int i = 0; i < rows; ++i) d[i] = (k0 == 0 ? 0.0f : d[i]) + tile[i * lanes_n + n];
        }
      }
    }
  }
}

namespace {

// In place: r[c] becomes column c of the 16 x 16 block whose row j was r[j].
// Four stages of two-input shuffles (64 in all, 4 per output vector): pairs
// of rows interleaved, then pairs of pairs, then 128-bit lanes twice.
BP_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + c], 128-bit lane L: rows 4g..4g+3 at column 4L + c.
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[4 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

template <bp_type T>
BP_AVX512 void pack_rows(const void *const *rows, int count, int64_t k0, int64_t kc, int width, float *dst) {
  for (int j0 = 0; j0 < width; j0 += 16) {
    const int n_rows = width - j0 < 16 ? width - j0 : 16;
    const __mmask16 store_mask = lanes(n_rows);
    for (int64_t k = 0; k < kc; k += 16) {
      const int64_t nk = kc - k < 16 ? kc - k : 16;
      const __mmask16 m = lanes(nk);
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j)
        r[j] = j < n_rows && j0 + j < count ? load_a<T>(rows[j0 + j], k0 + k, m) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t c = 0; c < nk; ++c) _mm512_mask_storeu_ps(dst + (k + c) * width + j0, store_mask, r[c]);
    }
  }
}

}  // namespace

void pack_rows_avx512(const void *const *rows, bp_type type, int count, int64_t k0, int64_t kc, int width, float *dst) {
  (type == BP_TYPE_F16    ? pack_rows<BP_TYPE_F16>
   : type == BP_TYPE_BF16 ? pack_rows<BP_TYPE_BF16>
                          : pack_rows<BP_TYPE_F32>)(rows, count, k0, kc, width, dst);
}

namespace {

// The 12 x 32 kernel's body for R rows of b: b's packed panel keeps its
// stride of 12 floats per k, and a panel's last rows (N not a multiple of
// 12, e.g. 256 = 21 x 12 + 4) then cost R x 2 FMAs per k, not 24.
template <int R>
BP_AVX512 inline void gemm_tile(const float *ap, const float *bp, int64_t kc, float *c, int64_t ldc, int rows, int cols,
                                bool add) {
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    // The tile of c, read (or written) once the k loop ends, requested into
    // L2 now: a unit's c outgrows L2 from 512^3 up and came from L3 or DRAM
    // at the end of every tile. L1 would evict the a panel it holds.
    if (i < rows) {
      _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + 16), _MM_HINT_T1);
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 a0 = _mm512_loadu_ps(ap + k * 32), a1 = _mm512_loadu_ps(ap + k * 32 + 16);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 bv = _mm512_set1_ps(bp[k * 12 + i]);
      acc[i][0] = _mm512_fmadd_ps(a0, bv, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a1, bv, acc[i][1]);
    }
  }
  const __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    if (i >= rows) break;
    float *d = c + i * ldc;
    __m512 v0 = acc[i][0], v1 = acc[i][1];
    if (add) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, d));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, d + 16));
    }
    _mm512_mask_storeu_ps(d, m0, v0);
    _mm512_mask_storeu_ps(d + 16, m1, v1);
  }
}

}  // namespace

// c[i * ldc + j] (+)= sum_k bp[k * 12 + i] * ap[k * 32 + j] for i < rows,
// j < cols: the first K block stores, later ones add.
BP_AVX512 void gemm_micro_avx512(const float *ap, const float *bp, int64_t kc, float *c, int64_t ldc, int rows,
                                 int cols, bool add) {
  if (rows > 8) {
    gemm_tile<12>(ap, bp, kc, c, ldc, rows, cols, add);
  } else if (rows > 4) {
    gemm_tile<8>(ap, bp, kc, c, ldc, rows, cols, add);
  } else {
    gemm_tile<4>(ap, bp, kc, c, ldc, rows, cols, add);
  }
}

}  // namespace bp::cpu
