// repack_gemm_avx512.cpp: the AVX-512 VNNI tiles of the repacked products
// for the 32-value formats (Q4_0, Q8_0, Q5_0): a group of 4 rows
// (repack.hpp) by up to kMaxCols columns of b.
//
// One 512-bit register holds a block of all 4 rows, row r in 128-bit lane r
// (values 0-15 in one register, 16-31 in another), so each of b's 16-value
// halves is broadcast to the 4 lanes and one vpdpbusd per half does 64
// multiply-adds per row. vpdpbusd multiplies unsigned bytes by signed
// ones: b's codes go in unsigned, as value + 128 (rkernels::unsigned_b),
// the weights signed (Q4_0's nibbles less 8, Q5_0's codes less 16, Q8_0's
// values as they are), and the 128 leaves through the weights' own lane
// sums, taken once per block for all the tile's columns: a column's dot
// starts from -128 times them, exact in integers, and costs its two
// vpdpbusd, a conversion and two float operations. With 32 registers a
// tile keeps 8 columns' accumulators beside the decoded block, so a
// block's decode serves 8 columns. Each row's 4 lanes are summed once at
// the end, in a fixed order, so the result does not depend on how rows are
// split between threads. The K-quants run the AVX2 tiles
// (repack_gemm_avx2.cpp).
#include <cstdint>
#include <utility>

#include "repack.hpp"
#include "simd.hpp"

#if defined(BP_X86_SIMD)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c")
#endif

namespace bp::cpu {
namespace {

constexpr int kMaxCols = 16;

inline __m512i load64(const uint8_t *p) { return _mm512_loadu_si512(p); }
// Two 256-bit loads as the low and high halves of one register.
inline __m512i load32x2(const uint8_t *lo, const uint8_t *hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(lo))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(hi)), 1);
}
inline __m512i bcast16(const void *p) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i *>(p)));
}

// Each format gives a block's signed values of the 4 rows (row r in lane
// r): values 0-15 (lo) and 16-31 (hi).
struct q4_0_rows {
  static constexpr size_t kRecord = 72;
  static constexpr size_t kPrefetch = 2048;
  // The record's two pairs' 32 nibble bytes are rows 0, 1, 2, 3 in turn.
  static void decode(const uint8_t *rec, __m512i &lo, __m512i &hi) {
    const __m512i m = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    const __m512i v = load64(rec + 8);
    lo = _mm512_sub_epi8(_mm512_and_si512(v, m), eight);
    hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m), eight);
  }
};

// Q5_0: the fifth bits from the 4 rows' qh words. A broadcast of the 16
// bytes of words puts all of them in every lane; one byte shuffle copies
// byte k / 8 of row r's word to byte k of lane r (bytes 2 and 3 for values
// 16-31), and a test against bit k % 8 gives the mask of the values that
// keep their 16; the others lose it (code - 16).
struct q5_0_rows {
  static constexpr size_t kRecord = 88;
  static constexpr size_t kPrefetch = 1024;
  static void decode(const uint8_t *rec, __m512i &lo, __m512i &hi) {
    const __m512i m = _mm512_set1_epi8(0x0F), m16 = _mm512_set1_epi8(16);
    const __m512i bit = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ULL));
    const __m512i words = bcast16(rec + 8);
    const auto fifth = [&](int byte) {  // byte |byte| (and byte + 1) of lane r's word r
      constexpr long long kOnes = 0x0101010101010101LL;
      const __m512i idx =
          _mm512_setr_epi64(kOnes * byte, kOnes * (byte + 1), kOnes * (4 + byte), kOnes * (5 + byte),
                            kOnes * (8 + byte), kOnes * (9 + byte), kOnes * (12 + byte), kOnes * (13 + byte));
      return _mm512_test_epi8_mask(_mm512_shuffle_epi8(words, idx), bit);
    };
    const __m512i v = load64(rec + 24);
    lo = _mm512_and_si512(v, m);
    lo = _mm512_mask_sub_epi8(lo, _knot_mask64(fifth(0)), lo, m16);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
    hi = _mm512_mask_sub_epi8(hi, _knot_mask64(fifth(2)), hi, m16);
  }
};

// Q8_0: per pair the record holds both rows' values 0-15, then both rows'
// 16-31.
struct q8_0_rows {
  static constexpr size_t kRecord = 136;
  static constexpr size_t kPrefetch = 0;
  static void decode(const uint8_t *rec, __m512i &lo, __m512i &hi) {
    lo = load32x2(rec + 8, rec + 72);
    hi = load32x2(rec + 40, rec + 104);
  }
};

// Row r's result from lanes 4r-4r+3, in a fixed order.
inline void store_rows(__m512 v, float *out) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  for (int r = 0; r < kPackRows; ++r) out[r] = (f[4 * r] + f[4 * r + 1]) + (f[4 * r + 2] + f[4 * r + 3]);
}

template <class F, int RN>
void rtile(const uint8_t *g, const char *b, size_t ldb, int64_t K, float *out, int64_t ldo) {
  const int64_t nb = K / 32;
  // Column c's codes at b + c * ldb, its scales |scales| bytes further.
  const auto scales = static_cast<size_t>(nb) * 32;
  __m512 acc[RN];
  for (int c = 0; c < RN; ++c) acc[c] = _mm512_setzero_ps();
  // [d0 x4, d1 x4, d2 x4, d3 x4] from the record's 4 f16 scales.
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t *rec = g + static_cast<size_t>(j) * F::kRecord;
    // As the AVX2 tiles: a product of few columns is bound by the weights'
    // stream, which asking ahead keeps fuller (docs/plugins/cpu.md).
    if constexpr (RN <= 2 && F::kPrefetch > 0)
      _mm_prefetch(reinterpret_cast<const char *>(rec + F::kPrefetch), _MM_HINT_T0);
    const __m512 da = _mm512_permutexvar_ps(
        spread, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(rec)))));
    __m512i lo, hi;
    F::decode(rec, lo, hi);
    // -128 times each lane's 8 weights: where every column's dot starts.
    const __m512i start = _mm512_sub_epi32(
        _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, lo), k128, hi));
    const char *y = b + 32 * j;
    const size_t yd = scales + 4 * static_cast<size_t>(j);
    for (int c = 0; c < RN; ++c, y += ldb) {
      __m512i dot = _mm512_dpbusd_epi32(start, bcast16(y), lo);
      dot = _mm512_dpbusd_epi32(dot, bcast16(y + 16), hi);
      const float dy = *reinterpret_cast<const float *>(y - 32 * j + yd);
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(da, _mm512_set1_ps(dy)), acc[c]);
    }
  }
  for (int c = 0; c < RN; ++c) store_rows(acc[c], out + c * ldo);
}

template <class F, int... RN>
rtile_fn tile_for(int rn, std::integer_sequence<int, RN...>) {
  static const rtile_fn tiles[] = {rtile<F, RN + 1>...};
  return tiles[rn - 1];
}

rtile_fn tile_vnni(qtype q, int rn) {
  const auto cols = std::make_integer_sequence<int, kMaxCols>{};
  switch (q) {
    case qtype::q4_0:
      return tile_for<q4_0_rows>(rn, cols);
    case qtype::q8_0:
      return tile_for<q8_0_rows>(rn, cols);
    case qtype::q5_0:
      return tile_for<q5_0_rows>(rn, cols);
    default:
      return rkernels_avx2().tile(q, rn);
  }
}

int max_cols_vnni(qtype q) { return reads_rkact(q) ? rkernels_avx2().max_cols(q) : kMaxCols; }
bool unsigned_b_vnni(qtype q) { return !reads_rkact(q); }

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const rkernels &rkernels_avx512_vnni() {
  static const rkernels k = {"avx512-vnni", max_cols_vnni, tile_vnni, unsigned_b_vnni};
  return k;
}

}  // namespace bp::cpu

#else
namespace bp::cpu {
const rkernels &rkernels_avx512_vnni() { return rkernels_avx2(); }
}  // namespace bp::cpu
#endif
