// quant_gemm_avx2.cpp: the AVX2 tiles of quantized MUL_MAT
// (quant_gemm_simd.hpp), 16 ymm registers: 4 rows of a by up to 2 columns
// of b (8 accumulators, the 4 rows' decoded blocks and temporaries).
#include <cstdint>
#include <cstring>

#include "quant.hpp"
#include "quant_blocks.hpp"
#include "simd.hpp"

#if defined(BP_X86_SIMD)
// GCC takes a target for the region; clang, which ignores that pragma,
// gets the same features as an attribute on every function in it.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace bp::cpu {
namespace {

struct Isa {
  static __m256i dot_u(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  static __m256i dot_s(__m256i x, __m256i y) { return dot_u(_mm256_abs_epi8(x), _mm256_sign_epi8(y, x)); }
};

#include "quant_gemm_simd.hpp"

constexpr int kRows = 4;

qtile_fn tile_avx2(qtype q, int rm, int rn) { return tile_of_format<kRows, 1, 2>(q, rm, rn); }

int rows_avx2(int) { return kRows; }

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const qkernels &qkernels_avx2() {
  static const qkernels k = {"avx2", 2, rows_avx2, tile_avx2};
  return k;
}

}  // namespace bp::cpu

#else
namespace bp::cpu {
const qkernels &qkernels_avx2() { return qkernels_baseline(); }
}  // namespace bp::cpu
#endif
